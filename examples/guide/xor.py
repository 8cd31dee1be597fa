"""Feeds are the data: XOR learned by a [2, 4, 1] tanh MLP fed two samples per run.

The example's code is `tensorcode/guide/xor.py`; run this script to see its lines, or
`--plot PATH` to draw its plate (needs `pip install 'tensorcode[plot]'`).
"""

from tensorcode.guide import run_example

if __name__ == "__main__":
    run_example("xor")
