"""Progress bars (tqdm) for ``fit``, ``distill`` and long generation: shown on a terminal,
never in captured output, off with ``progress=False``."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.runtime.progress import check_progress, progress_bar
from tensorcode.tools import Decision
from tensorcode.training import Trainer

REF = "reference"


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def small_fit(progress):
    tool = Decision(dim=8, hidden=8, buckets=256, backend=REF)
    trainer = Trainer.from_tool(tool, lr=0.05, optimizer=lambda _: tc.optim.Adam(backend=REF))
    experience = trainer.capture({"context": "disk full", "hypotheses": [
        {"id": "a", "text": "free space"}, {"id": "b", "text": "add cpu"}]}, "a", source="t")
    return trainer.fit([experience], epochs=5, progress=progress)


def test_fit_draws_a_tqdm_bar_on_a_terminal(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    losses = small_fit(True)
    drawn = terminal.getvalue()
    assert "fit" in drawn and "5/5" in drawn and "update" in drawn
    assert f"loss={losses[-1]:.4g}" in drawn


def test_no_bar_when_stderr_is_not_a_terminal_or_progress_is_off(monkeypatch, capsys):
    small_fit(True)
    assert capsys.readouterr().err == ""  # captured output is not a terminal
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    small_fit(False)
    assert terminal.getvalue() == ""


def test_progress_takes_a_bool():
    with pytest.raises(TypeError, match="progress"):
        check_progress("yes")
    with pytest.raises(TypeError, match="progress"):
        small_fit(1)
    assert progress_bar(3, "x", True) is None  # pytest's stderr is no terminal


def test_distill_shows_its_attempts(monkeypatch):
    from tensorcode.distill import DistillationError, distill
    from tensorcode.integrations import RecordedModel

    workload = [{"x": np.array([float(k), 0.0])} for k in range(10)]
    targets = [{"route": float(k >= 5)} for k in range(10)]
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with pytest.raises(DistillationError):
        distill("route by x", {"x": (2,)}, workload, targets=targets, attempts=2,
                author=RecordedModel(["not a program", "still not a program"]))
    drawn = terminal.getvalue()
    assert "distill" in drawn and "2/2" in drawn and "attempt" in drawn
