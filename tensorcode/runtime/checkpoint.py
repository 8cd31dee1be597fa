"""Checkpoints are pure state: named snapshots, directory checkpoints, single files.

``snapshot`` and ``restore`` copy a module's payloads in visit order (the Topos guide's
"Checkpoints"; the positional form, for the same module in the same code);
``named_snapshot`` copies a module's payloads under structured paths (``0.weights``),
the form that survives code changes and maps onto foreign layouts; ``named_restore``
builds a new table from one and touches no graph. A restore validates everything
before building anything, so a bad snapshot changes nothing.

``save(dir, parameters, optimizer=..., generator=...)`` writes a training checkpoint:
``tensors-<id>.safetensors`` (parameters and optimizer state under structured names)
and ``training.json`` (format, version, steps, progress, optimizer type and
hyperparameters, module modes, generator state, the tensor file's name and SHA-256).
Each file is written atomically and the JSON goes last as the commit record, so the
previous checkpoint stays loadable if the writer dies at any moment. ``load`` verifies
everything before it touches anything and restores all or nothing; ``save_file``
writes the same content as one safetensors file with the JSON in its metadata, and
``load`` reads either form.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..compiler.plans.tables import Layout, Parameters, Table
from ..errors import ArtifactError, DTypeError, ShapeError, TensorCodeError
from ..files import atomic_write, check_header, fsync_directory
from ..files.atomic import remove_stale_temporaries
from ..files.strict_json import JsonLimits, decode
from ..files.tensorfile import DATA_DIGEST_PLACEHOLDER, TensorFile, start_tensors, write_tensors


def named_snapshot(parameters: Parameters, module: Any) -> dict[str, np.ndarray]:
    """``{path: copy of payload}`` for ``module``'s parameters, in visit order."""
    return {path: np.array(parameters.of(symbol), copy=True)
            for path, symbol in module.named_parameters()}


def named_restore(parameters: Parameters, module: Any,
                  snapshot: Mapping[str, Any]) -> Parameters:
    """A new table equal to ``parameters`` with ``module``'s slots taken from
    ``snapshot``; a missing path, an extra path, or a wrong shape or dtype raises and
    nothing is built."""
    values = {path: np.asarray(value) for path, value in snapshot.items()}
    named = _check_named(parameters, module,
                         {path: (v.shape, v.dtype.name) for path, v in values.items()})
    return parameters.replace({symbol: values[path] for path, symbol in named.items()})


def named_restore_file(parameters: Parameters, module: Any, source: TensorFile,
                       entries: Mapping[str, str] | None = None, *,
                       mapped: bool = False) -> Parameters:
    """``named_restore`` straight from a tensor file, copying each value once: from the
    file into its place in the new table's buffers. ``entries`` maps each snapshot path
    to the name of the file's tensor holding it (default: every tensor under its own
    name). The paths, shapes and dtypes are checked against ``module`` from the header
    alone, with ``named_restore``'s rules and errors, before anything is read; slots the
    module does not name keep ``parameters``' values. On any refusal ``parameters`` is
    untouched and no table is built.

    ``mapped=True`` goes further when the file holds every slot of a dtype back to back
    in the table's order (as a file written in that order does): that buffer is then a
    copy-on-write map of the file (``TensorFile.map_run``), so nothing is copied and
    pages load on first use; otherwise it is read as above."""
    if entries is None:
        entries = {name: name for name in source.entries}
    unknown = [name for name in entries.values() if name not in source.entries]
    if unknown:
        raise ArtifactError(f"the file has no tensors {unknown}", path=source.path)
    if len(set(entries.values())) != len(entries):
        shared = sorted({n for n in entries.values() if list(entries.values()).count(n) > 1})
        raise ArtifactError(f"tensors {shared} are named for more than one path; each path "
                            "needs its own tensor", path=source.path)
    named = _check_named(parameters, module, {
        path: (source.entries[name][1], source.entries[name][0])
        for path, name in entries.items()})
    layout = parameters.layout
    taken = {layout.index(symbol): path for path, symbol in named.items()}
    buffers = {}
    for dtype, size in layout.sizes.items():
        buffer = _mapped_buffer(source, layout, dtype, taken, entries) if mapped else None
        buffers[dtype] = np.empty(size, dtype=dtype) if buffer is None else buffer
    copied = {d for d, b in buffers.items() if b.flags.owndata}
    targets = {}
    for k, (slot, old) in enumerate(zip(layout.slots, parameters.payloads())):
        if slot.dtype not in copied:
            continue  # (that whole buffer maps the file)
        place = buffers[slot.dtype][slot.offset:slot.offset + slot.size]
        if k in taken:
            targets[entries[taken[k]]] = place.reshape(slot.shape)
        else:
            place[...] = old.reshape(-1)
    source.read_into(targets)
    return Parameters.from_buffers(layout, buffers)


