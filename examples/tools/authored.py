"""The small data sets ``decision_and_planner.py`` trains on, generated from authored
templates.

Origin: the templates below were written for TensorCode (no outside data): short
incident reports (each pointing at one remedy) for the ``Decision`` tool, and
operational states with the outcome of each remedy for the ``Planner``.
``generate_decision`` and ``generate_planner`` fill the templates with a fixed seed
(Python's ``random.Random``, whose seeded draws are stable), so every machine makes the
same 320 examples of each; nothing is stored. ``python examples/tools/authored.py``
prints each set's size and SHA-256 digest (``tests/tools/test_tool_examples.py`` pins
them).
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

#: remedy id -> (hypothesis texts, incident templates)
REMEDIES: dict[str, tuple[list[str], list[str]]] = {
    "rollback": (["roll back the latest deploy", "revert to the previous release"],
                 ["errors started right after the new release of {service}",
                  "{service} crashes on start since this morning's deploy",
                  "the build shipped an hour ago broke {service}",
                  "after the upgrade {service} returns 500 on every request"]),
    "disk": (["free disk space on the host", "clean up old logs to make room"],
             ["{service} cannot write: no space left on device",
              "the volume behind {service} is completely full",
              "log files filled the disk of the {service} host",
              "writes to {service} fail because storage ran out"]),
    "cert": (["renew the TLS certificate", "install a fresh certificate"],
             ["browsers warn that the certificate of {service} expired",
              "TLS handshakes to {service} fail with an expired certificate",
              "clients reject {service} because its certificate is out of date",
              "the https endpoint of {service} shows a certificate error"]),
    "restart": (["restart the stuck service", "restart the hung process"],
                ["{service} stopped responding but the host is healthy",
                 "the {service} process hangs and ignores requests",
                 "{service} is frozen; memory and cpu look normal",
                 "requests to {service} time out while the machine is idle"]),
    "scale": (["add capacity and scale out", "start more worker instances"],
              ["traffic doubled and {service} latency keeps climbing",
               "cpu is saturated on every {service} node",
               "a marketing campaign overloads {service} with visitors",
               "the queue in front of {service} grows faster than it drains"]),
    "dns": (["fix the DNS record", "correct the domain name entry"],
            ["the name of {service} does not resolve anymore",
             "clients get NXDOMAIN when they look up {service}",
             "{service} moved but its hostname still points to the old address",
             "lookups for {service} return the wrong IP address"]),
    "password": (["reset the user's password", "unlock the account and set a new password"],
                 ["a user is locked out of {service} after failed logins",
                  "{user} forgot the password for {service}",
                  "{user} cannot sign in to {service}: credentials rejected",
                  "the account of {user} on {service} is locked"]),
    "network": (["replace the faulty network link", "reroute traffic around the bad switch"],
                ["packet loss between {service} and its database is severe",
                 "the switch port used by {service} keeps flapping",
                 "{service} sees intermittent connection resets on the network",
                 "pings to the {service} rack drop every few seconds"]),
}
SERVICES = ["the billing api", "the checkout page", "the search service", "the mail relay",
            "the login portal", "the reporting job", "the image cache", "the chat backend",
            "the inventory database", "the payment gateway", "the wiki", "the build server"]
USERS = ["alice", "bob", "carol", "dmitri", "erin", "farah", "gus", "hana"]

#: planner: state conditions and the expected outcome of each action under them
CONDITIONS: dict[str, list[str]] = {
    "overload": ["traffic is far above normal and latency rises",
                 "request volume spiked and the workers are saturated"],
    "bad_release": ["error rates jumped right after a release",
                    "a new version went out and exceptions are climbing"],
    "hung": ["one process stopped answering while load is normal",
             "a worker is frozen but traffic is ordinary"],
    "calm": ["all metrics look normal and quiet",
             "traffic is steady and no errors are reported"],
}
ACTIONS: dict[str, str] = {
    "scale": "scale out the workers", "rollback": "roll back the release",
    "restart": "restart the service", "wait": "wait and keep watching",
    "page": "page the on-call engineer",
}
OUTCOMES: dict[str, dict[str, float]] = {
    "overload": {"scale": 0.9, "rollback": -0.4, "restart": -0.2, "wait": -0.7, "page": 0.3},
    "bad_release": {"scale": -0.3, "rollback": 0.9, "restart": -0.1, "wait": -0.8,
                    "page": 0.4},
    "hung": {"scale": 0.0, "rollback": -0.5, "restart": 0.9, "wait": -0.4, "page": 0.3},
    "calm": {"scale": -0.5, "rollback": -0.7, "restart": -0.6, "wait": 0.8, "page": -0.2},
}


def generate_decision(count: int = 320, seed: int = 7) -> list[dict[str, Any]]:
    """``count`` Decision examples: ``{"inputs": {...}, "target": remedy id}``, each
    offering the right remedy among 2 to 5 hypotheses in random order."""
    rng = random.Random(seed)
    remedies = sorted(REMEDIES)
    examples = []
    for _ in range(count):
        answer = rng.choice(remedies)
        templates = REMEDIES[answer][1]
        context = rng.choice(templates).format(service=rng.choice(SERVICES),
                                               user=rng.choice(USERS))
        others = rng.sample([r for r in remedies if r != answer], rng.randint(1, 4))
        offered = [answer] + others
        rng.shuffle(offered)
        hypotheses = [{"id": r, "text": rng.choice(REMEDIES[r][0])} for r in offered]
        examples.append({"inputs": {"context": context, "hypotheses": hypotheses},
                         "target": answer})
    return examples


def generate_planner(count: int = 320, seed: int = 11) -> list[dict[str, Any]]:
    """``count`` Planner examples: the state, 3 to 5 candidates, the one tried with its
    observed outcome (the expected outcome plus noise) as the target, and ``best``, the
    candidate with the highest expected outcome (for measuring ranking accuracy)."""
    rng = random.Random(seed)
    conditions, actions = sorted(CONDITIONS), sorted(ACTIONS)
    examples = []
    for _ in range(count):
        condition = rng.choice(conditions)
        state = f"{rng.choice(CONDITIONS[condition])} on {rng.choice(SERVICES)}"
        offered = rng.sample(actions, rng.randint(3, 5))
        tried = rng.choice(offered)
        outcome = round(OUTCOMES[condition][tried] + rng.gauss(0.0, 0.1), 4)
        best = max(offered, key=lambda a: OUTCOMES[condition][a])
        examples.append({
            "inputs": {"state": state,
                       "candidates": [{"candidate_id": a, "text": ACTIONS[a]}
                                      for a in offered]},
            "target": {"candidate_id": tried, "outcome": outcome},
            "best": best})
    return examples


GENERATORS = {"decision": generate_decision, "planner": generate_planner}


def load(name: str) -> list[dict[str, Any]]:
    """A data set (``"decision"`` or ``"planner"``), generated."""
    if name not in GENERATORS:
        raise ValueError(f"unknown data set {name!r}; choose from {sorted(GENERATORS)}")
    return GENERATORS[name]()


def digest(examples: list[dict[str, Any]]) -> str:
    """SHA-256 of the examples as canonical JSON (sorted keys, one example per line)."""
    text = "\n".join(json.dumps(e, sort_keys=True) for e in examples)
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> None:
    """Print each data set's size and digest."""
    for name in GENERATORS:
        examples = load(name)
        print(f"{name}: {len(examples)} examples, sha256 {digest(examples)}")


if __name__ == "__main__":
    main()
