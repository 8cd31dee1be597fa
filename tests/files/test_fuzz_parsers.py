"""The text parsers under the mutation fuzzer (``loader_fuzzing``): subset programs
(compiled and called on the reference backend) and weight edit statements (parsed,
run and applied). Every outcome is valid or a ``TensorCodeError``, never a hang."""

from __future__ import annotations

from typing import Any

from loader_fuzzing import (
    CASES,
    FEATURES,
    INPUTS,
    OUTPUTS,
    PARAMETERS,
    PROGRAM,
    REF,
    check,
    mutate_text,
    run_cases,
    weights_base,
)

import tensorcode.algorithm as algorithms


def test_subset_programs(record_property):
    source = PROGRAM.encode()

    def attempt(data: bytes) -> Any:
        text = data.decode("utf-8", "replace")
        return algorithms.compile(text, INPUTS, OUTPUTS, PARAMETERS, executor=REF)(FEATURES)

    tally = run_cases("subset programs (compile + call)", CASES, 29,
                      lambda rng: mutate_text(source, rng), attempt)
    check(tally, record_property)




EDITS = b"w[0, 1] = 2.5\nw[:, 2:4] = 0\nb[3] += -5\nh[1] *= 2\ni[0] = 4\nm[1] = 1\n"


def test_edit_statements(record_property):
    from tensorcode.weights import Patch

    base = weights_base()
    scales = {"w": 0.5, "b": 2.0, "i": 1.0}

    def attempt(data: bytes) -> Any:
        patch = Patch.from_edits(base, data.decode("utf-8", "replace"), scales=scales)
        return patch.apply(base)

    tally = run_cases("edit statements (Patch.from_edits + apply)", CASES, 29,
                      lambda rng: mutate_text(EDITS, rng), attempt)
    check(tally, record_property)


