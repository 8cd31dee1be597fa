"""The compiler: IR, op registry, tape, autodiff, passes and backends."""
