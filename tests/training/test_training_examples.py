"""The training examples run end to end and check what they claim."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_trace_and_train_resumes_bit_for_bit(tmp_path):
    out = run("trace_and_train.py", "--epochs", "6", "--backend", "reference",
              "--workdir", str(tmp_path))
    assert "equals the uninterrupted run bit for bit: parameters True, losses True" in out
    assert len(list((tmp_path / "experiences").glob("ticket-*.json"))) == 18
    assert (tmp_path / "checkpoint" / "training.json").exists()


def test_calibrate_reduces_calibration_error():
    out = run("calibrate.py", "--backend", "reference", "--epochs", "60")
    rows = {line.split()[0]: [float(v) for v in line.split()[1:]]
            for line in out.splitlines() if line.startswith(("raw", "calibrated"))}
    assert rows["calibrated"][0] < rows["raw"][0]  # ECE
    assert rows["calibrated"][2] < rows["raw"][2]  # NLL
    assert "threshold" in out