def _mapped_buffer(source: TensorFile, layout: Layout, dtype: str, taken: Mapping[int, str],
                   entries: Mapping[str, str]) -> np.ndarray | None:
    """The flat ``dtype`` buffer as a map of ``source`` when the file holds every slot
    of that dtype back to back in the layout's order; ``None`` otherwise."""
    run, offset = [], 0
    for k, slot in enumerate(layout.slots):
        if slot.dtype != dtype:
            continue
        if k not in taken or slot.offset != offset:
            return None
        run.append(entries[taken[k]])
        offset += slot.size
    return source.map_run(run)


def _check_named(parameters: Parameters, module: Any,
                 found: Mapping[str, tuple[tuple[int, ...], str]]) -> dict[str, Any]:
    """``module``'s ``{path: symbol}`` once ``found`` (``{path: (shape, dtype name)}``
    of a snapshot) has exactly its paths with its shapes and dtypes; raises otherwise,
    naming the path."""
    named = dict(module.named_parameters())
    missing = [p for p in named if p not in found]
    extra = [p for p in found if p not in named]
    if missing or extra:
        details = []
        if missing:
            details.append(f"missing paths {missing}")
        if extra:
            details.append(f"unexpected paths {extra}")
        raise ArtifactError("snapshot does not match the module: " + "; ".join(details) +
                            f"; the module has {list(named)}", field="snapshot")
    for path, symbol in named.items():
        shape, dtype = found[path]
        expected = parameters.of(symbol)
        if tuple(shape) != expected.shape:
            raise ShapeError(f"snapshot path {path!r}: expected shape {list(expected.shape)}, "
                             f"got {list(shape)}")
        if dtype != expected.dtype.name:
            raise DTypeError(f"snapshot path {path!r}: expected {expected.dtype}, got "
                             f"{dtype}")
    return named


def snapshot(parameters: Parameters, module: Any) -> list[np.ndarray]:
    """Copies of ``module``'s parameter payloads in visit order: the positional form of
    ``named_snapshot``, for the same module in the same code."""
    return [np.array(parameters.of(symbol), copy=True) for symbol in module.parameters()]


def restore(parameters: Parameters, module: Any, snapshot: Any) -> Parameters:
    """A new table equal to ``parameters`` with ``module``'s slots taken, in visit order,
    from ``snapshot`` (a sequence as ``snapshot`` returns). A snapshot of the wrong
    length, or a payload of the wrong shape or dtype, raises and nothing is built; no
    graph is touched either way."""
    symbols = module.parameters()
    if isinstance(snapshot, (str, bytes, Mapping)) or not hasattr(snapshot, "__len__"):
        raise ArtifactError(f"a positional snapshot is a sequence of payloads in visit order, "
                            f"got {type(snapshot).__name__}; for paths use named_restore",
                            field="snapshot")
    if len(snapshot) != len(symbols):
        raise ArtifactError(f"snapshot has {len(snapshot)} payloads, but the module has "
                            f"{len(symbols)} parameters (in visit order: "
                            f"{[path for path, _ in module.named_parameters()]})",
                            field="snapshot")
    updates = {}
    for position, (symbol, payload) in enumerate(zip(symbols, snapshot)):
        value = np.asarray(payload)
        expected = parameters.of(symbol)
        if value.shape != expected.shape:
            raise ShapeError(f"snapshot payload {position}: expected shape "
                             f"{list(expected.shape)}, got {list(value.shape)}")
        if value.dtype != expected.dtype:
            raise DTypeError(f"snapshot payload {position}: expected {expected.dtype}, got "
                             f"{value.dtype}")
        updates[symbol] = value
    return parameters.replace(updates)


