"""``Distillation``: a selected program with its report, its attempts and its cases.

Saved as two JSON files in a directory: ``algorithm.json``, the validated algorithm
artifact the executors load, and ``distillation.json``, the record (source text,
parameters, report, every attempt's prompt and reply, design and acceptance cases).
The record is written last and names the artifact's SHA-256, so a directory holds a
matching pair or fails to load. Loading validates both and never evaluates the source.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..compiler.backends import DEFAULT_BACKEND, NUMBA, check_backend
from ..errors import ArtifactError
from ..files import atomic_write_json as write_json_atomic
from ..files import check_header, read_json
from . import program as programs
from .attempts import CaseSet
from .cases import COVERED, Case, Contract, normalize_case, normalize_contract, to_json
from .export import export_router
from .inputs import check_case
from .router import DEFAULT_MAX_RECORDED, Router

FORMAT = "tensorcode.distillation"
VERSION = 1
ARTIFACT = "algorithm.json"
RECORD = "distillation.json"


class Distillation:
    """The outcome of ``distill``, ``repair`` or ``fit``.

    ``program`` is the compiled Algorithm; ``report`` holds ``design``, ``acceptance``,
    ``feedback_policy`` (and ``truth``, ``repair``, ``fit`` when they apply);
    ``attempts`` every attempt as a JSON-ready dict; ``design`` and ``acceptance`` the
    ``CaseSet``s. Call it like the program: ``result(inputs) -> dict``.
    """

    def __init__(self, *, task: str, inputs: Contract, outputs: Contract, program: Any,
                 source: str, report: dict[str, Any], attempts: list[dict[str, Any]],
                 design: CaseSet, acceptance: CaseSet, settings: dict[str, Any],
                 abstains: bool = True, executor: str = DEFAULT_BACKEND) -> None:
        self.task = task
        self.inputs = dict(inputs)
        self.outputs = dict(outputs)
        self.program = program
        self.source = source
        self.report = report
        self.attempts = attempts
        self.design = design
        self.acceptance = acceptance
        self.settings = dict(settings)
        self.abstains = abstains
        self.executor = executor

    def __repr__(self) -> str:
        acceptance = self.report.get("acceptance", {})
        return (f"Distillation(outputs={list(self.outputs)}, acceptance covered "
                f"{acceptance.get('covered')}/{acceptance.get('cases')}, wrong "
                f"{acceptance.get('wrong')})")

    @property
    def algorithm(self) -> Any:
        return self.program

    @property
    def parameters(self) -> dict[str, np.ndarray]:
        """The program's current parameter values (after a fit, the fitted ones)."""
        return programs.parameters_of(self.program)

    # -- running --------------------------------------------------------------------------
    def check_inputs(self, inputs: Mapping[str, Any]) -> Case:
        """``inputs`` validated against the input contract (``InputError``, a
        ``FeedError``, naming the field otherwise); the one validator every server uses."""
        return check_case(inputs, self.inputs)

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The program's outputs, ``covered`` included, for one case (the algorithm
        checks names and shapes and raises ``FeedError`` on a mismatch)."""
        return self.program(inputs)

    def batch(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The program over a leading case axis."""
        return dict(self.program.batch(inputs))

    def router(self, fallback: Callable[[Mapping[str, Any]], Mapping[str, Any]], *,
               max_recorded: int = DEFAULT_MAX_RECORDED) -> Router:
        """A ``Router`` serving this program with ``fallback`` for what it does not claim,
        keeping the last ``max_recorded`` escalated cases (its requests are checked by
        ``check_inputs``, the router's default for a program that has one)."""
        return Router(self, fallback, list(self.outputs), record=self._record_case,
                      max_recorded=max_recorded)

    def _record_case(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """A private float64 copy of an escalated case (the caller may reuse its
        arrays); an input the program refused is kept as given."""
        try:
            return {name: np.array(value, dtype=np.float64) for name, value in inputs.items()}
        except (TypeError, ValueError):
            return dict(inputs)

    def export(self, directory: str | os.PathLike, *, name: str = "router",
               force: bool = False) -> dict:
        """Export the program as a router library: ``lib<name>.so``, ``<name>.h`` and
        ``manifest.json`` in ``directory`` (refused when it is not empty, unless
        ``force``), answering as ``router(fallback)`` does with the covered flag in place
        of the fallback (``docs/embedding.md``). Returns the manifest."""
        return export_router(self, directory, name, force)

    # -- saving ---------------------------------------------------------------------------
    def record(self, artifact_sha256: str) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION,
            "artifact": ARTIFACT, "artifact_sha256": artifact_sha256,
            "task": self.task,
            "inputs": {k: list(v) for k, v in self.inputs.items()},
            "outputs": {k: list(v) for k, v in self.outputs.items()},
            "abstains": self.abstains,
            "source": self.source,
            "parameters": programs.parameters_to_json(self.parameters),
            "settings": self.settings,
            "report": self.report,
            "attempts": self.attempts,
            "design": _caseset_json(self.design),
            "acceptance": _caseset_json(self.acceptance),
        }

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``algorithm.json`` then ``distillation.json`` atomically into
        ``directory`` (created if needed); returns the directory."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.program.save(directory / ARTIFACT)  # atomic; the record, written last, commits
        data = (directory / ARTIFACT).read_bytes()
        write_json_atomic(directory / RECORD, self.record(hashlib.sha256(data).hexdigest()))
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike, executor: str = DEFAULT_BACKEND
             ) -> Distillation:
        """Load a saved program: the record is validated field by field, the artifact
        must match the record's SHA-256 and is validated by ``Algorithm.load``; the
        source text is kept as text and never evaluated."""
        check_backend(executor, "executor")
        directory = Path(directory)
        record_path = directory / RECORD
        artifact_path = directory / ARTIFACT
        if not record_path.exists():
            raise ArtifactError(f"no {RECORD} here; is this a directory written by "
                                "Distillation.save?", directory)
        record = read_json(record_path)
        fields = _Validator(record_path, record)
        check_header(record, FORMAT, VERSION, record_path)
        fields.equals("artifact", ARTIFACT)
        expected_hash = fields.text("artifact_sha256")
        try:
            data = artifact_path.read_bytes()
        except OSError as error:
            raise ArtifactError(f"cannot read the artifact: {error.strerror}",
                                artifact_path) from None
        if hashlib.sha256(data).hexdigest() != expected_hash:
            raise ArtifactError("the artifact's SHA-256 does not match the record's "
                                "artifact_sha256: the files were changed or do not belong "
                                "together; save the program again", artifact_path)
        inputs = fields.contract("inputs")
        outputs = fields.contract("outputs")
        program = programs.load_algorithm(artifact_path, executor)
        source = fields.text("source")
        source_hash = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
        if source_hash != getattr(program, "source_sha256", source_hash):
            raise ArtifactError("the record's source text is not the source the artifact was "
                                "compiled from (its SHA-256 differs from the artifact's "
                                "source_sha256)", record_path, "source")
        stored = fields.mapping("parameters")
        actual = programs.parameters_of(program)
        if set(stored) != set(actual) or not all(
                _same_values(stored[k], actual[k]) for k in actual):
            raise ArtifactError("the record's parameters differ from the artifact's",
                                record_path, "parameters")
        report = fields.mapping("report")
        fit = report.get("fit")
        if isinstance(fit, dict) and fit.get("executor") == "compiled":
            # records written before executors were named by backend call numba "compiled"
            fit["executor"] = NUMBA
        for part in ("design", "acceptance"):
            if not isinstance(report.get(part), dict):
                raise ArtifactError(f"the report has no {part!r} section", record_path, "report")
        attempts = record.get("attempts")
        if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
            raise ArtifactError("expected a list of attempt objects", record_path, "attempts")
        abstains = record.get("abstains")
        if not isinstance(abstains, bool):
            raise ArtifactError("expected true or false", record_path, "abstains")
        return cls(task=fields.text("task"), inputs=inputs, outputs=outputs, program=program,
                   source=source, report=report, attempts=attempts,
                   design=_caseset_from(record_path, record, "design", inputs, outputs),
                   acceptance=_caseset_from(record_path, record, "acceptance", inputs, outputs),
                   settings=fields.mapping("settings"), abstains=abstains, executor=executor)


