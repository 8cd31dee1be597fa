"""Learning rates are clones: one spec, several states.

The example's code is `tensorcode/guide/learning_rates.py`; run this script to see its lines, or
`--plot PATH` to draw its plate (needs `pip install 'tensorcode[plot]'`).
"""

from tensorcode.guide import run_example

if __name__ == "__main__":
    run_example("learning_rates")