# -- training checkpoints -------------------------------------------------------------------
FORMAT = "tensorcode.checkpoint"
VERSION = 1
MANIFEST = "training.json"
#: the metadata key under which a single-file checkpoint keeps its manifest
METADATA_KEY = "tensorcode.checkpoint"
_FIELDS = {"format", "version", "steps", "progress", "modes", "generator", "parameters",
           "optimizer", "tensors"}
#: fields a manifest may lack (written by later writers; older checkpoints still load)
_OPTIONAL_FIELDS = {"fingerprints"}
_PARAMETER_FIELDS = {"key", "name", "shape", "dtype"}
_OPTIMIZER_FIELDS = {"type", "param_groups", "state"}


@dataclass
class Restored:
    """What ``load`` restored.

    ``parameters`` is a new table (tables are immutable; the caller's is untouched);
    the optimizer and generator passed to ``load`` were updated in place. ``steps``,
    ``progress`` (the caller's data cursors) and ``modes`` come back as saved;
    ``optimizer_type`` names the optimizer the checkpoint holds state for (``None``
    when it holds none) and ``path`` the file the tensors came from.
    """

    parameters: Parameters
    steps: int
    progress: dict[str, Any]
    modes: dict[str, Any] | None
    optimizer_type: str | None
    generator_restored: bool
    path: pathlib.Path
    manifest: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def fingerprints(self) -> dict[str, str] | None:
        """The saved operations' fingerprints by name (``None`` when not recorded)."""
        return self.manifest.get("fingerprints")


def save(directory: str | os.PathLike, parameters: Parameters, optimizer: Any = None,
         steps: int = 0, progress: Mapping[str, Any] | None = None, generator: Any = None,
         modes: Mapping[str, Any] | None = None,
         fingerprints: Mapping[str, str] | None = None) -> pathlib.Path:
    """Write a directory checkpoint and return the path of its ``training.json``.

    The tensor file gets a fresh ``<id>``; ``training.json`` is replaced last, and only
    then are older tensor files removed. One writer per directory."""
    directory = pathlib.Path(directory)
    manifest, tensors = _collect(parameters, optimizer, steps, progress, generator, modes)
    if fingerprints is not None:
        manifest["fingerprints"] = dict(fingerprints)
    directory.mkdir(parents=True, exist_ok=True)
    name = f"tensors-{uuid.uuid4().hex[:16]}.safetensors"
    # the SHA-256 finishes in its thread while the file is flushed and fsynced
    finishers: list[Callable[[], str]] = []
    try:
        atomic_write(directory / name, lambda f: finishers.append(start_tensors(f, tensors)))
    finally:
        digests = [finish() for finish in finishers]
    digest = digests[0]
    manifest["tensors"] = {"file": name, "sha256": digest}
    text = json.dumps(manifest, indent=1, allow_nan=False).encode()
    atomic_write(directory / MANIFEST, lambda f: f.write(text))
    _remove_stale(directory, keep=name)
    return directory / MANIFEST


def save_file(path: str | os.PathLike, parameters: Parameters, optimizer: Any = None,
              steps: int = 0, progress: Mapping[str, Any] | None = None,
              generator: Any = None, modes: Mapping[str, Any] | None = None,
              fingerprints: Mapping[str, str] | None = None) -> pathlib.Path:
    """Write a standalone checkpoint: one safetensors file whose metadata holds the
    manifest (with the SHA-256 of the tensor bytes). ``load`` reads it like a
    directory checkpoint."""
    path = pathlib.Path(path)
    manifest, tensors = _collect(parameters, optimizer, steps, progress, generator, modes)
    if fingerprints is not None:
        manifest["fingerprints"] = dict(fingerprints)
    # The digest covers the data section; the writer fills it into the header once the
    # bytes are written (a same-length placeholder until then, in a temp file).
    manifest["tensors"] = {"file": None, "sha256": DATA_DIGEST_PLACEHOLDER}
    metadata = {METADATA_KEY: json.dumps(manifest, allow_nan=False)}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: write_tensors(f, tensors, metadata, digest="data"))
    return path


