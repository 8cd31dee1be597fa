"""Stand-ins for compiled programs, so the loop's policy is tested without the compiler:
a reply names a Python rule from a table; the 'compiler' looks the name up."""

from __future__ import annotations

import numpy as np

from tensorcode.errors import CompileError


class FakeProgram:
    """Callable like an Algorithm: one case dict in, an output dict out."""

    def __init__(self, rule, parameters=None):
        self.rule = rule
        self.parameters = dict(parameters or {})

    def __call__(self, inputs):
        return self.rule(inputs)

    def batch(self, inputs):
        count = len(next(iter(inputs.values())))
        rows = [self.rule({k: v[i] for k, v in inputs.items()}) for i in range(count)]
        return {name: np.array([row[name] for row in rows]) for name in rows[0]}


def install(monkeypatch, rules):
    """Route parse/compile through ``rules``: reply ``"rule:NAME"`` compiles to
    ``FakeProgram(rules[NAME])``; ``"bad:MESSAGE"`` fails to compile with MESSAGE."""
    from tensorcode.distill import program as programs

    def parse_reply(text):
        return text.strip(), {}

    def compile_program(source, parameters, inputs, outputs, executor):
        kind, _, name = source.partition(":")
        if kind == "bad":
            raise CompileError(name, line=1, column=1, excerpt=source)
        return FakeProgram(rules[name]), True

    monkeypatch.setattr(programs, "parse_reply", parse_reply)
    monkeypatch.setattr(programs, "compile_program", compile_program)


def threshold_workload(count=40, seed=3):
    """Cases with one feature x in [0, 10) (all distinct) and the teacher's route
    ``x >= 5``."""
    rng = np.random.default_rng(seed)
    xs = rng.permutation(count) * (10.0 / count) + 0.01 * rng.random(count)
    workload = [{"x": np.array([x, 0.0])} for x in xs]
    targets = [{"route": float(x >= 5.0)} for x in xs]
    return workload, targets
