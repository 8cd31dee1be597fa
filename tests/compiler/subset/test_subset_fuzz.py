"""Fuzzing the author subset: random token streams and byte-level mutations of valid
programs always end in a CompileError or a valid program, never another exception,
never a hang, never an effect outside the compiler."""

from __future__ import annotations

import builtins
import contextlib
import importlib
import random
import signal
import sys

import numpy as np
import pytest

from tensorcode.compiler.core.verify import verify
from tensorcode.compiler.subset import compile_program
from tensorcode.errors import CompileError

INPUTS = {"features": (12,)}
OUTPUTS = {"route": (), "covered": ()}
PARAMETERS = {"threshold": 0.5, "w": [0.5] * 12}

SEEDS = [
    '''def route(features, threshold, w):
    # keyword groups
    billing = 0.0
    for i in range(0, 4):
        billing += features.slice(i, i + 1).reshape()
    technical = features.slice(4, 8).sum()
    other = features.slice(8, 12).max()
    route = where(billing >= technical, 0.0, 1.0)
    route = where(other > maximum(billing, technical), 2.0, route)
    covered = where((features * w).sum() >= threshold, 1.0, 0.0)
    return {"route": route, "covered": covered}
''',
    '''def route(features, threshold, w):
    scores = [features.slice(0, 6).sum(), features.slice(6, 12).sum()]
    best = scores.max()
    route = where(scores.slice(0, 1).reshape() >= best, 0.0, 1.0)
    s = 0.0
    for i in range(12):
        for j in range(i, i + 1):
            s = s + features.slice(j, j + 1).reshape() * w.slice(i, i + 1).reshape() ** 2
    covered = clip(sigmoid(s - threshold) * 2, 0, 1) > 0.5
    return {"route": route, "covered": covered}
''',
    '''def route(features, threshold, w):
    m = features.reshape(3, 4)
    rows = m.sum(axis=1, keepdims=True)
    v = (m / (rows + 1)).mean(0) @ w.reshape(4, 3)
    route = where(v.max() > threshold, exp(v).sum(), tanh(v).min())
    covered = 1 - (abs(v) < 1e-3).max()
    return {"route": route, "covered": covered}
''',
]

TOKENS = ["def", "route", "(", ")", ":", "\n", "    ", "        ", "return", "{", "}", "[", "]",
          ",", "=", "+=", "*=", "+", "-", "*", "/", "//", "%", "**", "@", "<", "<=", "==",
          ">", ".", "features", "threshold", "w", "x", "i", "for", "in", "range", "if",
          "else", "while", "and", "or", "not", "lambda", "import", "np", "where", "exp",
          "slice", "reshape", "sum", "max", "dot", "clip", "0", "1", "12", "0.5", "1e9",
          "'route'", '"covered"', "#", "pass", "None", "True", "\\", "'''", '"', "\t", " ",
          "axis", "keepdims", "-1", "99999999999999999999"]


class Hang(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: float):
    def fire(signum, frame):
        raise Hang(f"compiling took longer than {seconds} s")
    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def attempt(source: str, outcomes: dict) -> None:
    """Compile one input; only a CompileError or a valid, runnable program is allowed."""
    try:
        program = compile_program(source, INPUTS, OUTPUTS, PARAMETERS)
    except CompileError as error:
        assert error.line is not None and error.column is not None, (source, error)
        assert error.message, source
        outcomes["rejected"] += 1
        return
    verify(program.network.graph)
    feeds = {program.inputs["features"]: np.ones(12)}
    with np.errstate(all="ignore"):
        run = program.network.forward(program.network.parameters(), feeds)
        for name, symbol in program.outputs.items():
            assert run.of(symbol).shape == OUTPUTS[name]
    outcomes["compiled"] += 1


def mutate(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6)
        at = rng.randrange(len(data) + 1)
        if kind == 0 and data:  # delete a byte
            del data[min(at, len(data) - 1)]
        elif kind == 1:  # insert a random byte
            data.insert(at, rng.randrange(256))
        elif kind == 2 and data:  # replace with a random printable byte
            data[min(at, len(data) - 1)] = rng.randrange(32, 127)
        elif kind == 3:  # insert a syntactically loaded character
            data.insert(at, ord(rng.choice("()[]{}:,.=+-*/<>#'\" \n\t\\")))
        elif kind == 4 and data:  # duplicate a span
            end = min(len(data), at + rng.randint(1, 30))
            data[at:at] = data[at:end]
        else:  # delete a span
            del data[at:at + rng.randint(1, 20)]
    return bytes(data)


#: the import system's modules: a lazy import (a backend loaded on first use) runs the
#: imported module's code through ``exec`` from here, which is not author source
IMPORT_SYSTEM = frozenset({"importlib._bootstrap", "importlib._bootstrap_external",
                           "_frozen_importlib", "_frozen_importlib_external"})


def refusing(real, evaluated: list):
    """``real`` (``eval`` or ``exec``) refusing every caller but the import system, so
    the check holds whichever modules earlier tests happened to import."""
    def call(*args, **kwargs):
        if sys._getframe(1).f_globals.get("__name__") in IMPORT_SYSTEM:
            return real(*args, **kwargs)
        evaluated.append(args[:1])  # the compiler must never hand source to Python
        raise AssertionError("eval/exec called while compiling an author program")
    return call


def test_the_guard_lets_imports_through_and_refuses_everything_else(monkeypatch):
    evaluated: list = []
    monkeypatch.setattr(builtins, "exec", refusing(builtins.exec, evaluated))
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    importlib.import_module("colorsys")  # a module's code, run by the import system
    with pytest.raises(AssertionError, match="eval/exec called"):
        exec("x = 1", {})
    assert evaluated == [("x = 1",)]


def test_fuzz_random_tokens_and_mutations_never_escape_compile_error(monkeypatch):
    evaluated: list = []
    monkeypatch.setattr(builtins, "eval", refusing(builtins.eval, evaluated))
    monkeypatch.setattr(builtins, "exec", refusing(builtins.exec, evaluated))
    rng = random.Random(20240611)
    outcomes = {"rejected": 0, "compiled": 0}
    cases = 0
    with deadline(180.0):
        for _ in range(4_000):  # random token streams
            words = [rng.choice(TOKENS) for _ in range(rng.randint(1, 40))]
            source = "".join(w if w in ("\n", "    ", "        ") else w + rng.choice(["", " "])
                             for w in words)
            if rng.random() < 0.5:
                source = "def route(features, threshold, w):\n    " + source
            attempt(source, outcomes)
            cases += 1
        for _ in range(6_500):  # byte-level mutations of valid programs
            seed = rng.choice(SEEDS).encode()
            mutated = mutate(seed, rng)
            text = mutated.decode("utf-8", errors="replace" if rng.random() < 0.5
                                  else "surrogateescape")
            attempt(text, outcomes)
            cases += 1
    assert cases >= 10_000 and not evaluated
    # both outcomes happen, so the fuzzer is not only exercising the first parse error
    assert outcomes["compiled"] > 50 and outcomes["rejected"] > 5_000, outcomes


def test_seed_programs_compile():
    for source in SEEDS:
        outcomes = {"rejected": 0, "compiled": 0}
        attempt(source, outcomes)
        assert outcomes["compiled"] == 1
