"""Two optimizers, one recorded gradient: plain SGD against Adam on one regression.

The example's code is `tensorcode/guide/two_optimizers.py`; run this script to see its
lines, or `--plot PATH` to draw its plate (needs `pip install 'tensorcode[plot]'`).
"""

from tensorcode.guide import run_example

if __name__ == "__main__":
    run_example("two_optimizers")
