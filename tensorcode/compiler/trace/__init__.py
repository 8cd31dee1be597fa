"""Recording: ``Expr`` and the builder protocol, the tape, composites, autodiff and random
draws. Tracing turns Python calls into IR; it imports only ``core``.
"""
