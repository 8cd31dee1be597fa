"""``tensorcode patch``: render, edit, diff, apply and show weight patches on safetensors
files, so a checkpoint can be read as text, patched and written back without Python.

    tensorcode patch render model.safetensors --rounded shown.safetensors --scales scales.json
    tensorcode patch edit shown.safetensors reply.txt --scales scales.json -o fix.patch.json
    tensorcode patch diff before.safetensors after.safetensors -o fix.patch.json
    tensorcode patch apply shown.safetensors fix.patch.json -o patched.safetensors
    tensorcode patch show fix.patch.json

Outputs are written atomically; an input that fails validation changes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

from ..errors import ArtifactError, PatchError
from ..files import atomic_write_bytes as write_atomic
from ..files import atomic_write_json, check_header, decode, load_tensors, read_json, save_tensors

SCALES_FORMAT = "tensorcode.scales"
SCALES_VERSION = 1


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``patch`` actions and their flags to ``parser``."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    render = actions.add_parser("render", help="write a checkpoint's tensors as integers x scale")
    render.add_argument("checkpoint", help="a .safetensors file")
    render.add_argument("--digits", type=int, default=3,
                        help="significant digits of each tensor's largest entry (default 3)")
    render.add_argument("--names", nargs="+", metavar="NAME",
                        help="render only these tensors (default: all)")
    render.add_argument("--output", "-o", help="write the text here instead of printing it")
    render.add_argument("--rounded", help="write the rounded tensors (the base edits apply "
                        "to) as a .safetensors file")
    render.add_argument("--scales", help="write each tensor's scale as JSON (for `edit`)")

    edit = actions.add_parser("edit", help="turn edit statements into a patch")
    edit.add_argument("base", help="the .safetensors the statements were written against "
                      "(the --rounded output of render)")
    edit.add_argument("edits", help="a text file of edit statements ('-' reads stdin)")
    edit.add_argument("--scales", help="scales JSON from render: values in rendered units")
    edit.add_argument("--output", "-o", required=True, help="where to write the patch JSON")
    _metadata_arguments(edit)

    diff = actions.add_parser("diff", help="record the change between two checkpoints")
    diff.add_argument("base", help="the .safetensors before")
    diff.add_argument("edited", help="the .safetensors after (same names, shapes, dtypes)")
    diff.add_argument("--output", "-o", required=True, help="where to write the patch JSON")
    _metadata_arguments(diff)

    apply = actions.add_parser("apply", help="apply a patch to a checkpoint (hashes checked)")
    apply.add_argument("checkpoint", help="the .safetensors the patch was made from")
    apply.add_argument("patch", help="a patch JSON file")
    apply.add_argument("--output", "-o", required=True,
                       help="where to write the patched .safetensors")

    show = actions.add_parser("show", help="summarize a patch file")
    show.add_argument("patch", help="a patch JSON file")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")


def _metadata_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rationale", default="", help="why the change is made")
    parser.add_argument("--author", help="who or what wrote the change")
    parser.add_argument("--evidence", action="append", default=[], metavar="JSON",
                        help='an evidence record as a JSON object, e.g. \'{"source": "eval:3"}\' '
                        "(repeatable)")


# -- files --------------------------------------------------------------------------------

def read_safetensors(path: str) -> tuple[dict[str, np.ndarray], dict[str, str] | None]:
    """Tensors (by name) and metadata of a safetensors file, or ``ArtifactError`` naming
    it; read and validated by ``tensorcode.files.tensorfile``."""
    if not os.path.isfile(path):
        raise ArtifactError("no such file", path=path)
    try:
        tensors, metadata = load_tensors(path)
    except ArtifactError as error:
        raise ArtifactError(f"not a readable safetensors file ({error}); bfloat16 tensors "
                            "must be converted to float32 first", path=path) from None
    return dict(sorted(tensors.items())), metadata or None


def write_safetensors(path: str, tensors: dict[str, np.ndarray],
                      metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` as safetensors atomically."""
    save_tensors(path, tensors, metadata)


def write_scales(path: str, scales: dict[str, float], digits: int) -> None:
    """Write the per-tensor scales ``render`` used, atomically, for ``apply --scales``."""
    document = {"format": SCALES_FORMAT, "version": SCALES_VERSION, "digits": digits,
                "scales": scales}
    atomic_write_json(path, document)