def load(path: str | os.PathLike, parameters: Parameters | Layout, optimizer: Any = None,
         generator: Any = None, check: Callable[[dict], None] | None = None) -> Restored:
    """Restore a checkpoint (a directory or a single file) for ``parameters``' layout.

    Verifies the format, version, checksum, names, shapes, dtypes, the optimizer type
    and its state before changing anything; on any failure raises ``ArtifactError``
    naming the file and field and restores nothing. On success the ``optimizer`` and
    ``generator`` (when given) hold the saved state and a ``Restored`` is returned.
    ``check(manifest)``, when given, runs after every other check and before anything
    is committed (a caller's own fields, such as modes), so the checkpoint is read and
    hashed once."""
    path = pathlib.Path(path)
    layout = parameters.layout if isinstance(parameters, Table) else parameters
    if not isinstance(layout, Layout):
        raise TypeError(f"load needs the Parameters (or Layout) to restore into, got "
                        f"{type(parameters).__name__}")
    if path.is_dir():
        manifest_path = path / MANIFEST
        manifest = _read_manifest(manifest_path)
        tensor_file = TensorFile(path / _tensor_file_name(manifest, manifest_path))
        digest_kind, digest_field = "file", "sha256"
    elif path.is_file():
        manifest_path = path
        tensor_file = TensorFile(path)
        if METADATA_KEY not in tensor_file.metadata:
            raise ArtifactError(f"no {METADATA_KEY!r} entry in the metadata: not a TensorCode "
                                "checkpoint", path=path, field="__metadata__")
        manifest = _parse_manifest(tensor_file.metadata[METADATA_KEY], path)
        if manifest["tensors"]["file"] is not None:
            raise ArtifactError("a single-file checkpoint names no other tensor file",
                                path=path, field="tensors.file")
        digest_kind, digest_field = "data", "tensors.sha256"
    else:
        raise ArtifactError("no checkpoint here (neither a directory nor a file)", path=path)
    return _restore(manifest, manifest_path, tensor_file, digest_kind, digest_field, layout,
                    optimizer, generator, check)


# -- writing --------------------------------------------------------------------------------
def parameter_keys(layout: Layout) -> list[str]:
    """Each slot's tensor name: ``parameters/<path>`` (``Slot.path``: the recorded name,
    or ``%<slot id>`` for an unnamed parameter, its stable position in recording order)."""
    keys = [f"parameters/{slot.path}" for slot in layout.slots]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise TensorCodeError(f"parameter names must be unique to be checkpointed; "
                              f"{duplicates} appear more than once: name them apart")
    return keys


