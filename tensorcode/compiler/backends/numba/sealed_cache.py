"""The on-disk cache of the Numba backend's compiled functions, in place of Numba's own.

Numba's ``cache=True`` keeps an index and data files whose loading is ``pickle.load``
(code runs) and whose content is then mapped as machine code, in a directory its
locators pick (``NUMBA_CACHE_DIR``, ``__pycache__`` beside the source, the user-wide
cache), with no check of who wrote them. TensorCode never turns it on. ``jit`` compiles
a function with ``SealedCache`` as its dispatcher's cache instead, which keeps one file
per function and signature in the plan cache's checked ``plans/__pycache__`` and reads
and writes it through ``tagged_file``: each file carries the HMAC-SHA-256 tag of the
bytes this process wrote (keyed by the cache secret, covering the directory and the
file's name), and is unpickled only after the tag of the very bytes read was checked,
at the moment Numba asks for it (whichever entry point, however late). A file that is
not a regular file of ours, too large, or without a valid tag is reported once
(``RuntimeWarning``), counted (``untrusted_entries``) and compiled again; a file that
cannot be written is not cached (same warning). ``NUMBA_CACHE_DIR`` and
``NUMBA_CACHE_LOCATOR_CLASSES`` play no part: Numba's locators are never consulted.
Importing this module imports Numba (the backend imports it only to compile).
"""

from __future__ import annotations

import hashlib
import pathlib
import pickle
from typing import Any

import numba
from numba.core import compiler, serialize, typeinfer

from ....errors import CacheError
from .. import tagged_file
from ..counters import count
from ..plan_directory import Untrusted, warn_once

MAGIC = b"tensorcode.numba"  # 16 bytes
SUFFIX = ".tcnb"


class SealedCache:
    """The cache of one function of plan module ``stem`` (``p_<key>``, whose key covers
    the module's source) in ``directory``: a file ``<stem>.<function>.<digest>.tcnb`` per
    signature and CPU (the digest of ``identity``). It has the methods a Numba
    dispatcher calls on its cache (``numba.core.caching.Cache``'s)."""

    def __init__(self, function: Any, directory: pathlib.Path, stem: str) -> None:
        self._function = function
        self._directory = directory
        self._stem = stem
        self._enabled = True

    @property
    def cache_path(self) -> str:
        return str(self._directory)

    def enable(self) -> None:
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    def flush(self) -> None:  # nothing to drop: a file is used only for its identity
        pass

    def _locate(self, signature: Any, codegen: Any) -> tuple[pathlib.Path, str]:
        """The file of ``signature`` and what it must hold: Numba's version, the
        function's name and bytecode, the signature and the code generator's target."""
        code = hashlib.sha256(self._function.__code__.co_code).hexdigest()
        identity = repr((numba.__version__, self._function.__qualname__, code,
                         str(signature), codegen.magic_tuple()))
        digest = hashlib.sha256(identity.encode()).hexdigest()[:24]
        name = f"{self._stem}.{self._function.__name__}.{digest}{SUFFIX}"
        return self._directory / name, identity

    def _context(self, path: pathlib.Path) -> tuple[bytes, bytes]:
        return str(path.parent.resolve()).encode(), path.name.encode()

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        """The compile result of ``sig`` from its file when the file's tag is valid,
        else None (Numba then compiles, and ``save_overload`` writes the file)."""
        if not self._enabled:
            return None
        target_context.refresh()
        path, identity = self._locate(sig, target_context.codegen())
        try:
            payload = tagged_file.read(path, MAGIC, self._context(path))
        except (Untrusted, CacheError) as error:
            _refused(path, str(error))
            return None
        if payload is None:
            return None
        try:  # authentic: bytes this cache wrote with the secret, for this place
            stored, reduced = pickle.loads(payload)
            if stored != identity:
                _refused(path, "it holds another function's code")
                return None
            return compiler.CompileResult._rebuild(target_context, *reduced)
        except Exception as error:  # an entry written by another Numba, say
            _refused(path, f"Numba could not load it ({type(error).__name__})")
            return None

    def save_overload(self, sig: Any, data: Any) -> None:
        """Write the file of ``sig``, tagged (when Numba can cache this code at all)."""
        if not self._enabled or data.library.has_dynamic_globals or \
                any(not lifted.can_cache for lifted in data.lifted):
            return
        path, identity = self._locate(sig, data.codegen)
        payload = serialize.dumps((identity, data._reduce()))
        try:
            tagged_file.write(path, MAGIC, self._context(path), payload)
        except (OSError, Untrusted, CacheError) as error:
            warn_once(str(path), f"tensorcode: plan cache file {path} could not be "
                                 f"written ({error}); the code runs, uncached")


def _refused(path: pathlib.Path, reason: str) -> None:
    count("untrusted_entries")
    count("corrupt_entries")
    warn_once(str(path), f"tensorcode: plan cache file {path} was not used ({reason}); "
                         "recompiling it")


def jit(function: Any, signature: tuple | None, options: Any,
        directory: pathlib.Path | None, stem: str) -> Any:
    """``numba.njit(signature, **options)(function)`` whose cache is a ``SealedCache`` in
    ``directory`` (in memory when None); compiled now for ``signature`` (and for no
    other types), or on first call when it is None."""
    dispatcher = numba.njit(**options)(function)
    if directory is not None:
        dispatcher._cache = SealedCache(function, directory, stem)
    if signature is not None:
        with typeinfer.register_dispatcher(dispatcher):
            dispatcher.compile(signature)
        dispatcher.disable_compile()
    return dispatcher


__all__ = ["MAGIC", "SUFFIX", "SealedCache", "jit"]