def read_scales(path: str) -> dict[str, float]:
    """Scales written by ``render --scales``, every field checked."""
    document = read_json(path, what="scales file")
    check_header(document, SCALES_FORMAT, SCALES_VERSION, path,
                 hint="write it with `tensorcode patch render --scales`")
    scales = document.get("scales")
    if not isinstance(scales, dict):
        raise ArtifactError("expected an object of tensor name -> scale", path=path,
                            field="scales")
    checked = {}
    for name, scale in scales.items():
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) \
                or not math.isfinite(scale) or scale <= 0:
            raise ArtifactError(f"expected a positive number, found {scale!r}", path=path,
                                field=f"scales.{name}")
        checked[name] = float(scale)
    return checked


def _evidence(records: list[str]) -> list[dict]:
    parsed = []
    for text in records:
        try:
            record = decode(text)
        except ValueError as error:
            raise PatchError(f"--evidence {text!r} is not valid JSON: {error}") from None
        if not isinstance(record, dict):
            raise PatchError(f'--evidence {text!r} must be a JSON object such as '
                             f'{{"source": "eval:3"}}')
        parsed.append(record)
    return parsed


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read()
    except (OSError, UnicodeDecodeError) as error:
        raise ArtifactError(f"cannot read the edit statements: {error}", path=path) from None


# -- actions ------------------------------------------------------------------------------

def _render(args: argparse.Namespace) -> int:
    from ..weights.render import render

    tensors, metadata = read_safetensors(args.checkpoint)
    if args.names:
        unknown = [name for name in args.names if name not in tensors]
        if unknown:
            raise PatchError(f"{unknown} are not in {args.checkpoint}; it has {sorted(tensors)}")
        tensors = {name: tensors[name] for name in args.names}
    shown = render(tensors, digits=args.digits)
    if args.rounded:
        # the checkpoint's own metadata travels with its rounded copy
        write_safetensors(args.rounded, shown.rounded,
                          {**(metadata or {}), "tensorcode.rendered_digits": str(args.digits)})
    if args.scales:
        write_scales(args.scales, shown.scales, args.digits)
    if args.output:
        write_atomic(args.output, shown.text.encode("utf-8"))
    else:
        sys.stdout.write(shown.text)
    return 0


def _edit(args: argparse.Namespace) -> int:
    from ..weights.patch import Patch

    base, _ = read_safetensors(args.base)
    scales = read_scales(args.scales) if args.scales else None
    patch = Patch.from_edits(base, _read_text(args.edits), scales=scales,
                             rationale=args.rationale, evidence=_evidence(args.evidence),
                             author=args.author)
    patch.save(args.output)
    print(patch.describe())
    return 0


def _diff(args: argparse.Namespace) -> int:
    from ..weights.patch import diff

    base, _ = read_safetensors(args.base)
    edited, _ = read_safetensors(args.edited)
    patch = diff(base, edited, rationale=args.rationale, evidence=_evidence(args.evidence),
                 author=args.author)
    patch.save(args.output)
    print(patch.describe())
    return 0


def _apply(args: argparse.Namespace) -> int:
    from ..weights.patch import Patch

    patch = Patch.load(args.patch)
    tensors, metadata = read_safetensors(args.checkpoint)
    patched = patch.apply(tensors)
    write_safetensors(args.output, dict(patched), metadata)
    print(patch.describe())
    print(f"fraction of {args.checkpoint} changed: {patch.fraction_changed(tensors):.6f}")
    print(f"wrote {args.output}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from ..weights.patch import Patch

    patch = Patch.load(args.patch)
    if args.json:
        print(json.dumps(patch.summary(), indent=1))
    else:
        print(patch.describe())
    return 0


_ACTIONS = {"render": _render, "edit": _edit, "diff": _diff, "apply": _apply, "show": _show}


def main(args: argparse.Namespace) -> int:
    """Run the chosen ``patch`` action."""
    return _ACTIONS[args.action](args)


__all__ = ["configure", "main", "read_safetensors", "write_safetensors", "read_scales",
           "write_scales"]
