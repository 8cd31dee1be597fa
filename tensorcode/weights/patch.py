"""``Patch``: a hash-pinned, data-only record of how named tensors change.

A patch holds, per tensor, the SHA-256 of the tensor it was made from and of the tensor
it produces (see ``hashing``), and one of four forms (see ``forms``). Applying it to a
mapping whose tensor hashes differ is refused, because an edit written against one set
of weights means something else on another. Rebuilding is checked against the edited
hash too, so a patch either reproduces exactly what was recorded or says why not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import PatchError
from . import patch_file
from .edits import parse_edits, run_statements
from .forms import Dense, Form, LowRank, Projection, Sparse, TensorChange
from .hashing import tensor_sha256
from .metadata import check_author, check_evidence, check_rationale
from .tensors import like, numpy_mapping, same_kind_mapping, tensor_shape, to_numpy


def differing(base: np.ndarray, edited: np.ndarray) -> np.ndarray:
    """Flat mask of elements whose bits differ (so -0.0 vs 0.0 and NaN payloads count)."""
    itemsize = base.dtype.itemsize
    unsigned = np.dtype(f"<u{itemsize}")
    left = np.ascontiguousarray(base).reshape(-1).view(unsigned if base.dtype != np.bool_
                                                       else np.uint8)
    right = np.ascontiguousarray(edited).reshape(-1).view(unsigned if edited.dtype != np.bool_
                                                          else np.uint8)
    return left != right


def _check_same_layout(name: str, base: np.ndarray, edited: np.ndarray) -> None:
    if base.shape != edited.shape:
        raise PatchError(f"tensor {name!r} changes shape from {list(base.shape)} to "
                         f"{list(edited.shape)}; a patch changes values, never shapes")
    if base.dtype != edited.dtype:
        raise PatchError(f"tensor {name!r} changes dtype from {base.dtype.name} to "
                         f"{edited.dtype.name}; cast the edited tensor back to "
                         f"{base.dtype.name}")


def _sparse_or_dense(base: np.ndarray, edited: np.ndarray, mask: np.ndarray) -> Form:
    """Sparse when (index + value) per change costs fewer bytes than the whole tensor."""
    count = int(mask.sum())
    itemsize = base.dtype.itemsize
    if count * (8 + itemsize) < base.size * itemsize:
        indices = np.flatnonzero(mask).astype(np.int64)
        return Sparse(indices, np.ascontiguousarray(edited).reshape(-1)[indices].copy())
    return Dense(np.array(edited, copy=True))


class Patch:
    """Per-tensor changes plus why they were made (``rationale``, ``evidence``, ``author``).

    Build one with ``Patch.from_edits``, ``diff`` or ``build``; read one with
    ``Patch.load``. ``changes`` maps tensor names to ``TensorChange`` in patch order.
    """

    FORMAT = patch_file.FORMAT
    VERSION = patch_file.VERSION

    def __init__(self, changes: Mapping[str, TensorChange], *, rationale: str = "",
                 evidence: Sequence[Mapping[str, Any]] = (), author: Any = None,
                 edits: str | None = None) -> None:
        for name, change in changes.items():
            if not isinstance(name, str) or not isinstance(change, TensorChange):
                raise PatchError(f"patch entries must map names to TensorChange, got "
                                 f"{name!r}: {type(change).__name__}")
            change.form.check(name, change.shape, np.dtype(change.dtype))
        self.changes: dict[str, TensorChange] = dict(changes)
        self.rationale = check_rationale(rationale)
        self.evidence = check_evidence(evidence)
        self.author = check_author(author)
        if edits is not None and not isinstance(edits, str):
            raise PatchError(f"edits must be the statement text or None, got "
                             f"{type(edits).__name__}")
        self.edits = edits

    # -- making patches -------------------------------------------------------------------
    @classmethod
    def from_edits(cls, base: Mapping[str, Any], edits: str,
                   scales: Mapping[str, float] | None = None, rationale: str = "",
                   evidence: Sequence[Mapping[str, Any]] = (), author: Any = None) -> Patch:
        """Parse edit statements, run them on ``base`` and record the result.

        ``scales`` (usually ``render(...).scales``) puts every value in the tensor's
        rendered units. Errors are ``EditError`` (a ``PatchError``) with line and column.
        """
        if not isinstance(base, Mapping):
            raise PatchError(f"base must map tensor names to tensors, got "
                             f"{type(base).__name__}")
        statements = parse_edits(edits)
        edited = run_statements(base, statements, scales, source=edits)
        touched = {name: to_numpy(name, base[name]) for name in edited}
        return diff(touched, edited, rationale=rationale, evidence=evidence, author=author,
                    edits=edits)

    # -- using patches --------------------------------------------------------------------
    def apply(self, mapping: Mapping[str, Any]) -> Mapping[str, Any]:
        """A new mapping with every patched tensor rebuilt, of the caller's kind.

        Works on NumPy arrays and on PyTorch tensors (same dtype and device back).
        Tensors the patch does not name are passed through as the same objects; the input
        is never modified. A missing tensor, a shape or dtype that differs, or a base
        hash that differs raises ``PatchError`` before anything is built.
        """
        if not hasattr(mapping, "items"):
            raise PatchError(f"apply needs a mapping from names to tensors, got "
                             f"{type(mapping).__name__}")
        bases = {}
        for name, change in self.changes.items():
            if name not in mapping:
                raise PatchError(f"the patch changes tensor {name!r}, which the mapping does "
                                 f"not have; it has {_names(mapping)}")
            array = to_numpy(name, mapping[name])
            if array.shape != change.shape or array.dtype.name != change.dtype:
                raise PatchError(f"tensor {name!r} is {array.dtype.name}{list(array.shape)} but "
                                 f"the patch was made for {change.dtype}{list(change.shape)}")
            found = tensor_sha256(array)
            if found != change.base_sha256:
                raise PatchError(f"tensor {name!r} is not the tensor this patch was made "
                                 f"from: expected base SHA-256 {change.base_sha256}, found "
                                 f"{found}. Apply the patch to the exact weights it was "
                                 "written against (for edits: the rendered, rounded weights)")
            bases[name] = array
        rebuilt = {name: self._rebuild(name, change, bases[name])
                   for name, change in self.changes.items()}
        items = {name: (like(value, rebuilt[name]) if name in rebuilt else value)
                 for name, value in mapping.items()}
        return same_kind_mapping(mapping, items)

    @staticmethod
    def _rebuild(name: str, change: TensorChange, base: np.ndarray) -> np.ndarray:
        result = change.form.rebuild(base, name)
        found = tensor_sha256(result)
        if found != change.edited_sha256:
            raise PatchError(f"rebuilding tensor {name!r} with the {change.form.kind} form gave "
                             f"SHA-256 {found}, not the recorded edited hash "
                             f"{change.edited_sha256}; the patch is corrupt or was edited by hand")
        count = int(differing(base, result).sum())
        if count != change.changed:
            raise PatchError(f"tensor {name!r}: the patch records {change.changed} changed "
                             f"elements but rebuilding changes {count}; the patch is corrupt")
        return result

    def fraction_changed(self, tensors: Mapping[str, Any]) -> float:
        """Changed elements over all elements of ``tensors`` (e.g. the whole network)."""
        if not isinstance(tensors, Mapping):
            raise PatchError(f"fraction_changed needs a mapping from names to tensors, got "
                             f"{type(tensors).__name__}")
        shapes = {name: tensor_shape(name, value) for name, value in tensors.items()}
        total = sum(int(np.prod(shape, dtype=np.int64)) for shape in shapes.values())
        for name, change in self.changes.items():
            if name not in shapes:
                raise PatchError(f"the patch changes tensor {name!r}, which is not among the "
                                 f"tensors given; it has {_names(shapes)}")
            if shapes[name] != change.shape:
                raise PatchError(f"tensor {name!r} has shape {list(shapes[name])} but "
                                 f"the patch was made for {list(change.shape)}")
        if total == 0:
            return 0.0
        return sum(change.changed for change in self.changes.values()) / total

    def summary(self) -> dict[str, Any]:
        """Report numbers: tensors, forms, elements changed, stored numbers, per tensor."""
        forms: dict[str, int] = {}
        by_tensor = {}
        for name, change in self.changes.items():
            forms[change.form.kind] = forms.get(change.form.kind, 0) + 1
            by_tensor[name] = {
                "form": change.form.kind, "shape": list(change.shape), "dtype": change.dtype,
                "size": change.size, "changed": change.changed,
                "fraction_changed": change.changed / change.size if change.size else 0.0,
                "stored_numbers": change.form.stored_numbers(),
                "base_sha256": change.base_sha256, "edited_sha256": change.edited_sha256,
            }
        return {
            "tensors": len(self.changes),
            "forms": forms,
            "elements_changed": sum(c.changed for c in self.changes.values()),
            "stored_numbers": sum(c.form.stored_numbers() for c in self.changes.values()),
            "by_tensor": by_tensor,
            "rationale": self.rationale,
            "author": self.author,
            "evidence": len(self.evidence),
        }

    def describe(self) -> str:
        """The summary as a few readable lines."""
        info = self.summary()
        forms = ", ".join(f"{kind} {count}" for kind, count in info["forms"].items())
        lines = [f"patch: {info['tensors']} tensor(s), {info['elements_changed']} element(s) "
                 f"changed" + (f" ({forms})" if forms else "")]
        width = max((len(name) for name in info["by_tensor"]), default=0)
        types = {name: f"{row['dtype']}{row['shape']}" for name, row in info["by_tensor"].items()}
        type_width = max((len(text) for text in types.values()), default=0)
        for name, row in info["by_tensor"].items():
            lines.append(f"  {name:<{width}}  {types[name]:<{type_width}}  {row['form']:<10} "
                         f"{row['changed']} of {row['size']} changed "
                         f"({100 * row['fraction_changed']:.1f}%), "
                         f"base {row['base_sha256'][:12]} -> {row['edited_sha256'][:12]}")
        if self.rationale:
            lines.append(f"rationale: {self.rationale}")
        if self.author is not None:
            lines.append(f"author: {self.author}")
        if self.evidence:
            lines.append(f"evidence: {len(self.evidence)} record(s)")
        return "\n".join(lines)

    # -- files ----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the patch as a JSON artifact, atomically."""
        patch_file.save_patch(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Patch:
        """Read and validate a patch artifact (``ArtifactError`` names file and field)."""
        return cls(**patch_file.load_patch(path))

    # -- container ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.changes)

    def __contains__(self, name: object) -> bool:
        return name in self.changes

    def names(self) -> list[str]:
        """The names of the changed tensors."""
        return list(self.changes)

    def __repr__(self) -> str:
        forms = ", ".join(f"{name}: {change.form.kind}" for name, change in self.changes.items())
        return f"Patch({{{forms}}})"


def _names(mapping: Mapping[str, Any]) -> str:
    names = list(mapping)
    shown = ", ".join(repr(n) for n in names[:20])
    return (shown + (" ..." if len(names) > 20 else "")) or "no tensors"


def diff(base: Mapping[str, Any], edited: Mapping[str, Any], *, rationale: str = "",
         evidence: Sequence[Mapping[str, Any]] = (), author: Any = None,
         edits: str | None = None) -> Patch:
    """The patch that turns ``base`` into ``edited``: sparse or dense per tensor, whichever
    stores fewer bytes; tensors whose bits are equal get no entry. Both mappings must
    name the same tensors with the same shapes and dtypes."""
    left = numpy_mapping(base)
    right = numpy_mapping(edited)
    if set(left) != set(right):
        missing = sorted(set(left) - set(right))
        extra = sorted(set(right) - set(left))
        raise PatchError(f"base and edited must name the same tensors; missing from edited: "
                         f"{missing}, not in base: {extra}")
    changes = {}
    for name, before in left.items():
        after = right[name]
        _check_same_layout(name, before, after)
        mask = differing(before, after)
        if not mask.any():
            continue
        changes[name] = TensorChange(tuple(before.shape), before.dtype.name,
                                     tensor_sha256(before), tensor_sha256(after),
                                     int(mask.sum()), _sparse_or_dense(before, after, mask))
    return Patch(changes, rationale=rationale, evidence=evidence, author=author, edits=edits)


def build(base: Mapping[str, Any], changes: Mapping[str, Any], *, rationale: str = "",
          evidence: Sequence[Mapping[str, Any]] = (), author: Any = None) -> Patch:
    """A patch from structured changes: ``{"w": LowRank(a, b), "v": Projection(u, 1.0)}``.

    A value may also be a ``Sparse`` or ``Dense`` form, or an edited array (recorded
    sparse or dense as ``diff`` would). Every change is rebuilt once here, so the edited
    hash is known and the patch is checked to apply to ``base``.
    """
    arrays = numpy_mapping(base)
    if not isinstance(changes, Mapping):
        raise PatchError(f"changes must map tensor names to forms, got {type(changes).__name__}")
    entries = {}
    for name, change in changes.items():
        if name not in arrays:
            raise PatchError(f"cannot change tensor {name!r}: the base has {_names(arrays)}")
        before = arrays[name]
        if isinstance(change, (LowRank, Projection, Sparse, Dense)):
            form = change
            after = form.rebuild(before, name)
        else:
            after = to_numpy(name, change)
            _check_same_layout(name, before, after)
            form = None
        mask = differing(before, after)
        if form is None:
            form = _sparse_or_dense(before, after, mask)
        entries[name] = TensorChange(tuple(before.shape), before.dtype.name,
                                     tensor_sha256(before), tensor_sha256(after),
                                     int(mask.sum()), form)
    return Patch(entries, rationale=rationale, evidence=evidence, author=author)


__all__ = ["Patch", "TensorChange", "diff", "build", "differing"]
