"""The sealed network and its plans: parameter tables, ``Network``, ``Entry``, ``Plan``,
step plans and saved plans. The top of the compiler: it drives ``lower`` and reaches a
backend through ``backends.get``.

``lower(entry, backend, approximate, optimizer)`` is how an entry becomes a plan
(``entry.lower(...)`` is a thin call into it). Inside, imports point one way
(``tests/test_architecture.py`` keeps the order): ``tables`` < ``document`` < ``network``
< ``tape`` < ``saved`` < ``plan`` < ``step`` < ``lowering``; the one import against it is
``Entry.lower``'s call into ``lowering``, made when it runs.
"""

from .lowering import lower

__all__ = ["lower"]
