"""Checkpoints are pure state: named snapshots under structured paths.

The example's code is `tensorcode/guide/named_checkpoint.py`; run this script to see its lines, or
`--plot PATH` to draw its plate (needs `pip install 'tensorcode[plot]'`).
"""

from tensorcode.guide import run_example

if __name__ == "__main__":
    run_example("named_checkpoint")
