"""``Tool``: the base class of every owned tool, and its pretrained-directory format.

A tool is a model that owns its parameters. It is built from a JSON-safe ``config``
(dimensions, labels, seed, ...), owns ``operations`` (stable names to the
``tensorcode.operations`` operations holding its trainable parameters), declares the
``objective`` its supervised output is trained on, and applies a training-mode policy
through ``train()`` / ``eval()``. ``Trainer.from_tool(tool)`` trains it; predictions go
through the operations' compiled plans, so a prediction costs about one plan call.

A subclass provides:

- ``defaults`` (the config keys and their default values) and ``check_config(config)``
  (validate and normalize, raising ``ConfigError`` naming the key);
- ``build_operations()`` (the operations, built from ``self.config``);
- ``supervised_output(inputs)`` (the tensor the objective supervises, computed by calling
  the operations, so a trace records it; item slots padded to a power of two) and
  ``check_target(inputs, target)`` (a target in the form the objective's loss takes, or
  ``TrainingError`` saying what was wrong);
- ``item_counts(inputs)`` (how many items each input supplied), so ``output(inputs)``
  answers for exactly those: the supervised output with the padding trimmed;
- its own prediction methods (``decide``, ``match``, ``plan``, ...), and ``prediction``
  naming the one ``tool(inputs)`` runs (as ``model(x)`` runs a ``torch.nn.Module``'s
  forward). Calling a tool predicts; only a ``Trainer`` (``capture``, ``step``, ``fit``)
  trains;
- optionally ``losses`` (in-process loss callables its objective names),
  ``buffers()`` / ``load_buffers()`` (state saved with the model but not trained by the
  trainer, such as a calibration) and ``set_training(mode)`` (a policy other than "every
  operation follows the tool").

``save_pretrained(directory)`` writes the model only: ``tool.json`` (format, version,
the class name, the config, each operation's fingerprint and parameter signature, the
buffer names, and the tensor file's SHA-256) and ``weights.safetensors``, built beside
the target and renamed into place. ``Cls.from_pretrained(directory)`` validates every
field, requires the class named in the file to be ``Cls`` itself, rebuilds the tool from
the validated config with ``Cls`` (nothing the file names is imported or constructed),
checks fingerprints, tensor names, shapes, dtypes and the checksum, and only then loads
the values. Any failure is an ``ArtifactError`` naming the file and the field.
Experiences and training checkpoints are separate files with their own formats.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import numpy as np

from ..errors import ArtifactError, TensorCodeError
from ..files import Fields, TensorFile, at, check_header, read_json, replace_directory, save_tensors
from ..operations.base import Operation, canonical_json

FORMAT = "tensorcode.tool"
VERSION = 1
CONFIG_FILE = "tool.json"
WEIGHTS_FILE = "weights.safetensors"
#: a pretrained tool's JSON is small: refuse anything larger before reading it
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: the most bytes ``from_pretrained`` reads as tensors, or builds as the parameters a
#: config's sizes describe, unless the caller passes a larger ``max_bytes``
MAX_PRETRAINED_BYTES = 1 << 30
#: the bytes of one parameter value (every tool's parameters are float32)
PARAMETER_BYTES = 4

T = TypeVar("T", bound="Tool")


class ConfigError(TensorCodeError, ValueError):
    """A tool configuration value is missing, unknown or out of range; ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config {key!r}: {message}")
        self.key = key


