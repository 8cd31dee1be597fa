"""An experience is prepared once: a later ``fit`` or ``step`` on it converts nothing again,
and the fused path (``step`` included) equals one update at a time bit for bit."""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode.tools import Decision
from tensorcode.tools.scorer import PairScorer
from tensorcode.training import Trainer

REF = "reference"
HYPOTHESES = [{"id": "disk", "text": "free disk space"}, {"id": "cert", "text": "renew it"},
              {"id": "restart", "text": "restart the service"}]


def make(steps_per_call=32):
    tool = Decision(dim=8, hidden=8, buckets=256, backend=REF)
    trainer = Trainer.from_tool(tool, lr=0.05, steps_per_call=steps_per_call,
                                optimizer=lambda _: tc.optim.Adam(backend=REF))
    experiences = [trainer.capture({"context": context, "hypotheses": HYPOTHESES}, target,
                                   source="test")
                   for context, target in (("no space left", "disk"), ("expired", "cert"),
                                           ("it hangs", "restart"), ("disk is full", 0))]
    return trainer, experiences


def test_fit_converts_each_experience_once(monkeypatch):
    trainer, experiences = make()
    calls = []
    convert = PairScorer.convert
    monkeypatch.setattr(PairScorer, "convert",
                        lambda self, args: calls.append(1) or convert(self, args))
    trainer.fit(experiences, epochs=3, progress=False)
    assert len(calls) == len(experiences)
    trainer.fit(experiences, epochs=2, progress=False)
    trainer.step(experiences[0])
    assert len(calls) == len(experiences)  # nothing converted again
    trainer.tool.eval()  # another mode is another structure: prepared again
    trainer.tool.train()
    trainer.fit(experiences[:1], progress=False)
    assert len(calls) == len(experiences)  # the same modes as before: still cached


def test_the_fused_path_equals_one_update_at_a_time():
    fused, experiences = make()
    single, others = make(steps_per_call=1)
    losses = fused.fit(experiences, epochs=3, progress=False) + [
        fused.step(e) for e in experiences]
    expected = single.fit(others, epochs=3, progress=False) + [single.step(e) for e in others]
    assert losses == expected
    for a, b in zip(fused.parameters.payloads(), single.parameters.payloads()):
        np.testing.assert_array_equal(a, b)
