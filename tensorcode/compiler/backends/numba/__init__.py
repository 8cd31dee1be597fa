"""The Numba backend: the schedule rendered as one Python module of explicit loops,
compiled by Numba and cached on disk (``backend``), optionally loaded natively through
llvmlite (``native``). Reached through ``backends.get("numba")``.
"""
