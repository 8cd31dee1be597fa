"""The runtime: networks, parameter tables, randomness, checkpoints."""
