"""The sealed network and its plans: parameter tables, ``Network``, ``Entry``, ``Plan``,
step plans and saved plans. The top of the compiler: it drives ``lower`` and reaches a
backend through ``backends.get``.
"""