def _collect(parameters: Parameters, optimizer: Any, steps: int, progress: Any,
             generator: Any, modes: Any) -> tuple[dict, dict[str, np.ndarray]]:
    if not isinstance(parameters, Parameters):
        raise TypeError(f"save needs a Parameters table, got {type(parameters).__name__}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    progress = {} if progress is None else progress
    _check_json("progress", progress)
    if modes is not None:
        _check_json("modes", modes)
    layout = parameters.layout
    keys = parameter_keys(layout)
    tensors: dict[str, np.ndarray] = dict(zip(keys, parameters.payloads()))
    entries = [{"key": key, "name": slot.name, "shape": list(slot.shape), "dtype": slot.dtype}
               for key, slot in zip(keys, layout.slots)]
    optimizer_entry = None
    if optimizer is not None:
        if optimizer.layout is not None and optimizer.layout is not layout and \
                [(s.shape, s.dtype) for s in optimizer.layout.slots] != \
                [(s.shape, s.dtype) for s in layout.slots]:
            raise TensorCodeError("the optimizer holds state for other parameters than the "
                                  "ones being saved")
        state_dict = optimizer.state_dict()
        groups = []
        for group in state_dict["param_groups"]:
            group = {k: v for k, v in group.items() if k != "params"}
            groups.append(_plain(group))
        if optimizer.layout is None:
            groups[0]["params"] = list(range(len(layout)))
        else:
            groups[0]["params"] = list(state_dict["param_groups"][0]["params"])
        state = {}
        for index, entry in state_dict["state"].items():
            state[str(index)] = list(entry)
            for key, value in entry.items():
                tensors[f"optimizer/{index}/{key}"] = np.asarray(value)
        optimizer_entry = {"type": optimizer.type_name(), "param_groups": groups,
                           "state": state}
        _check_json("optimizer hyperparameters", groups)
    manifest = {"format": FORMAT, "version": VERSION, "steps": int(steps),
                "progress": _plain(progress), "modes": None if modes is None else _plain(modes),
                "generator": None if generator is None else generator.get_state(),
                "parameters": entries, "optimizer": optimizer_entry}
    return manifest, tensors


def _remove_stale(directory: pathlib.Path, keep: str) -> None:
    """After the commit: drop tensor files no manifest names and temp files of writers
    that died; best effort, a leftover is harmless. A superseded tensor file leaves the
    directory at once, but the filesystem frees its blocks (as long as writing them took)
    when its last descriptor closes: that close runs in a thread, so the save returns
    without waiting for it."""
    removed = remove_stale_temporaries(directory) > 0  # (of writers no longer alive)
    held: list[int] = []
    for entry in directory.iterdir():
        name = entry.name
        if name.startswith("tensors-") and name.endswith(".safetensors") and name != keep:
            try:
                held.append(os.open(entry, os.O_RDONLY))
                entry.unlink()
                removed = True
            except OSError:
                pass
    if held:
        threading.Thread(target=_close_all, args=(held,), daemon=True).start()
    if removed:
        fsync_directory(directory)


def _close_all(descriptors: list[int]) -> None:
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            os.close(descriptor)


def _check_json(what: str, value: Any) -> None:
    try:
        json.dumps(_plain(value), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise TensorCodeError(f"{what} must be JSON data (dicts, lists, strings, finite "
                              f"numbers, booleans, None): {error}") from error


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k) if not isinstance(k, str) else k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


# -- reading --------------------------------------------------------------------------------
#: ``training.json`` larger than this is refused before it is read
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


def _read_manifest(path: pathlib.Path) -> dict:
    try:
        size = path.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise ArtifactError(f"the manifest is {size} bytes, more than the "
                                f"{MAX_MANIFEST_BYTES} allowed", path=path)
        text = path.read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"no {MANIFEST}: not a checkpoint directory, or no checkpoint "
                            "was committed yet", path=path) from None
    except OSError as error:
        raise ArtifactError(f"cannot read: {error}", path=path) from error
    try:
        return _parse_manifest(text.decode("utf-8"), path)
    except UnicodeDecodeError as error:
        raise ArtifactError("not UTF-8 text", path=path) from error


#: a generator state holds 128-bit integers and a seed may be wider still
_MANIFEST_LIMITS = JsonLimits(min_integer=-(2 ** 256), max_integer=2 ** 256)


