"""The experience file's schema: what ``load_experience`` checks before it builds anything.

Kept apart from the tracing session so the rules a file must meet (format, version,
bindings, fingerprints, DAG references, codec tags) read as one list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ArtifactError
from ..files import check_header
from . import experience_codecs as codecs_module

FORMAT = "tensorcode.experience"
VERSION = 1
#: the largest experience file ``load_experience`` reads
MAX_FILE_BYTES = 256 * 1024 * 1024


def validate_document(document: Any, operations: Mapping[str, Any], allow: dict,
                      path: Any) -> None:
    """Check an experience document against the bound ``operations`` and the codec
    allowlist; raise ``ArtifactError`` naming the file and the field. Builds nothing."""
    def fail(field: str, message: str) -> None:
        raise ArtifactError(message, path=path, field=field)

    keys = {"format", "version", "operations", "calls", "supervision"}
    if not isinstance(document, dict) or set(document) != keys:
        fail("(top level)", f"expected an object with exactly the keys {sorted(keys)}")
    check_header(document, FORMAT, VERSION, path,
                 older="record it again with this TensorCode")
    bindings = document["operations"]
    if not isinstance(bindings, dict):
        fail("operations", "expected an object of name -> binding")
    for name, binding in bindings.items():
        field = f"operations.{name}"
        if not isinstance(binding, dict) or set(binding) != {"qualified_name", "replay",
                                                             "fingerprint"}:
            fail(field, "expected {qualified_name, replay, fingerprint}")
        if name not in operations:
            fail(field, f"the file binds an operation named {name!r}, but operations= has "
                        f"only {sorted(operations)}; pass the operation under that name")
        op = operations[name]
        found = {"qualified_name": getattr(op, "qualified_name", None),
                 "replay": getattr(op, "replay", None)}
        for key in ("qualified_name", "replay"):
            if binding[key] != found[key]:
                fail(f"{field}.{key}", f"expected {found[key]!r} (the bound operation), "
                                       f"found {binding[key]!r}")
        expected = op.fingerprint()
        if binding["fingerprint"] != expected:
            fail(f"{field}.fingerprint",
                 f"expected {expected} (the bound {type(op).__name__}'s configuration and "
                 f"parameter shapes), found {binding['fingerprint']!r}; the operation "
                 "changed meaning since this experience was recorded")
    calls = document["calls"]
    if not isinstance(calls, list):
        fail("calls", "expected a list of calls")
    for k, call in enumerate(calls):
        field = f"calls[{k}]"
        if not isinstance(call, dict) or set(call) != {"operation", "inputs", "output"}:
            fail(field, "expected {operation, inputs, output}")
        if not isinstance(call["operation"], str) or call["operation"] not in bindings:
            fail(f"{field}.operation", f"names {call['operation']!r:.80}, which the file's "
                                       "operations do not bind")
        if not isinstance(call["inputs"], list):
            fail(f"{field}.inputs", "expected a list")
        for p, item in enumerate(call["inputs"]):
            item_field = f"{field}.inputs[{p}]"
            if isinstance(item, dict) and set(item) == {"ref"}:
                ref = item["ref"]
                if isinstance(ref, bool) or not isinstance(ref, int) or not 0 <= ref < k:
                    fail(item_field, f"reference {ref!r} does not name an earlier call "
                                     f"(0..{k - 1})")
            elif isinstance(item, dict) and set(item) == {"value"}:
                codecs_module.validate(item["value"], allow, path, f"{item_field}.value")
            else:
                fail(item_field, "expected {\"ref\": call} or {\"value\": tagged value}")
        codecs_module.validate(call["output"], allow, path, f"{field}.output")
    supervision = document["supervision"]
    if not isinstance(supervision, list):
        fail("supervision", "expected a list")
    for s, record in enumerate(supervision):
        field = f"supervision[{s}]"
        if not isinstance(record, dict) or set(record) != {"call", "target", "loss", "source"}:
            fail(field, "expected {call, target, loss, source}")
        call = record["call"]
        if isinstance(call, bool) or not isinstance(call, int) or not 0 <= call < len(calls):
            fail(f"{field}.call", f"{call!r} does not name a call (0..{len(calls) - 1})")
        for key in ("loss", "source"):
            if not isinstance(record[key], str) or not record[key].strip():
                fail(f"{field}.{key}", "expected a nonempty string")
        codecs_module.validate(record["target"], allow, path, f"{field}.target")


__all__ = ["FORMAT", "VERSION", "MAX_FILE_BYTES", "validate_document"]
