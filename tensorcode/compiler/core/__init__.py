"""The compiler's base layer: the IR, the op registry and the verifier.

Nothing here records, lowers or runs anything; every other layer imports it.
"""