def _parse_manifest(text: str, path: pathlib.Path) -> dict:
    try:
        manifest = decode(text, _MANIFEST_LIMITS)
    except ValueError as error:
        raise ArtifactError(f"not valid JSON: {error}", path=path) from error
    if not isinstance(manifest, dict):
        raise ArtifactError("the manifest must be a JSON object", path=path)
    missing = sorted(_FIELDS - set(manifest))
    extra = sorted(set(manifest) - _FIELDS - _OPTIONAL_FIELDS)
    if missing:
        raise ArtifactError(f"missing field(s) {missing}", path=path, field=missing[0])
    if extra:
        raise ArtifactError(f"unexpected field(s) {extra}; this reader knows {sorted(_FIELDS)}",
                            path=path, field=extra[0])
    check_header(manifest, FORMAT, VERSION, path)
    steps = manifest["steps"]
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ArtifactError(f"steps must be a non-negative integer, got {steps!r}",
                            path=path, field="steps")
    if not isinstance(manifest["progress"], dict):
        raise ArtifactError("progress must be an object", path=path, field="progress")
    if manifest["modes"] is not None and not isinstance(manifest["modes"], dict):
        raise ArtifactError("modes must be an object or null", path=path, field="modes")
    fingerprints = manifest.get("fingerprints")
    if fingerprints is not None and not (isinstance(fingerprints, dict) and all(
            isinstance(v, str) for v in fingerprints.values())):
        raise ArtifactError("fingerprints must map operation names to SHA-256 texts",
                            path=path, field="fingerprints")
    if manifest["generator"] is not None and not isinstance(manifest["generator"], dict):
        raise ArtifactError("generator must be an object or null", path=path,
                            field="generator")
    tensors = manifest["tensors"]
    if not isinstance(tensors, dict) or set(tensors) != {"file", "sha256"}:
        raise ArtifactError("tensors must be {file, sha256}", path=path, field="tensors")
    if not isinstance(tensors["sha256"], str) or len(tensors["sha256"]) != 64:
        raise ArtifactError("tensors.sha256 must be a hex SHA-256", path=path,
                            field="tensors.sha256")
    entries = manifest["parameters"]
    if not isinstance(entries, list):
        raise ArtifactError("parameters must be a list", path=path, field="parameters")
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != _PARAMETER_FIELDS:
            raise ArtifactError(f"each parameter entry has exactly {sorted(_PARAMETER_FIELDS)}",
                                path=path, field=f"parameters[{k}]")
    optimizer = manifest["optimizer"]
    if optimizer is not None and (not isinstance(optimizer, dict) or
                                  set(optimizer) != _OPTIMIZER_FIELDS):
        raise ArtifactError(f"optimizer must be null or have exactly "
                            f"{sorted(_OPTIMIZER_FIELDS)}", path=path, field="optimizer")
    return manifest


def _tensor_file_name(manifest: dict, path: pathlib.Path) -> str:
    name = manifest["tensors"]["file"]
    if not (isinstance(name, str) and name.startswith("tensors-") and
            name.endswith(".safetensors") and "/" not in name and "\\" not in name and
            name not in (".", "..")):
        raise ArtifactError(f"tensors.file must name a tensors-<id>.safetensors file in the "
                            f"same directory, got {name!r}", path=path, field="tensors.file")
    return name


class _Checks:
    """Errors that name the checkpoint's manifest or tensor file and the bad field, and
    the tensor-header check every stage of ``_restore`` uses."""

    def __init__(self, manifest_path: pathlib.Path, tensor_file: TensorFile) -> None:
        self.manifest_path = manifest_path
        self.tensor_path = tensor_file.path
        self.entries = tensor_file.entries

    def fail(self, message: str, field: str, path: pathlib.Path | None = None
             ) -> ArtifactError:
        return ArtifactError(message, path=path or self.manifest_path, field=field)

    def tensor(self, key: str, shape: tuple[int, ...] | None, dtype: str | None) -> None:
        """The tensor file holds ``key`` with this shape and dtype (None: any)."""
        if key not in self.entries:
            raise self.fail(f"the tensor file has no tensor {key!r}", key, self.tensor_path)
        found_dtype, found_shape = self.entries[key]
        if shape is not None and tuple(found_shape) != tuple(shape):
            raise self.fail(f"shape {list(found_shape)}, expected {list(shape)}", key,
                            self.tensor_path)
        if dtype is not None and found_dtype != dtype:
            raise self.fail(f"dtype {found_dtype}, expected {dtype}", key, self.tensor_path)


