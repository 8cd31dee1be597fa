"""Lowering: graph passes, fusion and the schedule, ending in the kernel records a
backend renders to code.
"""
