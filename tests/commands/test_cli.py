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
