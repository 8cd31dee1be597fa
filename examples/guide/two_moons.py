"""Twins: the two moons separated by a [2, 16, 16, 1] tanh MLP.

The example's code is `tensorcode/guide/two_moons.py`; run this script to see its lines, or
`--plot PATH` to draw its plate (needs `pip install 'tensorcode[plot]'`).
"""

from tensorcode.guide import run_example

if __name__ == "__main__":
    run_example("two_moons")
