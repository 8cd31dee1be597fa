"""Edit an algorithm's weights as text: render, apply a recorded edit reply, compare.

A small ticket router scores three routes (billing, technical, account) from six 0/1
keyword indicators: ``scores = features @ w + b``, route = the highest score. Its
weights have a flaw: the "refund" keyword argues for *technical*. The script

1. renders the algorithm's parameters as integers times one scale per tensor (the text
   a reviewer or a language model reads) and makes the rounded network the base;
2. reads a recorded edit reply (``reply.txt`` next to this file, written for this
   example, not produced by a live model) and turns it into a hash-pinned ``Patch``;
3. prints the patch summary, saves and reloads the patch, applies it to the algorithm,
   and shows the routes before and after on a handful of tickets;
4. shows that the same patch is refused by the unrounded weights it was not written
   against.

    python examples/weights/edit_router.py
    python examples/weights/edit_router.py --backend reference --output ./patch-demo
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile

import numpy as np

from tensorcode import algorithm as algorithms
from tensorcode import weights
from tensorcode.compiler.backends import BACKENDS, DEFAULT_BACKEND
from tensorcode.errors import PatchError

HERE = pathlib.Path(__file__).resolve().parent
KEYWORDS = ["invoice", "refund", "charge", "crash", "error", "login"]
ROUTES = ["billing", "technical", "account"]

SOURCE = '''
def route_scores(features, w, b):
    # features: six 0/1 keyword indicators; w: [6, 3] keyword-route weights; b: [3]
    return {"scores": features @ w + b}
'''

# Weights as a fit left them: row 1 ("refund") leans to technical, and the technical
# bias is inflated to match.
W = [[2.113, -0.418, -0.307],
     [0.052, 1.874, -0.226],
     [1.689, -0.231, 0.118],
     [-0.512, 2.306, -0.097],
     [-0.244, 1.952, 0.031],
     [-0.183, 0.276, 1.948]]
B = [0.0417, 0.1285, -0.0563]

# Tickets as keyword sets, with the route a support lead gave each.
CASES = [
    ({"invoice"}, "billing"),
    ({"refund"}, "billing"),
    ({"refund", "charge"}, "billing"),
    ({"refund", "invoice"}, "billing"),
    ({"crash"}, "technical"),
    ({"crash", "error"}, "technical"),
    ({"refund", "crash"}, "technical"),
    ({"login"}, "account"),
    ({"login", "invoice"}, "billing"),
]


def features(keywords: set[str]) -> np.ndarray:
    return np.array([1.0 if k in keywords else 0.0 for k in KEYWORDS])


def routes(algorithm) -> list[str]:
    batch = np.stack([features(keywords) for keywords, _ in CASES])
    scores = algorithm.batch({"features": batch})["scores"]
    return [ROUTES[int(np.argmax(row))] for row in scores]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=DEFAULT_BACKEND, choices=BACKENDS)
    parser.add_argument("--reply", default=str(HERE / "reply.txt"),
                        help="the recorded edit reply (edit statements)")
    parser.add_argument("-o", "--output",
                        help="directory for the patch file (default: a temporary one)")
    args = parser.parse_args(argv)

    router = algorithms.compile(SOURCE, inputs={"features": (6,)}, outputs={"scores": (3,)},
                                parameters={"w": W, "b": B}, executor=args.backend)

    # 1. Render: the text shown, the rounded tensors it shows, and each tensor's scale.
    shown = weights.render(weights.algorithm_parameters(router), digits=3)
    base = weights.replace_parameters(router, shown.rounded)  # the network as shown
    print("== rendered parameters ==")
    print(shown.text)

    # 2. The reply: parsed by the edit grammar, never evaluated; values in rendered units.
    reply = pathlib.Path(args.reply).read_text(encoding="utf-8")
    print("== recorded edit reply ==")
    print(reply)
    before = routes(base)
    wrong = [i for i, (_, expected) in enumerate(CASES) if before[i] != expected]
    patch = weights.Patch.from_edits(
        shown.rounded, reply, scales=shown.scales,
        rationale="refund tickets are billing questions; move the refund keyword's weight "
                  "from technical to billing and remove the bias that compensated",
        evidence=[{"source": f"case:{i}", "keywords": sorted(CASES[i][0]),
                   "expected": CASES[i][1], "routed": before[i]} for i in wrong],
        author={"kind": "recorded reply", "file": pathlib.Path(args.reply).name})

    # 3. Save, reload (validated), apply with hash checks, and compare behaviour.
    directory = pathlib.Path(args.output) if args.output else pathlib.Path(tempfile.mkdtemp())
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "refund-fix.patch.json"
    patch.save(path)
    loaded = weights.Patch.load(path)
    edited = weights.patch_algorithm(base, loaded)
    after = routes(edited)

    print("== patch ==")
    print(loaded.describe())
    fraction = loaded.fraction_changed(weights.algorithm_parameters(base))
    print(f"fraction of the network changed: {fraction:.3f}  "
          f"({path.stat().st_size} bytes at {path})")
    print()
    print("== routes on cases ==")
    print(f"  {'keywords':<20} {'expected':<10} {'before':<10} {'after':<10}")
    for (keywords, expected), old, new in zip(CASES, before, after):
        mark = "  fixed" if old != expected and new == expected else (
            "  BROKEN" if old == expected and new != expected else "")
        print(f"  {','.join(sorted(keywords)) or '(none)':<20} {expected:<10} {old:<10} "
              f"{new:<10}{mark}")
    agreed_before = sum(r == e for r, (_, e) in zip(before, CASES))
    agreed_after = sum(r == e for r, (_, e) in zip(after, CASES))
    print(f"  agreement: {agreed_before}/{len(CASES)} before, {agreed_after}/{len(CASES)} after")

    # 4. Hash pinning: the unrounded router is not the network the edits were written for.
    try:
        weights.patch_algorithm(router, loaded)
        refused = ""
    except PatchError as error:
        refused = str(error).split(". ")[0]
    print()
    print("== applying to the unrounded weights ==")
    print(f"  refused: {refused}")

    return {"before": before, "after": after, "expected": [e for _, e in CASES],
            "summary": loaded.summary(), "fraction_changed": fraction, "refused": refused,
            "patch_path": str(path)}


if __name__ == "__main__":
    main()