def _restore(manifest: dict, manifest_path: pathlib.Path, tensor_file: TensorFile,
             digest_kind: str, digest_field: str, layout: Layout, optimizer: Any,
             generator: Any, check: Callable[[dict], None] | None = None) -> Restored:
    """Validate the manifest and the tensor header against the caller's objects, read the
    tensors (parameters straight into the new table's buffers) and verify the checksum,
    validate the optimizer and generator state, then commit all at once."""
    checks = _Checks(manifest_path, tensor_file)
    keys = parameter_keys(layout)
    _check_parameters(checks, manifest["parameters"], keys, layout)
    opt_entry = manifest["optimizer"]
    state_names = _check_optimizer_entry(checks, opt_entry, optimizer)
    expected_names = set(keys) | {f"optimizer/{index}/{name}"
                                  for index, names in state_names.items() for name in names}
    extra = sorted(set(checks.entries) - expected_names)
    if extra:
        raise checks.fail(f"unexpected tensors {extra[:5]} (renamed or from another "
                          "program)", extra[0], checks.tensor_path)
    if generator is not None and manifest["generator"] is None:
        raise checks.fail("the checkpoint holds no generator state", "generator")

    # read: parameters straight into the flat buffers the new table will own
    buffers = {d: np.empty(n, dtype=d) for d, n in layout.sizes.items()}
    targets = {key: buffers[slot.dtype][slot.offset:slot.offset + slot.size].reshape(slot.shape)
               for key, slot in zip(keys, layout.slots)}
    tensors, digest = tensor_file.read(targets, digest=digest_kind)
    recorded = manifest["tensors"]["sha256"]
    if digest != recorded:
        hashed = "file hashes" if digest_kind == "file" else "tensor bytes hash"
        raise checks.fail(f"checksum mismatch: the {hashed} to {digest}, the manifest "
                          f"records {recorded} (corrupted or replaced)", digest_field,
                          checks.tensor_path)

    commit_optimizer = None
    if optimizer is not None:
        commit_optimizer = _prepare_optimizer(checks, optimizer, opt_entry, state_names,
                                              tensors, layout)
    restore_generator = False
    if generator is not None:
        _probe_generator(checks, generator, manifest["generator"])
        restore_generator = True

    if check is not None:
        check(manifest)
    restored = Parameters.from_buffers(layout, buffers)
    # everything is valid: commit (none of these can fail now)
    if commit_optimizer is not None:
        commit_optimizer()
    if restore_generator:
        generator.set_state(manifest["generator"])  # proven valid on the probe above
    return Restored(parameters=restored, steps=manifest["steps"],
                    progress=manifest["progress"], modes=manifest["modes"],
                    optimizer_type=None if opt_entry is None else opt_entry["type"],
                    generator_restored=restore_generator, path=checks.tensor_path,
                    manifest=manifest)


def _check_parameters(checks: _Checks, entries: list, keys: list[str], layout: Layout
                      ) -> None:
    """The manifest's parameter entries and tensors match the caller's layout, slot for
    slot (key, name, shape, dtype)."""
    if len(entries) != len(layout):
        raise checks.fail(f"the checkpoint holds {len(entries)} parameters, these "
                          f"parameters have {len(layout)}", "parameters")
    for k, (entry, key, slot) in enumerate(zip(entries, keys, layout.slots)):
        where = f"parameters[{k}]"
        if entry["key"] != key or entry["name"] != slot.name:
            raise checks.fail(f"expected the parameter {key!r} here, the checkpoint has "
                              f"{entry['key']!r} (name {entry['name']!r})", where + ".name")
        if entry["shape"] != list(slot.shape):
            raise checks.fail(f"{key}: shape {entry['shape']} in the checkpoint, "
                              f"{list(slot.shape)} here", where + ".shape")
        if entry["dtype"] != slot.dtype:
            raise checks.fail(f"{key}: dtype {entry['dtype']} in the checkpoint, "
                              f"{slot.dtype} here", where + ".dtype")
        checks.tensor(key, slot.shape, slot.dtype)


