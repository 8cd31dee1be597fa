"""Every page of the docs is a program: its ```python blocks, in order, run as one
script, and this test runs each page (README.md and docs/*.md) in a fresh process.

Why a subprocess per page: a page is read top to bottom by someone starting from
nothing, so it must not lean on names, imports or files another page (or a test) left
behind. The script runs in an empty temporary directory (files a page writes land there)
with its own plan cache directory, and each block keeps its page line numbers: the code
sits on the same lines of the script as on the page, so a traceback's line number is the
page's. Blocks marked ```text, ```bash, ```console, ```json or left bare are not run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tensorcode

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: a guard against a hung page, not a speed check: pages take seconds
TIMEOUT_S = 600


def python_program(text: str) -> str:
    """The page's ```python blocks as one script, each block on its page lines.

    Every line outside a python block becomes an empty line, so line ``n`` of the script
    is line ``n`` of the page. A fence is a line starting with three or more backticks;
    it closes with a line of at least as many backticks and nothing else.
    """
    lines = text.splitlines()
    program: list[str] = []
    fence = ""
    running = False
    for line in lines:
        stripped = line.strip()
        if not fence:
            if stripped.startswith("```"):
                ticks = len(stripped) - len(stripped.lstrip("`"))
                fence = "`" * ticks
                running = stripped[ticks:].strip().lower() == "python"
            program.append("")
            continue
        if stripped.startswith(fence) and stripped.strip("`") == "":
            fence, running = "", False
            program.append("")
            continue
        program.append(line if running else "")
    if fence:
        raise AssertionError("a ``` fence opened on the page is never closed")
    return "\n".join(program) + "\n"


def test_python_program_keeps_page_lines() -> None:
    page = ("# Title\n\n```python\nx = 1\n```\n\ntext\n\n```text\nnot = run\n```\n"
            "````python\ny = x + 1\n```\nassert y == 2\n````\n")
    program = python_program(page).splitlines()
    assert program[3] == "x = 1"
    assert program[9] == ""
    assert program[12:15] == ["y = x + 1", "```", "assert y == 2"]
    assert [line for line in program if line] == ["x = 1", "y = x + 1", "```",
                                                   "assert y == 2"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_page_runs(page: Path, tmp_path: Path) -> None:
    program = python_program(page.read_text(encoding="utf-8"))
    if not program.strip():
        return  # a page without python blocks has nothing to run
    scripts = tmp_path / "script"
    scripts.mkdir()
    script = scripts / f"{page.name}.py"
    script.write_text(program, encoding="utf-8")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    # the plan cache of this test session (a temporary directory, see conftest.py), so
    # pages reuse plans other tests compiled; never the user's cache
    cache = os.environ.get("TENSORCODE_CACHE_DIR") or str(tmp_path / "cache")
    package_root = str(Path(tensorcode.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["TENSORCODE_CACHE_DIR"] = cache
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root, *filter(None, [env.get("PYTHONPATH")])])
    env["MPLBACKEND"] = "Agg"
    completed = subprocess.run([sys.executable, str(script)], check=False, cwd=cwd, env=env,
                               capture_output=True, text=True, timeout=TIMEOUT_S)
    status = completed.returncode  # a plain int keeps the failure message to the point
    assert status == 0, (
        f"{page.relative_to(ROOT)} failed (exit {status}); line numbers "
        f"in the traceback are the page's\n--- stderr ---\n{completed.stderr}"
        f"\n--- stdout (last 2000 characters) ---\n{completed.stdout[-2000:]}")
