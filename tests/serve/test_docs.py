"""The python blocks of docs/serving.md run as written, top to bottom."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_serving_guide_runs(tmp_path):
    text = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert len(blocks) >= 3
    if importlib.util.find_spec("fastapi") is None:  # the FastAPI block needs FastAPI
        blocks = [b for b in blocks if "fastapi" not in b]
    script = tmp_path / "guide.py"
    script.write_text("\n\n".join(blocks), encoding="utf-8")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600, check=False,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "{'route': 1.0, 'escalated': False, 'reason': None, 'path': 'program'}" in out.stdout
    assert "[True, False]" in out.stdout and "422 features" in out.stdout
    assert (tmp_path / "repaired" / "distillation.json").is_file()
