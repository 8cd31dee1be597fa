"""Backends: ``reference`` (NumPy, the oracle) and ``numba`` (compiled, lazy import)."""
