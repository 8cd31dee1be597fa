"""The Investigator's demo data, generated from templates written for TensorCode.

``verification_pairs()`` fills incident templates into premise / hypothesis pairs: a
paraphrase of the premise's finding (``entailment``), its opposite (``contradiction``)
or an unrelated detail about the same service (``neutral``). ``retrieval_set()`` builds
a few hundred short incident notes (one per service and finding, each in a few
wordings) and queries that ask about one of them in other words; the relevant notes
(same service, same finding) are the positives. Both use a fixed seed (Python's
``random.Random``, whose seeded draws are stable), so every machine makes the same data;
``python examples/tools/authored_investigator.py`` prints the counts and the SHA-256
digest (``tests/tools/test_tool_examples.py`` pins it). No outside data is involved.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys

SERVICES = ["billing", "search", "checkout", "auth", "mailer", "reports", "gateway",
            "inventory", "payments", "scheduler", "catalog", "profile"]

#: finding -> (premise templates, entailed, contradicted, document notes, queries)
FINDINGS: dict[str, tuple[list[str], list[str], list[str], list[str], list[str]]] = {
    "disk": (["the {s} host ran out of disk space", "writes on {s} fail: the volume is full"],
             ["storage on {s} is exhausted", "the {s} disk is full"],
             ["the {s} disk has plenty of free space", "storage on {s} is nearly empty"],
             ["{s}: the data volume filled up and writes failed until old logs were removed",
              "{s} host disk at one hundred percent, cleanup freed space"],
             ["why could {s} not write to its storage", "{s} volume full incident"]),
    "cert": (["the TLS certificate of {s} expired", "clients reject {s}: its certificate "
              "is out of date"],
             ["the {s} certificate is no longer valid", "{s} serves an expired certificate"],
             ["the {s} certificate is valid for another year", "{s} has a fresh certificate"],
             ["{s}: certificate expiry broke https until a new certificate was installed",
              "{s} tls handshake failures traced to an expired cert"],
             ["how was the expired {s} certificate fixed", "{s} https certificate problem"]),
    "deploy": (["{s} broke right after the latest release", "errors on {s} began with "
                "this morning's deploy"],
               ["the new release of {s} caused the failure", "a deploy broke {s}"],
               ["{s} has not been deployed for months", "the {s} failure predates any release"],
               ["{s}: the release shipped at nine introduced crashes, rolled back at ten",
                "{s} regression from a bad build, reverted to the previous version"],
               ["which {s} deploy had to be rolled back", "{s} release regression"]),
    "memory": (["{s} was killed for using too much memory", "the {s} process ran out of "
                "memory"],
               ["{s} exhausted its memory", "memory pressure killed {s}"],
               ["{s} uses almost no memory", "{s} has memory to spare"],
               ["{s}: the worker leaked memory and was killed, a restart and a fix followed",
                "{s} out of memory kills every few hours until the leak was patched"],
               ["why did {s} keep getting killed for memory", "{s} memory leak"]),
    "network": (["{s} lost its connection to the database", "the link between {s} and "
                 "the network dropped"],
                ["{s} could not reach the network", "{s} was disconnected"],
                ["{s} stayed connected the whole time", "the {s} network link was stable"],
                ["{s}: a faulty switch port cut the database link, traffic moved to a "
                 "spare", "{s} connection refused errors after the network change"],
                ["how was the {s} connection restored", "{s} network outage"]),
    "dns": (["the DNS record of {s} pointed to the wrong address", "{s} resolved to an "
             "old server"],
            ["name resolution for {s} was wrong", "{s} had a bad DNS entry"],
            ["the {s} DNS record was correct", "{s} resolved to the right address"],
            ["{s}: a stale DNS entry sent clients to a retired host until it was corrected",
             "{s} name lookups returned the old address after the migration"],
            ["why did {s} resolve to the old server", "{s} dns mistake"]),
}
#: neutral hypotheses: true or false, the premise does not say
NEUTRAL = ["{s} is owned by the platform team", "{s} was written in Go",
           "{s} has three replicas", "the {s} team is on call this week",
           "{s} serves customers in Europe", "{s} was last audited in spring"]


def verification_pairs(count: int = 240, seed: int = 14) -> list[dict]:
    """``count`` examples ``{"premise", "hypothesis", "label"}``, labels balanced."""
    rng = random.Random(seed)
    labels = ("entailment", "neutral", "contradiction")
    examples = []
    for k in range(count):
        service = rng.choice(SERVICES)
        premises, entailed, contradicted, _, _ = FINDINGS[rng.choice(sorted(FINDINGS))]
        label = labels[k % 3]
        pool = {"entailment": entailed, "contradiction": contradicted,
                "neutral": NEUTRAL}[label]
        examples.append({"premise": rng.choice(premises).format(s=service),
                         "hypothesis": rng.choice(pool).format(s=service), "label": label})
    rng.shuffle(examples)
    return examples


def retrieval_set(seed: int = 14) -> tuple[list[dict], list[dict]]:
    """``(documents, queries)``: every note of every service and finding as a document
    ``{"id", "text"}`` (288), and one query per service and finding
    ``{"text", "relevant": [ids]}`` (72) in shuffled order."""
    rng = random.Random(seed)
    documents, queries = [], []
    for service in SERVICES:
        for finding, (_, _, _, notes, asks) in sorted(FINDINGS.items()):
            ids = []
            for n, note in enumerate(notes + [f"{service} incident review: "
                                              + notes[0].format(s=service).split(": ")[1],
                                              f"{service} postmortem on {finding}"]):
                ids.append(f"{service}-{finding}-{n}")
                documents.append({"id": ids[-1], "text": note.format(s=service)})
            queries.append({"text": rng.choice(asks).format(s=service), "relevant": ids})
    rng.shuffle(documents)
    rng.shuffle(queries)
    return documents, queries


def main() -> int:
    pairs = verification_pairs()
    documents, queries = retrieval_set()
    text = json.dumps([pairs, documents, queries], sort_keys=True)
    print(f"{len(pairs)} verification pairs, {len(documents)} documents, "
          f"{len(queries)} queries, sha256 {hashlib.sha256(text.encode()).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
