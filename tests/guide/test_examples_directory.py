"""The guide's examples are programs in examples/guide/; the package finds them in the
checkout it was installed from, and says where it looked when they are absent."""

from __future__ import annotations

import pathlib
import shutil

import pytest

from tensorcode import cli, guide

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_checkout_examples_are_found_and_loaded_as_programs():
    assert guide.examples_directory() == ROOT / "examples" / "guide"
    module = guide.load("spec_and_state")
    assert pathlib.Path(module.__file__) == ROOT / "examples" / "guide" / "spec_and_state.py"
    assert guide.load("spec_and_state") is module  # once per process and directory
    assert callable(module.run)


def test_a_directory_without_the_examples_says_where_it_looked(tmp_path):
    with pytest.raises(guide.ExamplesNotFound, match="examples/guide/") as caught:
        guide.examples_directory(tmp_path)
    assert str(tmp_path) in str(caught.value) and "--examples DIR" in str(caught.value)
    with pytest.raises(guide.ExamplesNotFound):
        guide.load("xor", tmp_path)


def test_a_copied_examples_directory_is_used(tmp_path):
    copy = tmp_path / "guide"
    shutil.copytree(ROOT / "examples" / "guide", copy)
    assert guide.examples_directory(copy) == copy
    assert pathlib.Path(guide.load("xor", copy).__file__) == copy / "xor.py"


def test_the_demo_fails_when_examples_asked_for_are_absent(tmp_path, capsys):
    assert cli.main(["demo", "--only", "xor", "--examples", str(tmp_path)]) != 0
    captured = capsys.readouterr()
    assert "does not hold" in captured.err + captured.out
