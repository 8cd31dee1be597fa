"""Cases: validated input and output dictionaries, the seeded split, and case identity.

A case is ``{name: float64 array of the declared shape}``. Everything the loop shows,
scores, saves or compares goes through these helpers so that "the same case" means the
same thing everywhere: identical names, shapes and float64 values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import FeedError, TensorCodeError
from .inputs import Case, Contract, InputError, check_value

#: the output every program adds to the teacher's: 1.0 claims the case, 0.0 abstains
COVERED = "covered"

#: ``covered`` claims a case when it is above this (1.0 claims, 0.0 abstains; anything
#: else is read by the same rule in every executor, report and server)
CLAIM_THRESHOLD = 0.5


def claims(covered: Any) -> Any:
    """Whether a finite ``covered`` value claims its case: ``covered > 0.5``, elementwise
    on an array (the one rule the router, the reports, the fit and the service use)."""
    return covered > CLAIM_THRESHOLD


def normalize_contract(spec: Mapping[str, Any], what: str) -> Contract:
    """``{name: shape}`` with shapes as tuples of non-negative ints."""
    if not isinstance(spec, Mapping) or not spec:
        raise TensorCodeError(f"{what} must be a non-empty mapping from names to shapes, "
                              f"e.g. {{'features': (12,)}}; got {spec!r}")
    contract: Contract = {}
    for name, shape in spec.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise TensorCodeError(f"{what}: {name!r} is not a valid name; use identifiers "
                                  "such as 'features'")
        if isinstance(shape, int):
            shape = (shape,)
        try:
            dims = tuple(int(d) for d in shape)
        except TypeError:
            raise TensorCodeError(f"{what}: the shape of {name!r} must be a tuple of ints, "
                                  f"got {shape!r}") from None
        if any(d < 0 for d in dims):
            raise TensorCodeError(f"{what}: the shape of {name!r} has a negative size: {dims}")
        contract[name] = dims
    return contract


def normalize_case(case: Any, contract: Contract, what: str) -> Case:
    """One case as read-only float64 arrays of the declared shapes, under the same rules
    as a served request (``inputs.check_case``: numbers, nested lists of numbers or
    numeric arrays; a string, a boolean or ``None`` is refused, never converted);
    ``FeedError`` says which name is missing, extra, mis-shaped, not numeric or not
    finite."""
    if not isinstance(case, Mapping):
        raise FeedError(f"{what} must be a mapping from names to values, got "
                        f"{type(case).__name__}")
    missing = [n for n in contract if n not in case]
    extra = [n for n in case if n not in contract]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"unexpected {extra}")
        raise FeedError(f"{what}: {', '.join(parts)}; expected exactly {list(contract)}")
    normalized: Case = {}
    for name, shape in contract.items():
        try:
            normalized[name] = check_value(case[name], shape, repr(name))
        except InputError as error:
            raise FeedError(f"{what}: {error}") from None
    return normalized


def normalize_cases(cases: Sequence[Any], contract: Contract, what: str) -> list[Case]:
    """Each case of ``cases`` checked against ``contract`` (``what`` names them in
    errors), as float64 arrays."""
    if isinstance(cases, Mapping) or not isinstance(cases, Sequence):
        raise TensorCodeError(f"{what} must be a list of dictionaries, got "
                              f"{type(cases).__name__}")
    return [normalize_case(case, contract, f"{what}[{i}]") for i, case in enumerate(cases)]


def paired_cases(cases: Sequence[Any], targets: Sequence[Any], inputs: Contract,
                 outputs: Contract) -> tuple[list[Case], list[Case]]:
    """New cases and their targets, each validated against its contract, one per case."""
    new_cases = normalize_cases(cases, inputs, "cases")
    new_targets = normalize_cases(targets, outputs, "targets")
    if len(new_cases) != len(new_targets):
        raise TensorCodeError(f"{len(new_cases)} cases but {len(new_targets)} targets; give "
                              "one target per case")
    return new_cases, new_targets


def infer_contract(targets: Sequence[Any], what: str) -> Contract:
    """The output contract implied by the first target (names and shapes)."""
    if not targets:
        raise TensorCodeError(f"{what} is empty; give one output dictionary per case")
    first = targets[0]
    if not isinstance(first, Mapping) or not first:
        raise FeedError(f"{what}[0] must be a non-empty mapping from output names to values, "
                        f"got {first!r:.80}")
    contract = {}
    for name, value in first.items():
        try:
            contract[name] = np.shape(np.asarray(value, dtype=np.float64))
        except (TypeError, ValueError):
            raise FeedError(f"{what}[0]: {name!r} is not numeric: {value!r:.80}") from None
    contract = normalize_contract(contract, what)
    if COVERED in contract:
        raise TensorCodeError(f"{what}: the output name {COVERED!r} is reserved for the "
                              "program's claim flag; rename the teacher's output")
    return contract


def split(count: int, holdout: float, seed: int) -> tuple[list[int], list[int]]:
    """Deterministic design/acceptance indices: a seeded permutation, the first
    ``round(count * holdout)`` positions held out; both lists sorted and non-empty."""
    if not (isinstance(holdout, (int, float)) and 0.0 < float(holdout) < 1.0):
        raise TensorCodeError(f"holdout must be a fraction strictly between 0 and 1, got "
                              f"{holdout!r}")
    if count < 2:
        raise TensorCodeError(f"the workload has {count} case(s); at least 2 are needed, one "
                              "to design on and one to accept on")
    held = min(count - 1, max(1, round(count * float(holdout))))
    order = np.random.default_rng(int(seed)).permutation(count)
    acceptance = sorted(int(i) for i in order[:held])
    design = sorted(int(i) for i in order[held:])
    return design, acceptance


#: how ``distill`` splits a workload: ``input`` (the default) holds out distinct inputs,
#: so a repeated input is all design or all acceptance; ``case`` holds out positions
SPLITS = ("input", "case")


def split_by_input(cases: Sequence[Case], holdout: float, seed: int
                   ) -> tuple[list[int], list[int]]:
    """Design/acceptance indices that hold out distinct inputs, not positions: the
    distinct inputs (``case_key``, in order of first appearance) are split by ``split``,
    and every case takes the side of its input, so no acceptance input is ever among
    the design cases shown to the author. Both lists sorted and non-empty."""
    keys = [case_key(case) for case in cases]
    first: dict[str, int] = {}
    for key in keys:
        first.setdefault(key, len(first))
    if len(first) < 2:
        raise TensorCodeError(f"the workload has {len(first)} distinct input(s); at least 2 "
                              "are needed to hold inputs out (split='case' splits by "
                              "position instead)")
    _, held = split(len(first), holdout, seed)
    held_groups = set(held)
    design = [i for i, key in enumerate(keys) if first[key] not in held_groups]
    acceptance = [i for i, key in enumerate(keys) if first[key] in held_groups]
    return design, acceptance


def case_key(case: Case) -> str:
    """A digest that is equal exactly when two cases have the same names, shapes and
    float64 values (``-0.0`` and ``0.0`` are the same case)."""
    digest = hashlib.sha256()
    for name in sorted(case):
        array = np.ascontiguousarray(case[name], dtype=np.float64) + 0.0
        digest.update(name.encode())
        digest.update(repr(array.shape).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def to_json(case: Mapping[str, Any]) -> dict[str, Any]:
    """A case as JSON-ready lists and floats."""
    out = {}
    for name, value in case.items():
        array = np.asarray(value, dtype=np.float64)
        out[name] = array.tolist() if array.shape else float(array)
    return out


def format_case(case: Mapping[str, Any]) -> str:
    """Compact one-line text for prompts: integral values print without ``.0``."""
    parts = []
    for name, value in case.items():
        parts.append(f"{name}={_format_value(np.asarray(value, dtype=np.float64))}")
    return ", ".join(parts)


def _format_value(array: np.ndarray) -> str:
    if array.ndim == 0:
        value = float(array)
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.6g}"
    return "[" + ", ".join(_format_value(a) for a in array) + "]"