class Tool:
    """Base class of owned tools (see the module docstring for the contract)."""

    #: the loss name the supervised output is trained on
    objective: ClassVar[str] = "cross_entropy"
    #: config keys and their defaults; every key of a config is one of these
    defaults: ClassVar[dict[str, Any]] = {}
    #: in-process loss callables the objective may name (given to the trainer)
    losses: ClassVar[dict[str, Any]] = {}
    #: config keys (dotted for nested ones) whose value is a parameter dimension (an
    #: int) or counts one (a text or list, by its length): ``from_pretrained`` bounds
    #: each by the largest dimension the tensor file holds before building anything
    size_keys: ClassVar[tuple[str, ...]] = ()
    #: the prediction method ``tool(inputs)`` runs ("decide", "match", ...)
    prediction: ClassVar[str] = ""

    def __init__(self, config: Mapping[str, Any] | None = None, *, backend: str | None = None,
                 **overrides: Any) -> None:
        #: the backend the operations' plans run on (not part of the config: it changes
        #: how predictions are computed, not what they are)
        self.backend = backend
        self.config: dict[str, Any] = self._checked_config(config, overrides)
        self.operations: dict[str, Operation] = dict(self.build_operations())
        for name, op in self.operations.items():
            if not isinstance(name, str) or not name or "/" in name or not isinstance(
                    op, Operation):
                raise TensorCodeError(f"{type(self).__name__}.build_operations must map "
                                      f"names without '/' to operations, got {name!r}")
        self.train(False)

    def _checked_config(self, config: Mapping[str, Any] | None,
                        overrides: Mapping[str, Any]) -> dict[str, Any]:
        """The defaults, updated by ``config`` and ``overrides``, through ``check_config``
        (``ConfigError`` for an unknown key or a bad value)."""
        merged = dict(config or {})
        merged.update(overrides)
        unknown = sorted(set(merged) - set(self.defaults))
        if unknown:
            raise ConfigError(unknown[0], f"unknown key; {type(self).__name__} takes "
                              f"{sorted(self.defaults)}")
        checked = self.check_config({**self.defaults, **merged})
        canonical_json(checked)  # JSON-safe, or fail now rather than at save time
        return checked

    # -- the subclass contract ------------------------------------------------------------
    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """The validated, normalized config (``ConfigError`` naming a bad key)."""
        return config

    def build_operations(self) -> Mapping[str, Operation]:
        """The operations holding the tool's parameters, by stable name."""
        raise NotImplementedError(f"{type(self).__name__} builds no operations")

    def planned_parameters(self) -> int | None:
        """How many parameter values the operations of ``self.config`` (already checked)
        hold, computed from its sizes without building anything; ``None`` when the class
        does not say (then ``from_pretrained`` bounds only each of ``size_keys``).
        ``from_pretrained`` refuses a config that asks for more values than the tensor
        file holds, or more bytes than its ``max_bytes``, before building the tool."""
        return None

    def supervised_output(self, inputs: Any) -> Any:
        """The output the objective supervises, computed by calling the operations (item
        slots padded to a power of two, so a few plans serve every item count)."""
        raise NotImplementedError(f"{type(self).__name__} has no supervised output")

    def item_counts(self, inputs: Any) -> tuple[list[int], bool]:
        """``(items supplied per input, is_batch)``: what ``output`` trims to."""
        raise NotImplementedError(f"{type(self).__name__} does not count its items")

    def output(self, inputs: Any) -> np.ndarray:
        """The supervised output for exactly the items supplied: ``[n]`` for one input,
        ``[rows, most items]`` for a batch (a row with fewer items keeps the padding
        value beyond its count: ``-1e9`` for logits, 0 for outcomes). It predicts; it
        never trains."""
        padded = np.asarray(self.supervised_output(inputs))
        counts, _ = self.item_counts(inputs)
        return padded[..., :max(counts)]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The tool's prediction (the method ``prediction`` names), as ``model(x)`` runs
        a ``torch.nn.Module``'s forward. It never trains: a ``Trainer`` does."""
        if not self.prediction:
            raise TypeError(f"{type(self).__name__} names no prediction method")
        return getattr(self, self.prediction)(*args, **kwargs)

    def check_target(self, inputs: Any, target: Any) -> Any:
        """``target`` in the form the objective's loss takes; ``TrainingError`` if
        malformed. The target never reaches ``output``: feedback is not evidence."""
        return target

    def buffers(self) -> dict[str, np.ndarray]:
        """State saved by ``save_pretrained`` that the trainer does not train."""
        return {}

    def load_buffers(self, buffers: Mapping[str, np.ndarray]) -> None:
        """Take the buffers ``buffers()`` names (already checked for shape and dtype)."""
        if buffers:
            raise TensorCodeError(f"{type(self).__name__} holds no buffers")

    # -- modes ----------------------------------------------------------------------------
    def set_training(self, training: bool) -> None:
        """The training-mode policy: by default every operation follows the tool."""
        for op in self.operations.values():
            op.train(training)

    def train(self: T, mode: bool = True) -> T:
        """Apply the training-mode policy (returns self)."""
        self.set_training(bool(mode))
        return self

    def eval(self: T) -> T:
        """``train(False)``; returns self."""
        return self.train(False)

    @property
    def training(self) -> bool:
        """Whether any of the tool's operations is in training mode."""
        return any(op.training for op in self.operations.values())

    # -- identity -------------------------------------------------------------------------
    def fingerprints(self) -> dict[str, str]:
        """Each operation's fingerprint (what it means, not its values), by name."""
        return {name: op.fingerprint() for name, op in self.operations.items()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({canonical_json(self.config)})"

    # -- pretrained directories -----------------------------------------------------------
    def save_pretrained(self, directory: str | os.PathLike) -> pathlib.Path:
        """Write the model (config, weights, buffers) to ``directory`` atomically."""
        tensors: dict[str, np.ndarray] = {}
        operations = {}
        for name, op in self.operations.items():
            for path, payload in op.named_parameters():
                tensors[f"operations/{name}/{path}"] = np.ascontiguousarray(payload)
            operations[name] = {"qualified_name": op.qualified_name,
                                "fingerprint": op.fingerprint(),
                                "parameters": op.parameter_signature()}
        buffers = self.buffers()
        for name, value in buffers.items():
            tensors[f"buffers/{name}"] = np.ascontiguousarray(value)
        document: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "class": type(self).__name__,
            "config": self.config, "operations": operations,
            "buffers": {name: [list(np.shape(v)), np.asarray(v).dtype.name]
                        for name, v in buffers.items()},
            "tensors": {"file": WEIGHTS_FILE, "sha256": None}}

        def fill(temp: pathlib.Path) -> None:
            digest = save_tensors(temp / WEIGHTS_FILE, tensors, metadata={"format": FORMAT})
            document["tensors"]["sha256"] = digest
            text = json.dumps(document, indent=1, sort_keys=True, allow_nan=False) + "\n"
            (temp / CONFIG_FILE).write_text(text, encoding="utf-8")

        # tool.json is listed last: it is the commit record where files are replaced
        return replace_directory(directory, fill, owned=(WEIGHTS_FILE, CONFIG_FILE))

    @classmethod
    def from_pretrained(cls: type[T], directory: str | os.PathLike,
                        backend: str | None = None, *,
                        max_bytes: int = MAX_PRETRAINED_BYTES) -> T:
        """A ``cls`` restored from ``save_pretrained``'s directory, every field checked
        first (``ArtifactError`` naming the file and field); nothing is half-loaded.

        What loading allocates is bounded before anything is read or built: the tensor
        file's data and the parameters the config's sizes describe (their products, such
        as ``buckets * dim``, from ``planned_parameters``) may each take at most
        ``max_bytes`` (``MAX_PRETRAINED_BYTES`` unless raised), and the config may not
        describe more parameter values than the tensor file holds."""
        directory = pathlib.Path(directory)
        path = directory / CONFIG_FILE
        if not path.is_file():
            raise ArtifactError(f"no {CONFIG_FILE}: not a pretrained tool directory "
                                "(write one with tool.save_pretrained(directory))", path=path)
        r = Fields(path)
        document = r.object(read_json(path, MAX_CONFIG_BYTES, what="tool file"), "(document)")
        r.keys(document, "(document)", ("format", "version", "class", "config", "operations",
                                        "buffers", "tensors"))
        check_header(document, FORMAT, VERSION, path)
        named = r.string(document["class"], "class")
        if named != cls.__name__:
            raise r.fail("class", f"the directory holds a {named!r}, not a {cls.__name__!r}; "
                         f"load it with that tool's from_pretrained")
        config = r.object(document["config"], "config")
        weights_path = directory / WEIGHTS_FILE
        if not weights_path.is_file():
            raise ArtifactError("no such file; a pretrained directory needs its weights",
                                path=weights_path)
        tensor_file = TensorFile(weights_path)
        _check_sizes(cls, config, tensor_file, r)
        _check_planned(cls, config, tensor_file, r, backend, max_bytes)
        tensors_doc = r.object(document["tensors"], "tensors")
        r.keys(tensors_doc, "tensors", ("file", "sha256"))
        if tensors_doc["file"] != WEIGHTS_FILE:
            raise r.fail("tensors.file", f"must be {WEIGHTS_FILE!r}")
        digest = r.sha256(tensors_doc["sha256"], "tensors.sha256")
        values, actual = tensor_file.read()  # (bounded: the header matches the file's size)
        if actual != digest:
            raise ArtifactError("the SHA-256 of the tensor file does not match tool.json "
                                "(changed or damaged)", path=weights_path, field="sha256")
        try:
            tool = cls(config, backend=backend)
        except ConfigError as error:
            raise r.fail(at("config", error.key), str(error)) from None
        except (TensorCodeError, TypeError, ValueError) as error:
            raise r.fail("config", str(error)) from None
        operations = r.object(document["operations"], "operations")
        if set(operations) != set(tool.operations):
            raise r.fail("operations", f"names {sorted(operations)}, but a {cls.__name__} "
                         f"with this config owns {sorted(tool.operations)}")
        expected: dict[str, tuple[tuple[int, ...], str]] = {}
        for name, op in tool.operations.items():
            entry = r.object(operations[name], at("operations", name))
            field = at("operations", name)
            r.keys(entry, field, ("qualified_name", "fingerprint", "parameters"))
            if entry["qualified_name"] != op.qualified_name:
                raise r.fail(at(field, "qualified_name"), f"is {entry['qualified_name']!r}, "
                             f"expected {op.qualified_name!r}")
            if r.sha256(entry["fingerprint"], at(field, "fingerprint")) != op.fingerprint():
                raise r.fail(at(field, "fingerprint"), "does not match the operation this "
                             "config builds (different configuration or parameter shapes)")
            if entry["parameters"] != op.parameter_signature():
                raise r.fail(at(field, "parameters"), "do not match the operation's "
                             f"parameters {op.parameter_signature()}")
            for pname, shape, dtype in op.parameter_signature():
                expected[f"operations/{name}/{pname}"] = (tuple(shape), dtype)
        buffers_doc = r.object(document["buffers"], "buffers")
        own_buffers = tool.buffers()
        if set(buffers_doc) != set(own_buffers):
            raise r.fail("buffers", f"names {sorted(buffers_doc)}, expected "
                         f"{sorted(own_buffers)}")
        for name, value in own_buffers.items():
            spec = [list(np.shape(value)), np.asarray(value).dtype.name]
            if buffers_doc[name] != spec:
                raise r.fail(at("buffers", name), f"is {buffers_doc[name]!r}, expected {spec}")
            expected[f"buffers/{name}"] = (tuple(np.shape(value)), np.asarray(value).dtype.name)
        found = tensor_file.entries
        for key in sorted(set(found) | set(expected)):
            if key not in found:
                raise ArtifactError("is missing", path=weights_path, field=key)
            if key not in expected:
                raise ArtifactError("is not a tensor of this tool", path=weights_path,
                                    field=key)
            shape, dtype = expected[key]
            if tuple(found[key][1]) != shape or found[key][0] != dtype:
                raise ArtifactError(f"is {found[key][0]}{list(found[key][1])}, expected "
                                    f"{dtype}{list(shape)}", path=weights_path, field=key)
        try:
            tool.load_buffers({name: values[f"buffers/{name}"] for name in own_buffers})
        except (TensorCodeError, TypeError, ValueError) as error:
            raise ArtifactError(str(error), path=weights_path, field="buffers") from None
        for name, op in tool.operations.items():
            op.load_payloads([values[f"operations/{name}/{p}"]
                              for p, _, _ in op.parameter_signature()])
        return tool


