"""The shipped ticket router exported as a library: from C (``examples/embed/run.sh``)
and through ``tensorcode.aot.load`` its answers and covered flags equal the Python
router's bit for bit on every workload case."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tensorcode import aot
from tensorcode.cli import main as cli_main
from tensorcode.distill import Distillation, tickets
from tensorcode.distill.router import Router
from tensorcode.errors import FeedError

RUN_SH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "embed" / "run.sh"


@pytest.fixture(scope="module")
def router(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ticket-router")
    tickets.run_example(directory / "saved")
    program = Distillation.load(directory / "saved")
    document = program.export(directory / "library")
    cases = np.array([tickets.features(t.text) for t in
                      tickets.generate(tickets.WORKLOAD_SIZE, tickets.WORKLOAD_SEED)])
    python = program.router(lambda inputs: {"route": -1.0})
    answers = [python({"features": row}) for row in cases]
    raw = [program({"features": row}) for row in cases]
    return directory, program, document, cases, answers, raw


def test_the_c_example_answers_as_the_python_router(router):
    directory, _, document, cases, answers, raw = router
    if shutil.which("cc") is None:
        pytest.skip("the C example is built with cc")
    text = "\n".join(" ".join(f"{v:.17g}" for v in row) for row in cases) + "\n"
    done = subprocess.run(["bash", str(RUN_SH), str(directory / "library")], input=text,
                          capture_output=True, text=True, timeout=300, check=True)
    lines = done.stdout.splitlines()
    assert len(lines) == len(cases)
    for line, answer, produced in zip(lines, answers, raw):
        route, covered = line.split()
        assert int(covered) == (not answer["escalated"])
        # the program's own output, bit for bit, whether or not it claims the case
        assert float(route) == float(produced["route"])
        if not answer["escalated"]:
            assert float(route) == answer["route"]
    assert {int(line.split()[1]) for line in lines} == {0, 1}  # both paths are exercised
    assert document["kind"] == "router" and document["router"] == {"covered_threshold": 0.5}


def test_aot_load_answers_as_the_python_router_without_llvmlite_or_numba(router):
    directory, _, _, cases, answers, _ = router
    code = ("import sys, json, numpy as np\n"
            "from tensorcode import aot\n"
            f"route = aot.load({str(directory / 'library')!r})\n"
            f"rows = np.array({cases.tolist()!r})\n"
            "out = [route({'features': row}) for row in rows]\n"
            "print(json.dumps({'heavy': sorted(m for m in sys.modules if m.split('.')[0] in "
            "('llvmlite', 'numba')), 'answers': [[float(a['route']), a['covered']] "
            "for a in out]}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=300)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    for (route, covered), answer in zip(result["answers"], answers):
        assert covered == (not answer["escalated"])
        if covered:
            assert route == answer["route"]


def test_a_router_over_the_library_escalates_what_the_python_router_does(router):
    directory, program, _, cases, answers, _ = router
    loaded = aot.load(directory / "library")
    served = Router(loaded, lambda inputs: {"route": -1.0}, loaded.output_names)
    for row, answer in zip(cases, answers):
        assert served({"features": row}) == answer
    batch = loaded.batch({"features": cases})
    assert np.array_equal(batch["covered"], [not a["escalated"] for a in answers])
    assert np.array_equal(batch["route"], program.batch({"features": cases})["route"])


def test_a_non_finite_input_is_refused_as_the_router_refuses_it(router):
    directory, program, *_ = router
    loaded = aot.load(directory / "library")
    bad = np.zeros(12)
    bad[3] = np.nan
    with pytest.raises(FeedError, match="not finite"):
        loaded({"features": bad})
    with pytest.raises(FeedError):
        program.router(lambda inputs: {"route": 0.0})({"features": bad})
    with pytest.raises(FeedError, match="exactly"):
        loaded({"other": bad})


def test_the_export_command_prints_the_hash_and_refuses_a_non_empty_directory(router, capsys):
    directory, _, document, *_ = router
    target = directory / "again"
    assert cli_main(["export", str(directory / "saved"), "-o", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"export sha256: {document['export_sha256']}" in out  # reproducible
    assert cli_main(["export", str(directory / "saved"), "-o", str(target)]) == 1
    assert "not empty" in capsys.readouterr().err
    assert cli_main(["export", str(directory / "saved"), "-o", str(target), "--force",
                     "--name", "tickets"]) == 0
    assert (target / "libtickets.so").is_file() and not (target / "librouter.so").exists()
