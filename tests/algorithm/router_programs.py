"""Ticket routers of the guide's shape (twelve 0/1 keyword indicators -> a route and a
covered flag) written in the author subset, each with a hand-written NumPy twin."""

from __future__ import annotations

import itertools

import numpy as np

from tensorcode.distill.spec import EXAMPLE_SOURCE

INPUTS = {"features": (12,)}
OUTPUTS = {"route": (), "covered": ()}

GROUPS = EXAMPLE_SOURCE  # billing keywords 0-3, technical 4-7, other 8-11
GROUPS_PARAMETERS = {"threshold": 0.5}


def groups_numpy(features: np.ndarray, threshold: float = 0.5) -> dict[str, float]:
    billing = features[0:4].sum()
    technical = features[4:8].sum()
    other = features[8:12].max()
    route = 0.0 if billing >= technical else 1.0
    if other > max(billing, technical):
        route = 2.0
    covered = 1.0 if features.sum() >= threshold else 0.0
    return {"route": route, "covered": covered}


WEIGHTS = np.array([[2, 0, 0], [1, 0, 0], [1, 0.5, 0], [1, 0, 0],
                    [0, 2, 0], [0, 1, 0], [0.5, 1, 0], [0, 1, 0],
                    [0, 0, 1], [0, 0, 1], [0, 0, 1.5], [0, 0, 1]], dtype=np.float64)

SCORES = '''
def route(features, w, threshold):
    scores = features @ w
    best = scores.max()
    route = 2.0
    for k in range(2, -1, -1):
        # the first route reaching the best score wins
        hit = scores.slice(k, k + 1).reshape() >= best
        route = where(hit, k, route)
    margin = best - (scores.sum() - best) / 2
    covered = where(margin >= threshold, 1.0, 0.0) * (features.sum() > 0)
    return {"route": route, "covered": covered}
'''
SCORES_PARAMETERS = {"w": WEIGHTS.tolist(), "threshold": 1.0}


def scores_numpy(features: np.ndarray, w: np.ndarray = WEIGHTS,
                 threshold: float = 1.0) -> dict[str, float]:
    scores = features @ w
    best = scores.max()
    route = float(np.argmax(scores))
    margin = best - (scores.sum() - best) / 2
    covered = float(margin >= threshold and features.sum() > 0)
    return {"route": route, "covered": covered}


ROUTERS = {
    "groups": (GROUPS, GROUPS_PARAMETERS, groups_numpy),
    "scores": (SCORES, SCORES_PARAMETERS, scores_numpy),
}


def all_feature_vectors() -> np.ndarray:
    """Every one of the 4096 binary keyword vectors, [4096, 12] float64."""
    return np.array(list(itertools.product([0.0, 1.0], repeat=12)), dtype=np.float64)
