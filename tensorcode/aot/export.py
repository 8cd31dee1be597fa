"""Exporting a plan (or a router) as ``lib<name>.so``, ``<name>.h`` and ``manifest.json``.

``plan_library(plan, parameters, name)`` gathers what a library holds from a lowered
plan: the llvm backend's code for it (``backends.get(LLVM).shared_object``: the same IR
and optimizer as the in-process plan, emitted position-independent), its argument
layout, the parameter and constant buffers, its inputs and roots. ``export_library``
renders the C wrapper and header (``library.py``), links them with the plan's object
(``toolchain.py``) in a private build directory and writes the export atomically
(``files.replace_directory``): the same plan, parameters and toolchain give the same
bytes. A directory that is not empty is refused unless ``force``; ``force`` replaces
one that holds only files (a directory inside is never removed).

BLAS: a plan whose matrix products call BLAS links against the OpenBLAS SciPy's wheel
bundles, the library the in-process plan calls (so results agree bit for bit), by its
path: the manifest names that path and its SHA-256, and the library finds it through
its run path, so it runs where that SciPy is installed.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import stat
import tempfile
from typing import Any

from ..compiler.backends import LLVM
from ..compiler.backends import get as get_backend
from ..errors import CompileError, TensorCodeError
from ..files import replace_directory
from ..version import __version__
from . import manifest as manifests
from . import toolchain
from .library import VALUES_BLOB, Library, Port, render_header, render_source


def plan_library(plan: Any, parameters: Any, name: str,
                 input_names: list[str] | None = None,
                 output_names: list[str] | None = None) -> Library:
    """The ``Library`` of a lowered ``plan`` with ``parameters`` embedded: inputs in
    ``plan.inputs()`` order, outputs one per root (named ``input_names`` and
    ``output_names`` when given, else by their node names or position)."""
    backend = get_backend(LLVM)
    facts = backend.shared_object(plan.program, plan.approximate)  # type: ignore[attr-defined]
    layout = facts["layout"]
    graph = plan.graph
    inputs = []
    for k, index in enumerate(plan.schedule.sources.inputs):
        node = graph.nodes[index]
        label = input_names[k] if input_names else (node.name or f"input_{k}")
        inputs.append(Port(label, node.type.dtype, tuple(int(d) for d in node.type.shape),
                           slot=k))
    dtypes = list(layout.outputs)  # the output arenas, in argument order
    outputs = []
    for k, (dtype, offset, shape) in enumerate(plan.schedule.roots):
        label = output_names[k] if output_names else f"output_{k}"
        outputs.append(Port(label, dtype, tuple(int(d) for d in shape),
                            arena=dtypes.index(dtype), offset=int(offset)))
    return Library(
        name=name, kind="plan", object=facts["object"], entry=facts["entry"],
        arguments=[(a.role, a.dtype) for a in layout.arguments],
        scratch=list(layout.scratch.values()), output_arenas=list(layout.outputs.values()),
        errors=list(layout.errors), head=list(plan.buffers(parameters)), inputs=inputs,
        outputs=outputs, target=dict(facts["target"]), blas=list(facts["blas"]))


def content_hash(library: Library) -> str:
    """The hash a library reports (``<name>_content_hash``): its object code, embedded
    values, argument layout and interface."""
    digest = hashlib.sha256()
    for part in (library.object, library.values(),
                 manifests.canonical({"arguments": library.arguments,
                                      "scratch": library.scratch,
                                      "outputs": library.output_arenas,
                                      "errors": library.errors, "entry": library.entry,
                                      "name": library.name, "version": __version__,
                                      "interface": library.interface(),
                                      "covered": library.covered})):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def _blas_path(library: Library) -> str | None:
    if not library.blas:
        return None
    backend = get_backend(LLVM)
    found = backend.blas_library()  # type: ignore[attr-defined]
    if found is None:
        raise CompileError("this plan's matrix products call BLAS from the OpenBLAS SciPy's "
                           "wheel bundles, and it was not found; install scipy from its "
                           "wheel to export it")
    return str(found)


def _check_target(directory: pathlib.Path, force: bool) -> None:
    """Refuse a non-empty ``directory`` unless ``force``; with ``force``, refuse one
    holding anything but files (``--force`` never removes a directory tree)."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise TensorCodeError(f"{directory} exists and is not a directory")
    entries = sorted(directory.iterdir())
    if entries and not force:
        raise TensorCodeError(f"{directory} is not empty; export into a new or empty "
                              "directory, or pass --force (force=True) to replace its files")
    for entry in entries:
        if not stat.S_ISREG(entry.lstat().st_mode):
            raise TensorCodeError(f"{directory} holds {entry.name}, which is not a file; "
                                  "export into another directory")


def export_library(library: Library, directory: str | os.PathLike, force: bool = False
                   ) -> dict:
    """Write ``library`` into ``directory`` (see the module docstring); returns the
    manifest (``export_sha256`` pins the export)."""
    library.check()
    directory = pathlib.Path(directory)
    _check_target(directory, force)
    blas = _blas_path(library)
    digest = content_hash(library)
    header, library_file = f"{library.name}.h", f"lib{library.name}.so"
    with tempfile.TemporaryDirectory(prefix="tensorcode-export-") as build:
        work = pathlib.Path(build)
        (work / header).write_text(render_header(library), encoding="ascii")
        (work / "wrapper.c").write_text(render_source(library, digest), encoding="ascii")
        (work / VALUES_BLOB).write_bytes(library.values())
        (work / "plan.o").write_bytes(library.object)
        linker = toolchain.link(work, library.name, "plan.o", "wrapper.c", blas)
        files = {name: manifests.file_hash(work / name) for name in (library_file, header)}
        facts = {"name": library.name, "tensorcode": __version__, "content_hash": digest,
                 "target": library.target, "linker": linker,
                 "blas": None if blas is None else {
                     "library": blas, "sha256": manifests.file_hash(pathlib.Path(blas)),
                     "symbols": library.blas},
                 **library.interface()}
        document = manifests.build(facts, files)

        def fill(temp: pathlib.Path) -> None:
            os.chmod(temp, 0o755)
            for name, mode in ((library_file, 0o755), (header, 0o644)):
                shutil.copyfile(work / name, temp / name)
                os.chmod(temp / name, mode)
            (temp / manifests.MANIFEST).write_bytes(manifests.canonical(document))
            os.chmod(temp / manifests.MANIFEST, 0o644)

        owned = [library_file, header, manifests.MANIFEST]
        if directory.is_dir():
            owned += sorted({p.name for p in directory.iterdir()} - set(owned))
        replace_directory(directory, fill, owned)
    return document


def export_plan(plan: Any, directory: str | os.PathLike, parameters: Any, name: str = "plan",
                force: bool = False) -> dict:
    """``plan`` with ``parameters`` exported into ``directory`` (``Plan.export``)."""
    return export_library(plan_library(plan, parameters, name), directory, force)


__all__ = ["content_hash", "export_library", "export_plan", "plan_library"]
