"""The Philox stream as scalar graphs (``lower/random_fills.py``): evaluated with the
registry's NumPy references, they compute ``core/philox.py`` bit for bit."""

from __future__ import annotations

import numpy as np

from tensorcode.compiler.core import philox
from tensorcode.compiler.lower import random_fills
from tensorcode.compiler.lower.approximations import evaluate_graph
from tensorcode.compiler.lower.statements import Ref

MASK = 0xFFFFFFFF


def _words(n: int, seed: int) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Random keys, base counters and block numbers (counters that carry into the high
    word and wrap past 2**64 among them), the graph's four words and philox4x32's."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    base[:3] = [0, 2**64 - 1, MASK]
    number = rng.integers(0, 2**40, n, dtype=np.uint64)
    number[:3] = [0, 5, 1]
    k0, k1 = (rng.integers(0, 2**32, n, dtype=np.uint64) for _ in range(2))
    k0[1] = k1[1] = MASK
    g = random_fills.Graph("t")
    refs = random_fills.block(g, [Ref("k0"), Ref("k1"), Ref("lo"), Ref("hi")], Ref("n"))
    values = {"k0": k0, "k1": k1, "lo": base & np.uint64(MASK), "hi": base >> np.uint64(32),
              "n": number}
    values = {name: v.astype(np.int64) for name, v in values.items()}
    got = [evaluate_graph(g.lets, ref, values) for ref in refs]
    counter = base + number  # wraps modulo 2**64
    zero = np.zeros(n, np.uint32)
    want = philox.philox4x32(counter.astype(np.uint32), (counter >> np.uint64(32)).astype(
        np.uint32), zero, zero, k0.astype(np.uint32), k1.astype(np.uint32))
    return values, [*got, *(w.astype(np.int64) for w in want)]


def test_the_rounds_are_philox4x32_bit_for_bit():
    _, words = _words(50_000, 0)
    for j in range(4):
        assert words[j].dtype == np.int64
        assert np.array_equal(words[j], words[4 + j]), j


def test_the_transforms_are_philoxs_bit_for_bit():
    _, words = _words(4_000, 1)
    w = [Ref(f"w{j}") for j in range(4)]
    values = {f"w{j}": words[j] for j in range(4)}
    g = random_fills.Graph("z")
    normal = evaluate_graph(g.lets, random_fills.normal(g, w), values)
    uniform = evaluate_graph([], random_fills.unit_f64(w[0], w[1]), values)
    floats = np.stack(words[:4], axis=1).astype(np.float64)
    assert np.array_equal(normal, [philox.normal(*row) for row in floats.tolist()])
    assert np.array_equal(uniform, [philox.unit_f64(a, b) for a, b in floats[:, :2].tolist()])
    g = random_fills.Graph("u")
    single = evaluate_graph(g.lets, random_fills.values(
        g, "random_uniform", "float32", {}, w)[0], values)
    assert single.dtype == np.float32
    assert np.array_equal(single, (floats[:, 0] // 256 * philox.TWO_M24).astype(np.float32))
    g = random_fills.Graph("b")
    p = 0.3
    drawn = evaluate_graph(g.lets, random_fills.values(
        g, "bernoulli", "int32", {"p": p}, w)[2], values)
    assert np.array_equal(drawn, words[2] < philox.bernoulli_threshold(p))
    assert 0.28 < drawn.mean() < 0.32
