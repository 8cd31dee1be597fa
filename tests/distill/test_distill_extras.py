"""The extras the guides name exist: ``tensorcode[algorithm]`` for ``fit``."""

from __future__ import annotations

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_18_the_algorithm_extra_the_guide_names_exists_and_the_docs_say_what_it_adds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert "algorithm" in extras
    # fit runs on the core install: the extra must not be needed for anything
    assert extras["algorithm"] == []
    docs = (ROOT / "docs" / "distill.md").read_text("utf-8")
    assert "tensorcode[algorithm]" in docs and "adds nothing" in docs
