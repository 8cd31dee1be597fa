"""The sealed network and its plans: parameter tables, ``Network``, ``Entry``, ``Plan``,
step plans and saved plans. The top of the compiler: it drives ``lower`` and reaches a
backend through ``backends.get``.

Inside, imports point one way (``tests/test_architecture.py`` keeps the order):
``tables`` < ``document`` < ``network`` < ``tape`` < ``saved`` < ``plan`` < ``step`` <
``lowering``. A network lowers to plans and a saved plan rebuilds a network, so one link
runs against that order at run time, by value: this ``__init__`` (which Python runs before
any module of the package) installs ``lowering.lower`` as what ``Entry.lower`` calls.
"""

from . import lowering, network

network.install_lowering(lowering.lower)
