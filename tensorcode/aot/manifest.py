"""``manifest.json``: what an export holds and the hash of every file, in one format.

The manifest records the library's interface (inputs, outputs, router or plan), the
target it was compiled for, the BLAS it calls (if any), the plan's ``content_hash``
(the hash the library reports itself: its object code, parameters and interface), the
SHA-256 of every other file of the export, and ``export_sha256``: the SHA-256 of the
manifest's canonical JSON without that field. Pinning ``export_sha256`` therefore pins
every byte of the export (each file through its hash): ``tensorcode export`` prints it
and ``aot.load(dir, sha256=...)`` checks it.

The JSON is written canonically (sorted keys, fixed separators, a trailing newline), so
the same export gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from typing import Any

from ..files import Fields, at, check_header, read_json
from .abi import DTYPE_CODES, NAME_PATTERN

FORMAT = "tensorcode.aot"
VERSION = 1
MANIFEST = "manifest.json"
#: what an export holds: a plan, or a router (a plan with a covered flag)
KINDS = ("plan", "router")
#: bounds of what a manifest may list (the loader allocates per port)
MAX_FILES = 8
MAX_PORTS = 4096
MAX_NAME = 1000
MAX_RANK = 32


def canonical(document: Any) -> bytes:
    """``document`` as the export writes and hashes it."""
    return (json.dumps(document, sort_keys=True, separators=(",", ": "), indent=1,
                       ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")


def export_hash(manifest: dict) -> str:
    """The ``export_sha256`` of ``manifest`` (see the module docstring)."""
    body = {key: value for key, value in manifest.items() if key != "export_sha256"}
    return hashlib.sha256(canonical(body)).hexdigest()


def file_hash(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build(facts: dict, files: dict[str, str]) -> dict:
    """The manifest of an export: ``facts`` and the files' hashes, sealed."""
    manifest = dict(facts, format=FORMAT, version=VERSION, files=dict(sorted(files.items())))
    manifest["export_sha256"] = export_hash(manifest)
    return manifest


def read(directory: pathlib.Path) -> dict:
    """The validated manifest of the export in ``directory``: its header, its fields'
    types and its ``export_sha256`` checked (``ArtifactError`` naming the field)."""
    path = directory / MANIFEST
    document = read_json(path)
    check_header(document, FORMAT, VERSION, path,
                 hint="export a library with tensorcode export PATH -o DIR")
    fields = Fields(path)
    name = fields.string(fields.get(document, "name"), "name", NAME_PATTERN,
                         what="a library name")
    library, header = f"lib{name}.so", f"{name}.h"
    files = fields.object(fields.get(document, "files"), "files")
    if set(files) != {library, header}:
        raise fields.fail("files", f"expected the hashes of {library} and {header}, found "
                          f"{sorted(files)[:MAX_FILES]}")
    for file, digest in files.items():
        fields.sha256(digest, at("files", file))
    fields.sha256(fields.get(document, "content_hash"), "content_hash")
    fields.sha256(fields.get(document, "export_sha256"), "export_sha256")
    fields.choice(fields.get(document, "kind"), "kind", KINDS)
    for key in ("inputs", "outputs"):
        for k, port in enumerate(fields.list(fields.get(document, key), key, 0, MAX_PORTS)):
            where = at(key, k)
            fields.keys(fields.object(port, where), where, ("name", "dtype", "shape"))
            fields.string(port["name"], at(where, "name"), max_length=MAX_NAME)
            fields.choice(port["dtype"], at(where, "dtype"), DTYPE_CODES)
            fields.integers(port["shape"], at(where, "shape"), 0, MAX_RANK)
    if document["export_sha256"] != export_hash(document):
        raise fields.fail("export_sha256", "the manifest's export_sha256 is not the hash of "
                          "its content: the manifest was changed; export the library again")
    return document


__all__ = ["FORMAT", "MANIFEST", "VERSION", "build", "canonical", "export_hash",
           "file_hash", "read"]
