"""Twins: a tanh MLP fit to a noisy sine, read back through the trained expression.

The example's code is `tensorcode/guide/noisy_sine.py`; run this script to see its lines, or
`--plot PATH` to draw its plate (needs `pip install 'tensorcode[plot]'`).
"""

from tensorcode.guide import run_example

if __name__ == "__main__":
    run_example("noisy_sine")
