"""The one check of a file's header: its ``format`` name and ``version`` number.

Every TensorCode file says what it is (``"format": "tensorcode.<name>"``) and which
layout of that kind it holds (``"version": N``). Each loader checks both before it reads
anything else, and a user who meets a refusal should read the same sentence whichever file
it was: the field, what was found, what this TensorCode reads, and, for a file written by
a newer TensorCode, to upgrade. ``check_header`` is that check; loaders call it and keep
their own lists of the versions they read.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..errors import ArtifactError
from .fields import at, describe, is_int


def _versions_text(versions: Collection[int]) -> str:
    ordered = sorted(versions)
    if len(ordered) == 1:
        return f"version {ordered[0]}"
    return "versions " + ", ".join(str(v) for v in ordered)


def check_header(document: Any, format_name: str, versions: int | Collection[int] | None,
                 path: Any = None, *, prefix: str = "", hint: str = "",
                 older: str = "") -> int | None:
    """Check ``document``'s ``format`` and ``version`` fields; return the version read.

    ``format_name`` is the exact name the loader reads; ``versions`` the version (or versions)
    it reads, or None for a format whose name carries its version and that has no
    ``version`` field. ``prefix`` names the object holding the header when it is not the
    top level (``"index"`` makes the fields ``index.format`` and ``index.version``).
    ``hint`` is added when the format is wrong (how to make the right file), ``older``
    when the version is older than any this TensorCode reads (how to bring the file up
    to date). Raises ``ArtifactError`` naming ``path`` and the field.
    """
    format_field, version_field = at(prefix, "format"), at(prefix, "version")
    where = prefix or "(top level)"
    if not isinstance(document, dict):
        raise ArtifactError(f"expected an object holding 'format' and 'version', found "
                            f"{describe(document)}", path=path, field=where)
    tail = f"; {hint}" if hint else ""
    if "format" not in document:
        raise ArtifactError(f"is missing; expected {format_name!r}{tail}", path=path,
                            field=format_field)
    found = document["format"]
    if found != format_name:
        raise ArtifactError(f"expected {format_name!r}, found {describe(found)}; this is not "
                            f"a {format_name} file{tail}", path=path, field=format_field)
    if versions is None:
        return None
    accepted = {versions} if isinstance(versions, int) else set(versions)
    reads = f"this TensorCode reads {_versions_text(accepted)}"
    if "version" not in document:
        raise ArtifactError(f"is missing; {reads}", path=path, field=version_field)
    version = document["version"]
    if not is_int(version):
        raise ArtifactError(f"expected an integer version, found {describe(version)}; "
                            f"{reads}", path=path, field=version_field)
    if version in accepted:
        return int(version)
    if version > max(accepted):
        raise ArtifactError(f"found version {version}, newer than this TensorCode reads "
                            f"({_versions_text(accepted)}); upgrade TensorCode to read this "
                            "file", path=path, field=version_field)
    advice = f"; {older}" if older and version < min(accepted) else ""
    raise ArtifactError(f"found version {version}, but {reads}{advice}", path=path,
                        field=version_field)


__all__ = ["check_header"]