def _check_sizes(cls: type[Tool], config: dict, tensor_file: TensorFile, r: Fields) -> None:
    """Refuse a config whose size keys ask for a dimension larger than any the tensor
    file holds, before the tool (and its parameters) is built."""
    largest = max((d for _, shape in tensor_file.entries.values() for d in shape), default=0)
    for key in cls.size_keys:
        value: Any = config
        for step in key.split("."):
            value = value.get(step) if isinstance(value, dict) else None
        size = len(value) if isinstance(value, (str, list)) else value
        if isinstance(size, int) and not isinstance(size, bool) and size > largest:
            raise r.fail(at("config", *key.split(".")), f"is {size}, larger than any dimension "
                         f"the tensor file holds (at most {largest})")


def _check_planned(cls: type[Tool], config: dict, tensor_file: TensorFile, r: Fields,
                   backend: str | None, max_bytes: int) -> None:
    """Refuse, before anything is read or built, a tensor file or a config that would
    make loading allocate more than ``max_bytes``, or a config whose sizes describe more
    parameter values than the tensor file holds (the load would fail on the first
    mismatched tensor anyway, after allocating them all)."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise TypeError(f"max_bytes must be a positive int, got {max_bytes!r}")
    probe = cls.__new__(cls)  # the config checked as the constructor checks it, unbuilt
    probe.backend = backend
    try:
        probe.config = probe._checked_config(config, {})
    except ConfigError as error:
        raise r.fail(at("config", error.key), str(error)) from None
    except (TensorCodeError, TypeError, ValueError) as error:
        raise r.fail("config", str(error)) from None
    planned = probe.planned_parameters()
    if planned is not None:
        held = sum(math.prod(shape) for _, shape in tensor_file.entries.values())
        if planned > held:
            raise r.fail("config", f"its sizes describe {planned} parameter values, but the "
                                   f"tensor file holds {held}")
        if planned * PARAMETER_BYTES > max_bytes:
            raise r.fail("config", f"its sizes describe {planned * PARAMETER_BYTES} bytes of "
                                   f"parameters, more than max_bytes={max_bytes}; pass a "
                                   "larger max_bytes to from_pretrained to load it")
    if tensor_file.data_size > max_bytes:
        raise ArtifactError(f"holds {tensor_file.data_size} bytes of tensors, more than "
                            f"max_bytes={max_bytes}; pass a larger max_bytes to "
                            "from_pretrained to load it", path=tensor_file.path, field="data")


__all__ = ["Tool", "ConfigError", "FORMAT", "VERSION", "CONFIG_FILE", "WEIGHTS_FILE",
           "MAX_PRETRAINED_BYTES"]
