"""Operations: values against NumPy, plan reuse across bucketed sizes, fingerprints."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from tensorcode.errors import BackendError, ShapeError
from tensorcode.operations import (
    Classifier,
    EmbeddingOperation,
    LinearOperation,
    MlpOperation,
    Operation,
    TextEncoder,
)
from tensorcode.operations.text import ngram_ids, tokenize

REF = "reference"


def test_linear_matches_numpy_and_reuses_plans_across_partial_batches():
    layer = LinearOperation(3, 2, seed=4, backend=REF)
    weights, bias = layer.parameters.payloads()
    rng = np.random.default_rng(0)
    for rows in (3, 4, 1, 2):
        x = rng.normal(size=(rows, 3)).astype(np.float32)
        np.testing.assert_allclose(layer(x), x @ weights + bias, rtol=1e-6, atol=1e-6)
        assert layer(x).shape == (rows, 2)
    # rows 3 and 4 share the 4-row bucket, 1 and 2 have their own buckets
    assert layer.plan_count() == 3
    vector = rng.normal(size=3).astype(np.float32)
    np.testing.assert_allclose(layer(vector), vector @ weights + bias, rtol=1e-6, atol=1e-6)


def test_linear_rejects_wrong_width():
    with pytest.raises(ShapeError, match="last axis must be 3"):
        LinearOperation(3, 2, backend=REF)(np.zeros((2, 4)))


def test_mlp_matches_numpy():
    mlp = MlpOperation([2, 5, 1], activation="tanh", seed=1, backend=REF)
    w0, b0, w1, b1 = mlp.parameters.payloads()
    x = np.linspace(-1, 1, 14, dtype=np.float32).reshape(7, 2)
    expected = np.tanh(x @ w0 + b0) @ w1 + b1
    np.testing.assert_allclose(mlp(x), expected, rtol=1e-5, atol=1e-6)
    assert [name for name, _ in mlp.named_parameters()] == ["0.weights", "0.bias",
                                                             "1.weights", "1.bias"]


def test_embedding_looks_up_rows():
    table = EmbeddingOperation(6, 3, seed=2, backend=REF)
    (weights,) = table.parameters.payloads()
    np.testing.assert_array_equal(table([5, 0, 5]), weights[[5, 0, 5]])
    with pytest.raises(IndexError):
        table([6])


def test_text_encoder_hashes_stably_and_means_the_rows():
    encoder = TextEncoder(4, buckets=97, ngrams=(1, 2), seed=3, backend=REF)
    (table,) = encoder.parameters.payloads()
    text = "The cat, the HAT!"
    assert tokenize(text) == ["the", "cat", "the", "hat"]
    # independent recomputation of the documented hash
    expected_ids = []
    for n in (1, 2):
        tokens = ["the", "cat", "the", "hat"]
        for i in range(len(tokens) - n + 1):
            gram = f"{n}\x1f" + "\x1f".join(tokens[i:i + n])
            digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
            expected_ids.append(int.from_bytes(digest, "little") % 97)
    assert ngram_ids(text, (1, 2), 97) == expected_ids
    np.testing.assert_allclose(encoder(text), table[expected_ids].mean(axis=0), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_array_equal(encoder("...!"), np.zeros(4, np.float32))


def test_text_encoder_pads_lengths_to_few_plans_and_batches_agree():
    encoder = TextEncoder(3, buckets=50, backend=REF)
    texts = ["a", "a b", "a b c d", "one two three four five six seven"]
    singles = [encoder(t) for t in texts]
    assert encoder.plan_count() == 2  # up to 8 n-grams share a plan; 13 use 16
    batch = encoder(texts)
    np.testing.assert_allclose(batch, np.stack(singles), rtol=1e-6, atol=1e-7)


def test_classifier_labels_and_prediction():
    head = Classifier(3, ["spam", "ham"], seed=0, backend=REF)
    weights, bias = head.parameters.payloads()
    v = np.array([1.0, -2.0, 0.5], np.float32)
    logits = head(v)
    np.testing.assert_allclose(logits, v @ weights + bias, rtol=1e-6)
    assert head.predict(v) == ["spam", "ham"][int(np.argmax(logits))]
    assert head.label_index("ham") == 1
    with pytest.raises(KeyError, match="knows"):
        head.label_index("eggs")
    with pytest.raises(ValueError):
        Classifier(3, ["a", "a"])


def test_fingerprint_is_sha256_of_canonical_meaning_not_values():
    head = Classifier(3, ["a", "b"], seed=0, backend=REF)
    document = {"qualified_name": "tensorcode.ops.Classifier",
                "configuration": {"dim": 3, "labels": ["a", "b"], "dtype": "float32"},
                "replay": "pure",
                "parameters": [["weights", [3, 2], "float32"], ["bias", [2], "float32"]]}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    assert head.fingerprint() == hashlib.sha256(text.encode()).hexdigest()
    before = head.fingerprint()
    head.load_payloads([np.ones((3, 2), np.float32), np.ones(2, np.float32)])
    assert head.fingerprint() == before  # trained values do not change the meaning
    assert Classifier(3, ["a", "b"], seed=9).fingerprint() == before
    assert Classifier(3, ["a", "c"]).fingerprint() != before
    assert Classifier(4, ["a", "b"]).fingerprint() != before


def test_configuration_must_be_json_safe():
    class Bad(LinearOperation):
        def configuration(self):
            return {"f": float("nan")}

    with pytest.raises(ValueError):
        Bad(2, 2)


def test_numba_backend_agrees_with_the_reference_and_unknown_backends_are_refused():
    encoder = TextEncoder(4, buckets=64, backend="numba")
    reference = TextEncoder(4, buckets=64, backend=REF)
    for text in ["hello there world", "x"]:
        np.testing.assert_allclose(encoder(text), reference(text), rtol=1e-5, atol=1e-6)
    with pytest.raises(BackendError, match="unknown backend"):
        LinearOperation(2, 2, backend="gpu")


def test_external_operation_runs_python_compute():
    class Lookup(Operation):
        qualified_name = "tests.Lookup"
        replay = "external"

        def __init__(self):
            self._initialize()

        def compute(self, key):
            return {"key": key}

    assert Lookup()("k") == {"key": "k"}
    assert Lookup().parameter_signature() == []
