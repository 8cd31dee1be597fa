"""Opening an exported library with ctypes: no compiler, no llvmlite, no numba.

``load(dir, sha256=None)`` trusts an export the way the plan cache trusts its entries
(``files.ownership``: the directory and every file owned by the current user and
writable by nobody else), reads and checks ``manifest.json`` (``manifest.read``: its
fields and its own ``export_sha256``), compares ``sha256`` when given (pinning the
export a service was deployed with), hashes every file the manifest lists and refuses
any difference with ``ArtifactError``, then opens the library from the descriptor it
hashed (``/proc/self/fd``, where there is one: the bytes checked are the bytes loaded)
and checks that the library reports the manifest's content hash and interface.

The result, a ``Loaded``, has the signature of what was exported: a plan's
``loaded(*inputs) -> tuple of outputs`` (as a bound plan: inputs in ``plan.inputs()``
order) and ``loaded.batch(*inputs)`` over a leading case axis; a router's
``loaded(inputs) -> {outputs..., "covered": bool}`` (as the program a ``Router``
serves: ``Router(loaded, fallback, loaded.output_names)`` escalates exactly what the
in-process router escalates) and ``loaded.batch(inputs)``. Each thread opens its own
handle (the library's working memory) on its first call.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pathlib
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ArtifactError, FeedError, TensorCodeError
from ..files.ownership import Untrusted, check_owned
from . import manifest as manifests
from .abi import DTYPE_CODES, STATUS

_DTYPES = {code: name for name, code in DTYPE_CODES.items()}
_POINTERS = ctypes.POINTER(ctypes.c_void_p)
_FLAGS = ctypes.POINTER(ctypes.c_int32)
#: the descriptors libraries were opened through (see ``load``)
_OPENED: list[int] = []


def _check_owned(path: pathlib.Path, directory: bool) -> None:
    try:
        check_owned(path, directory)
    except Untrusted as error:
        raise ArtifactError(f"refusing to load code from here: {error}", path) from None
    except OSError as error:
        raise ArtifactError(f"cannot read it: {error.strerror or error}", path) from None


def _open_verified(path: pathlib.Path, digest: str) -> tuple[int, bool]:
    """A descriptor of ``path`` whose content hashes to ``digest`` (``ArtifactError``
    otherwise), and whether the library can be opened through it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        hasher = hashlib.sha256()
        while block := os.read(fd, 1 << 20):
            hasher.update(block)
        if hasher.hexdigest() != digest:
            raise ArtifactError("its SHA-256 differs from the manifest's: the file was "
                                "changed after export; export the library again", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, os.path.exists(f"/proc/self/fd/{fd}")


class _Handle:
    """One thread's handle, closed when the thread's storage lets it go."""

    def __init__(self, library: Loaded) -> None:
        self.close = library._close
        handle = ctypes.c_void_p()
        status = library._open(ctypes.byref(handle))
        if status:
            raise TensorCodeError(f"opening a handle of lib{library.name}.so failed: "
                                  f"{library._text(None, status)}")
        self.value = handle

    def __del__(self) -> None:
        self.close(self.value)


class Loaded:
    """An exported plan or router, opened (see the module docstring)."""

    def __init__(self, directory: pathlib.Path, document: dict, library: ctypes.CDLL) -> None:
        self.directory = directory
        self.manifest = document
        self.name: str = document["name"]
        self.kind: str = document["kind"]
        self.export_sha256: str = document["export_sha256"]
        self.content_hash: str = document["content_hash"]
        self._library = library
        n = self.name

        def function(suffix: str, result: Any, *arguments: Any) -> Any:
            found = getattr(library, f"{n}_{suffix}")
            found.restype, found.argtypes = result, list(arguments)
            return found

        self._open = function("open", ctypes.c_int, ctypes.c_void_p)
        self._close = function("close", None, ctypes.c_void_p)
        self._run = function("run", ctypes.c_int, ctypes.c_void_p, _POINTERS, _POINTERS,
                             _FLAGS)
        self._batch = function("batch", ctypes.c_int, ctypes.c_void_p, ctypes.c_int64,
                               _POINTERS, _POINTERS, _FLAGS)
        self._message = function("message", ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int)
        self._failed = function("failed_case", ctypes.c_int64, ctypes.c_void_p)
        reported = function("content_hash", ctypes.c_char_p)().decode("ascii")
        if reported != self.content_hash:
            raise ArtifactError("the library reports another content hash than its "
                                "manifest's", directory / f"lib{n}.so")
        self.inputs = self._ports("input", function)
        self.outputs = self._ports("output", function)
        for key, ports in (("inputs", self.inputs), ("outputs", self.outputs)):
            if [{"name": a, "dtype": b.name, "shape": list(c)} for a, b, c in ports] != \
                    document[key]:
                raise ArtifactError(f"the library's {key} differ from the manifest's",
                                    directory / manifests.MANIFEST, key)
        self.input_names = [name for name, _, _ in self.inputs]
        self.output_names = [name for name, _, _ in self.outputs]
        self._local = threading.local()

    @staticmethod
    def _ports(kind: str, function: Any) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
        count = function(f"{kind}_count", ctypes.c_int64)()
        if not 0 <= count <= manifests.MAX_PORTS:
            raise ArtifactError(f"the library reports {count} {kind}s")
        name = function(f"{kind}_name", ctypes.c_char_p, ctypes.c_int64)
        dtype = function(f"{kind}_dtype", ctypes.c_int32, ctypes.c_int64)
        rank = function(f"{kind}_rank", ctypes.c_int64, ctypes.c_int64)
        shape = function(f"{kind}_shape", ctypes.POINTER(ctypes.c_int64), ctypes.c_int64)
        ports = []
        for k in range(count):
            r = rank(k)
            if not 0 <= r <= manifests.MAX_RANK or dtype(k) not in _DTYPES:
                raise ArtifactError(f"the library reports an invalid {kind} {k}")
            dims = shape(k)
            ports.append((name(k).decode("utf-8"), np.dtype(_DTYPES[dtype(k)]),
                          tuple(int(dims[i]) for i in range(r))))
        return ports

    def __repr__(self) -> str:
        return (f"Loaded({self.kind} lib{self.name}.so, inputs={self.input_names}, "
                f"outputs={self.output_names})")

    # -- calls --------------------------------------------------------------------------
    def _handle(self) -> ctypes.c_void_p:
        handle = getattr(self._local, "handle", None)
        if handle is None:
            handle = self._local.handle = _Handle(self)
        return handle.value

    def _text(self, handle: Any, status: int) -> str:
        return (self._message(handle, status) or b"").decode("utf-8", "replace")

    def _feeds(self, values: list[Any], n: int | None) -> tuple[list[np.ndarray], int]:
        """``values`` as C-contiguous arrays of the inputs' dtypes and shapes (with a
        leading case axis for a batch: ``n`` None reads it from the first input)."""
        if len(values) != len(self.inputs):
            raise FeedError(f"lib{self.name}.so takes {len(self.inputs)} inputs "
                            f"({', '.join(self.input_names)}), got {len(values)}")
        arrays = []
        for value, (name, dtype, _) in zip(values, self.inputs):
            if isinstance(value, np.ndarray) and value.dtype != dtype and \
                    not (self.kind == "router" and value.dtype.kind in "biuf"):
                raise FeedError(f"input {name!r}: expected {dtype.name}, got {value.dtype.name}")
            try:
                array = np.ascontiguousarray(value, dtype=dtype)
            except (TypeError, ValueError, OverflowError) as error:
                raise FeedError(f"input {name!r}: cannot read it as {dtype.name} "
                                f"({error})") from None
            arrays.append(array)
        if n is None:
            for array, (name, _, shape) in zip(arrays, self.inputs):
                if array.shape != shape:
                    raise FeedError(f"input {name!r}: expected shape {list(shape)}, got "
                                    f"{list(array.shape)}")
            return arrays, 1
        count = arrays[0].shape[0] if arrays and arrays[0].ndim else 0
        for array, (name, _, shape) in zip(arrays, self.inputs):
            if array.ndim != len(shape) + 1 or array.shape[1:] != shape or \
                    array.shape[0] != count:
                raise FeedError(f"input {name!r}: a batch needs shape [N, "
                                f"{', '.join(map(str, shape))}] with the same N for every "
                                f"input, got {list(array.shape)}")
        return arrays, count

    def _call(self, arrays: list[np.ndarray], n: int | None
              ) -> tuple[list[np.ndarray], np.ndarray]:
        count = 1 if n is None else n
        lead = () if n is None else (count,)
        outputs = [np.empty(lead + shape, dtype) for _, dtype, shape in self.outputs]
        covered = np.empty(count, np.int32)
        handle = self._handle()
        inputs = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
        results = (ctypes.c_void_p * len(outputs))(*[o.ctypes.data for o in outputs])
        flags = covered.ctypes.data_as(_FLAGS)
        if n is None:
            status = self._run(handle, inputs, results, flags)
        else:
            status = self._batch(handle, count, inputs, results, flags)
        if status == STATUS["ERROR_INPUT"]:
            where = f" (case {self._failed(handle)})" if n is not None else ""
            raise FeedError(f"lib{self.name}.so refused an input{where}: "
                            f"{self._text(handle, status)}")
        if status:
            raise TensorCodeError(f"lib{self.name}.so: {self._text(handle, status)}")
        return outputs, covered

    def _named(self, inputs: Any) -> list[Any]:
        if not isinstance(inputs, Mapping) or set(inputs) != set(self.input_names):
            raise FeedError(f"inputs must be a mapping of exactly {self.input_names}")
        return [inputs[name] for name in self.input_names]

    def __call__(self, *args: Any) -> Any:
        """A plan: ``(*inputs) -> tuple of outputs``; a router: ``(inputs) -> dict``."""
        if self.kind == "router":
            if len(args) != 1:
                raise FeedError("a router takes one mapping of its inputs")
            arrays, _ = self._feeds(self._named(args[0]), None)
            outputs, covered = self._call(arrays, None)
            answer: dict[str, Any] = {name: (value[()] if value.ndim == 0 else value)
                                      for name, value in zip(self.output_names, outputs)}
            answer["covered"] = bool(covered[0])
            return answer
        arrays, _ = self._feeds(list(args), None)
        return tuple(self._call(arrays, None)[0])

    def batch(self, *args: Any) -> Any:
        """``__call__`` over a leading axis of N cases (a router's ``covered`` is a bool
        array)."""
        if self.kind == "router":
            if len(args) != 1:
                raise FeedError("a router takes one mapping of its inputs")
            arrays, n = self._feeds(self._named(args[0]), 0)
            outputs, covered = self._call(arrays, n)
            answer: dict[str, Any] = dict(zip(self.output_names, outputs))
            answer["covered"] = covered != 0
            return answer
        arrays, n = self._feeds(list(args), 0)
        return tuple(self._call(arrays, n)[0])


def load(directory: str | os.PathLike, sha256: str | None = None) -> Loaded:
    """The export in ``directory``, verified and opened (see the module docstring)."""
    directory = pathlib.Path(directory)
    _check_owned(directory, directory=True)
    _check_owned(directory / manifests.MANIFEST, directory=False)
    document = manifests.read(directory)
    if sha256 is not None and sha256 != document["export_sha256"]:
        raise ArtifactError(f"this export's SHA-256 is {document['export_sha256']}, not the "
                            f"pinned {sha256}: it is not the library this service was "
                            "deployed with", directory / manifests.MANIFEST, "export_sha256")
    name = document["name"]
    library_path = directory / f"lib{name}.so"
    kept = None
    try:
        for file, digest in sorted(document["files"].items()):
            _check_owned(directory / file, directory=False)
            fd, through_fd = _open_verified(directory / file, digest)
            if directory / file == library_path and through_fd:
                kept = fd
            else:
                os.close(fd)
    except BaseException:
        if kept is not None:
            os.close(kept)
        raise
    opened = str(library_path.resolve()) if kept is None else f"/proc/self/fd/{kept}"
    try:
        library = ctypes.CDLL(opened, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as error:
        if kept is not None:
            os.close(kept)
        raise ArtifactError(f"cannot open the library: {error} (is it for this CPU and "
                            "system? see the manifest's target and blas)",
                            library_path) from None
    if kept is not None:
        # the library stays loaded for the process's life (ctypes never unloads one), and
        # so does its descriptor: the name it was opened by is never reused, so a later
        # load (another export, or this one exported again) is never mistaken for it
        _OPENED.append(kept)
    return Loaded(directory, document, library)


__all__ = ["Loaded", "load"]