def _same_values(stored: Any, actual: np.ndarray) -> bool:
    """Whether a record's parameter value holds exactly the artifact's numbers; a string,
    a ragged list or an object holds no numbers, so it differs (never a raw error)."""
    if isinstance(stored, (str, dict)):
        return False
    try:
        values = np.asarray(stored, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return False
    return bool(np.array_equal(values, actual))


def _caseset_json(cases: CaseSet) -> dict[str, Any]:
    document: dict[str, Any] = {"indices": list(cases.indices),
                                "cases": [to_json(c) for c in cases.cases],
                                "targets": [to_json(t) for t in cases.targets]}
    if cases.truth is not None:
        document["truth"] = [to_json(t) for t in cases.truth]
    return document


def _caseset_from(path: Path, record: dict, field: str, inputs: Contract,
                  outputs: Contract) -> CaseSet:
    document = record.get(field)
    if not isinstance(document, dict):
        raise ArtifactError("expected an object with indices, cases and targets", path, field)
    indices = document.get("indices")
    cases = document.get("cases")
    targets = document.get("targets")
    if not (isinstance(indices, list) and all(isinstance(i, int) for i in indices)):
        raise ArtifactError("expected a list of integer indices", path, f"{field}.indices")
    if not (isinstance(cases, list) and isinstance(targets, list)
            and len(cases) == len(targets) == len(indices)):
        raise ArtifactError("cases, targets and indices must be lists of the same length",
                            path, field)
    try:
        parsed_cases = [normalize_case(c, inputs, f"{field}.cases[{i}]")
                        for i, c in enumerate(cases)]
        parsed_targets = [normalize_case(t, outputs, f"{field}.targets[{i}]")
                          for i, t in enumerate(targets)]
        truth = document.get("truth")
        parsed_truth = None if truth is None else [
            normalize_case(t, outputs, f"{field}.truth[{i}]") for i, t in enumerate(truth)]
    except Exception as error:
        raise ArtifactError(str(error), path, field) from None
    return CaseSet(list(indices), parsed_cases, parsed_targets, parsed_truth)


class _Validator:
    def __init__(self, path: Path, record: Any) -> None:
        if not isinstance(record, dict):
            raise ArtifactError("expected a JSON object", path)
        self.path = path
        self.record = record

    def equals(self, field: str, expected: Any) -> None:
        found = self.record.get(field)
        if found != expected or type(found) is not type(expected):
            raise ArtifactError(f"expected {expected!r}, found {found!r}", self.path, field)

    def text(self, field: str) -> str:
        value = self.record.get(field)
        if not isinstance(value, str):
            raise ArtifactError(f"expected text, found {type(value).__name__}", self.path, field)
        return value

    def mapping(self, field: str) -> dict:
        value = self.record.get(field)
        if not isinstance(value, dict):
            raise ArtifactError(f"expected an object, found {type(value).__name__}",
                                self.path, field)
        return value

    def contract(self, field: str) -> Contract:
        value = self.mapping(field)
        try:
            contract = normalize_contract(value, field)
        except Exception as error:
            raise ArtifactError(str(error), self.path, field) from None
        if COVERED in contract and field == "outputs":
            raise ArtifactError(f"{COVERED!r} is reserved", self.path, field)
        return contract
