"""The ``tensorcode`` command dispatches to one subcommand, importing only that one."""

from __future__ import annotations

import subprocess
import sys

from tensorcode import cli


def test_demo_subset_prints_guide_lines(capsys):
    assert cli.main(["demo", "--only", "spec_and_state", "--only", "named_checkpoint"]) == 0
    out = capsys.readouterr().out
    assert "network.describe() unchanged after 100 steps: True" in out
    assert "restored == original, payload for payload: True" in out


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_only_the_chosen_subcommand_is_imported():
    code = ("import sys; from tensorcode import cli; "
            "cli.main(['demo', '--only', 'spec_and_state']); "
            "print('numba' in sys.modules, 'tensorcode.weights' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False False"


def test_demo_tools_section_says_where_it_looked_without_the_examples(tmp_path, monkeypatch,
                                                                      capsys):
    from tensorcode.commands import demo

    monkeypatch.setattr(demo, "TOOLS_EXAMPLES", tmp_path)
    assert demo._tools_section(tmp_path / "out") == 0
    out = capsys.readouterr().out
    assert f"skipped: the tools' demos are programs in a source checkout (examples/tools/), " \
           f"and {tmp_path} does not hold decision_and_planner.py" in out


def test_demo_tools_section_runs_the_programs_and_fails_with_one(tmp_path, monkeypatch,
                                                                 capfd):
    from tensorcode.commands import demo

    (tmp_path / "decision_and_planner.py").write_text(
        "import sys; print('trained', sys.argv[1:])\n")
    (tmp_path / "investigator.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "chatbot_dialogue.py").write_text("print('never run')\n")
    monkeypatch.setattr(demo, "TOOLS_EXAMPLES", tmp_path)
    assert demo._tools_section(tmp_path / "out") == 1
    out = capfd.readouterr().out
    assert f"trained ['--output', '{tmp_path / 'out'}']" in out
    assert "examples/tools/investigator.py failed (exit 3)" in out
    assert "never run" not in out
