"""The benchmark harness: ``python -m benchmarks`` (or ``tensorcode bench``)."""
