"""Ready-made models built on ``tc.nn``: ``gpt2`` (GPT-2 on one tape with its decode
twin, the released-checkpoint loader and ``generate``)."""