def _check_optimizer_entry(checks: _Checks, opt_entry: dict | None, optimizer: Any
                           ) -> dict[int, list[str]]:
    """The optimizer entry fits the caller's optimizer (if any) and names only tensors
    the file holds; returns the state keys per parameter index."""
    if optimizer is not None:
        if opt_entry is None:
            raise checks.fail("the checkpoint holds no optimizer state; load without an "
                              "optimizer or save one with it", "optimizer")
        if opt_entry["type"] != optimizer.type_name():
            raise checks.fail(f"the state belongs to a {opt_entry['type']!r} optimizer, not "
                              f"{optimizer.type_name()!r}: rebuild the same optimizer type",
                              "optimizer.type")
    state_names: dict[int, list[str]] = {}
    if opt_entry is None:
        return state_names
    state = opt_entry["state"]
    if not isinstance(state, dict):
        raise checks.fail("optimizer.state must map indices to key lists", "optimizer.state")
    for index, names in state.items():
        if not (isinstance(index, str) and index.isdigit()) or not isinstance(names, list) \
                or not all(isinstance(n, str) for n in names):
            raise checks.fail(f"bad entry {index!r}", f"optimizer.state.{index}")
        for name in names:
            # a step count is a float32 scalar (as written, and as PyTorch keeps it): a
            # header retyped to int32 would reread its bytes as another count
            step = name == "step"
            checks.tensor(f"optimizer/{index}/{name}", () if step else None,
                          "float32" if step else None)
        state_names[int(index)] = names
    return state_names


def _prepare_optimizer(checks: _Checks, optimizer: Any, opt_entry: dict,
                       state_names: dict[int, list[str]], tensors: dict[str, np.ndarray],
                       layout: Layout) -> Any:
    """Validate the saved optimizer state as a PyTorch state dict; the commit function."""
    state_dict_state = {index: {name: tensors[f"optimizer/{index}/{name}"]
                                for name in names}
                        for index, names in state_names.items()}
    groups = opt_entry["param_groups"]
    if isinstance(groups, list):
        groups = [dict(g, betas=tuple(g["betas"])) if isinstance(g, dict) and
                  isinstance(g.get("betas"), list) else g for g in groups]
    try:
        return optimizer.prepare_load({"state": state_dict_state, "param_groups": groups},
                                      layout)
    except (TensorCodeError, TypeError, ValueError) as error:
        raise checks.fail(str(error), "optimizer") from error


def _probe_generator(checks: _Checks, generator: Any, state: Any) -> None:
    """The saved generator state loads into a clone of ``generator`` (which is untouched).
    A state recorded on another device (a CUDA generator) is refused as such: the
    generator here draws on the CPU, and cannot continue a CUDA stream."""
    device = _device_of(state)
    if device is not None:
        raise checks.fail(f"the checkpoint carries generator state for device {device!r}; "
                          "TensorCode's generator runs on the CPU and cannot restore a "
                          "CUDA (or other device) generator state, as in a CPU-only Python "
                          "process: load without the generator, or save the checkpoint "
                          "from a CPU generator", "generator")
    probe = generator.clone()
    try:
        probe.set_state(state)
    except ArtifactError as error:
        message = str(error)
        prefix = f"field {error.field!r}: "
        raise checks.fail(message[len(prefix):] if message.startswith(prefix) else message,
                          error.field or "generator") from error


def _device_of(state: Any) -> str | None:
    """The device a generator state names when it is not the CPU: a ``device`` field
    other than ``"cpu"``, or a key holding per-device states (``cuda``, ``cuda_states``,
    ``mps``...); ``None`` for a CPU state."""
    if not isinstance(state, dict):
        return None
    device = state.get("device")
    if device is not None and device != "cpu":
        return str(device)[:40]
    for key in state:
        if isinstance(key, str) and key.lower().startswith(_DEVICE_PREFIXES):
            return key[:40]
    return None


_DEVICE_PREFIXES = ("cuda", "mps", "xpu", "hip", "tpu", "gpu")


__all__ = ["named_snapshot", "named_restore", "save", "save_file", "load", "Restored",
           "parameter_keys", "FORMAT", "VERSION", "MANIFEST"]
__all__ += ["snapshot", "restore"]
__all__ += ["named_restore_file"]
