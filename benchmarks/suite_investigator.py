"""The Investigator: exact episodic-index search and verifier predictions.

- index search: 100,000 random unit documents of dimension 64, top-10 for one query per
  call and for batches of 64 queries. TensorCode's ``EpisodicIndex.search_vectors``
  (one float32 matrix product, ``argpartition``, a sort of the k found) against a NumPy
  brute force (the same product, then a full ``argsort`` of every score) and FAISS's
  flat inner-product index (``IndexFlatIP``, when ``faiss-cpu`` is installed), all in
  this process. Reported as queries per second (higher is better).
- verification: ``Investigator.verify`` on one premise/hypothesis pair (the default
  config) against the same architecture in PyTorch eager with the same featurization,
  ``torch.no_grad`` forward and softmax, in its own single-threaded process.
"""

from __future__ import annotations

import sys

from .harness import Row, median_time, module_available, run_in_subprocess

SUITE = "investigator"
DOCUMENTS, DIM, K = 100_000, 64, 10
PAIR = {"premise": "writes fail on the billing api: no space left on device",
        "hypothesis": "the billing disk is full"}


def _vectors():  # type: ignore[no-untyped-def]
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((DOCUMENTS, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = rng.standard_normal((64, DIM)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return x, q


def run(quick: bool) -> list[Row]:
    import numpy as np

    from tensorcode.tools.episodic import EpisodicIndex
    from tensorcode.tools.investigator import Investigator

    repeat = 10 if quick else 40
    x, q = _vectors()
    index = EpisodicIndex.from_vectors([str(k) for k in range(DOCUMENTS)], x)
    rows = []

    def numpy_search(queries: np.ndarray) -> np.ndarray:
        return np.argsort(-(queries @ x.T), axis=1)[:, :K]

    faiss_index = None
    if module_available("faiss"):
        import faiss

        faiss.omp_set_num_threads(1)
        faiss_index = faiss.IndexFlatIP(DIM)
        faiss_index.add(x)
        got = faiss_index.search(q, K)[1]
        assert np.array_equal(got, index.top_k(q, K)[0]), "FAISS and the index disagree"
    for batch in (1, 64):
        queries = q[:batch]
        unit = "query" if batch == 1 else "queries"
        work = f"index search {DOCUMENTS:,} x {DIM}, top-{K}, {batch} {unit}/call"
        t = median_time(lambda: index.search_vectors(queries, K), repeat=repeat, warmup=2)
        rows.append(Row(SUITE, work, "tensorcode", batch / t, unit="queries/s",
                        lower_is_better=False, note="matmul + argpartition"))
        t = median_time(lambda: numpy_search(queries), repeat=repeat, warmup=2)
        rows.append(Row(SUITE, work, "numpy brute force", batch / t, unit="queries/s",
                        lower_is_better=False, note="matmul + full argsort"))
        if faiss_index is not None:
            t = median_time(lambda: faiss_index.search(queries, K), repeat=repeat, warmup=2)
            rows.append(Row(SUITE, work, "faiss IndexFlatIP", batch / t, unit="queries/s",
                            lower_is_better=False, note="1 OpenMP thread"))
        else:
            rows.append(Row(SUITE, work, "faiss IndexFlatIP", float("nan"), unit="queries/s",
                            lower_is_better=False, note="not measured: faiss-cpu not installed"))
    model = Investigator(seed=0)
    model.verify(PAIR)
    t = median_time(lambda: model.verify(PAIR), repeat=30 if quick else 200, warmup=5)
    work = "verification predict (1 pair, 3 labels)"
    rows.append(Row(SUITE, work, "tensorcode", 1 / t, unit="predictions/s",
                    lower_is_better=False, note="verify(): checks + one plan call + softmax"))
    if module_available("torch"):
        code = (f"import json, sys; sys.path.insert(0, {sys.path[0]!r}); "
                "from benchmarks.suite_investigator import torch_verify; "
                f"print(json.dumps(torch_verify({quick!r})))")
        rows.append(Row(SUITE, work, "torch eager", 1 / run_in_subprocess(code),
                        unit="predictions/s", lower_is_better=False,
                        note="same features + no_grad forward + softmax"))
    return rows


def torch_verify(quick: bool) -> float:
    """Median seconds of one verification in PyTorch eager (the same architecture)."""
    import numpy as np
    import torch

    from benchmarks.torch_pair_scorer import pair_scorer
    from tensorcode.tools.investigator import Investigator

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dim = hidden = 32
    buckets = 4096
    tool = Investigator(seed=0)  # its featurization (convert) only
    scorer = tool.operations["verifier"]

    model = pair_scorer(dim, hidden, buckets)
    marks = ("it entails:", "it is neutral on:", "it contradicts:")

    def predict() -> object:
        texts = [f"{m} {PAIR['hypothesis']}" for m in marks]
        arrays = scorer.convert([[PAIR["premise"]], [texts]])
        with torch.no_grad():
            logits = model(*[torch.from_numpy(np.asarray(a)) for a in arrays])
            return torch.softmax(logits[:, :3], -1)

    return median_time(predict, repeat=30 if quick else 200, warmup=5)
