"""Spec and state: training does not version the graph.

The example's code is `tensorcode/guide/spec_and_state.py`; run this script to see its lines, or
`--plot PATH` to draw its plate (needs `pip install 'tensorcode[plot]'`).
"""

from tensorcode.guide import run_example

if __name__ == "__main__":
    run_example("spec_and_state")
