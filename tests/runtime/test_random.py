"""The generator: one seeded stream whose state is plain JSON data."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tensorcode as tc


def draws(generator):
    return [generator.uniform(-1, 1, (3,)), generator.normal(0, 2, (2, 2), "float64"),
            generator.integers(0, 10, (4,)), generator.bernoulli(0.3, (5,)),
            generator.permutation(6), generator.choice(10, 3, replace=False)]


def same(a, b):
    return all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))


def test_same_seed_same_stream_and_different_seeds_differ():
    assert same(draws(tc.random.Generator(3)), draws(tc.random.Generator(3)))
    assert not same(draws(tc.random.Generator(3)), draws(tc.random.Generator(4)))


def test_state_is_json_and_resumes_the_exact_stream():
    generator = tc.random.Generator(12)
    draws(generator)
    generator.uniform(0, 1, (1,))  # leave an odd number of 32-bit halves behind
    state = json.loads(json.dumps(generator.get_state()))
    expected = draws(generator)
    other = tc.random.Generator(0)
    other.set_state(state)
    assert same(draws(other), expected)
    assert other.seed == 12


def test_clone_is_independent():
    generator = tc.random.Generator(1)
    twin = generator.clone()
    first = draws(generator)
    assert same(draws(twin), first)
    assert not same(draws(generator), first)


@pytest.mark.parametrize("change", [
    lambda s: s.pop("inc"),
    lambda s: s.update(extra=1),
    lambda s: s.update(algorithm="MT19937"),
    lambda s: s.update(state=-5),
    lambda s: s.update(state="12"),
    lambda s: s.update(has_uint32=True),
], ids=["missing", "extra", "algorithm", "negative", "string", "bool"])
def test_bad_state_raises_and_changes_nothing(change):
    generator = tc.random.Generator(7)
    generator.normal(0, 1, (3,))
    before = generator.get_state()
    bad = dict(before)
    change(bad)
    with pytest.raises(tc.ArtifactError, match=r"generator|keys|algorithm|int"):
        generator.set_state(bad)
    assert generator.get_state() == before


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3"])
def test_seed_must_be_a_non_negative_int(seed):
    with pytest.raises(ValueError):
        tc.random.Generator(seed)


def test_initializers_are_deterministic_for_a_seed():
    a, b = tc.init.uniform(3, 3.0), tc.init.uniform(3, 3.0)
    np.testing.assert_array_equal(a((48, 1)), b((48, 1)))
    assert np.all(np.abs(a((100,))) <= 3.0)
    assert a((2,)).dtype == np.float32
