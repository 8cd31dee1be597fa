"""The handle a plan calls: an LLVM plan's entry points through ``ctypes``.

Every entry point has the one C signature ``i32 (ptr arrays, ptr extents, double lr)``
(``codegen.ENTRY_TYPE``): ``arrays`` the data pointers in ``Layout.arguments`` order.
``LlvmProgram`` checks what it is handed as Numba's dispatcher and the generated checks
would (``TypeError`` for a wrong type, dtype or layout, ``ValueError`` naming input
``#k`` for a wrong shape), allocates fresh output arenas per call (results never alias)
and keeps one scratch arena per thread (scratch never leaves a call). A nonzero status
is the message ``Layout.errors`` holds for it, raised as ``IndexError`` (the plan turns
it into its documented ``FeedError``). Nothing keeps a caller's array past the call; a
bound call keeps the arrays it was bound to, as the bound plan does.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .codegen import Layout

_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double)


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


class LlvmProgram:
    """A ``backends.Program`` over a loaded LLVM plan object."""

    def __init__(self, key: str, layout: Layout, addresses: dict[str, int],
                 input_shapes: Sequence[tuple[int, ...]], head_sizes: Sequence[int],
                 picks: Sequence[tuple[int, int]], source: Callable[[], str]) -> None:
        self.key = key
        self.layout = layout
        self._source = source
        self._run = _ENTRY(addresses["tc_run"])  # a ctypes call releases the GIL
        self._batch_fn = _ENTRY(addresses["tc_batch"])
        roles = [a.role for a in layout.arguments]
        self._head = [(np.dtype(a.dtype), size) for a, size in
                      zip([a for a in layout.arguments if a.role in ("parameter", "constant")],
                          head_sizes)]
        self._inputs = [(np.dtype(a.dtype), tuple(shape)) for a, shape in
                        zip([a for a in layout.arguments if a.role == "input"], input_shapes)]
        self._scratch = [(n, np.dtype(d)) for d, n in layout.scratch.items()]
        self._outputs = [(n, np.dtype(d)) for d, n in layout.outputs.items()]
        self._count = len(roles)
        self._array_type = ctypes.c_void_p * max(self._count, 1)
        self._local = threading.local()
        self.output_dtypes = list(layout.outputs)
        self.module = None
        self._picks = list(picks)  # (output arena, offset) of each root, for ``scalars``

    @property
    def source(self) -> str:
        """The plan's LLVM IR (rendered again on request)."""
        return self._source()

    # -- checks ------------------------------------------------------------------------
    def _head_pointers(self, head: Sequence[Any]) -> list[int]:
        if len(head) != len(self._head):
            raise TypeError(f"the plan takes {len(self._head)} parameter and constant "
                            f"buffers, got {len(head)}")
        pointers = []
        for k, (value, (dtype, size)) in enumerate(zip(head, self._head)):
            if type(value) is not np.ndarray or value.dtype != dtype or \
                    not value.flags.c_contiguous or value.size < size:
                raise TypeError(f"no matching definition for argument {k}: expected a "
                                f"C-contiguous {dtype.name} array of at least {size} "
                                "elements")
            pointers.append(_address(value))
        return pointers

    def _input_pointers(self, inputs: Sequence[Any], batch: bool = False
                        ) -> tuple[list[int], list[int], int]:
        """Pointers of ``inputs``, and for a batch each input's stride between cases
        and the number of cases."""
        if len(inputs) != len(self._inputs):
            raise TypeError(f"the plan takes {len(self._inputs)} inputs, got {len(inputs)}")
        pointers, strides, n = [], [], 1
        if batch:
            for value in inputs:
                if isinstance(value, np.ndarray) and value.ndim and value.shape[0] != 1:
                    n = value.shape[0]
        for k, (value, (dtype, shape)) in enumerate(zip(inputs, self._inputs)):
            if type(value) is not np.ndarray or value.dtype != dtype or \
                    not value.flags.c_contiguous:
                raise TypeError(f"no matching definition for input #{k}: expected a "
                                f"C-contiguous {dtype.name} array")
            if batch:
                if value.shape[1:] != shape or (value.shape[0] != n and value.shape[0] != 1):
                    raise ValueError(f"input #{k}: expected shape {list(shape)} after the "
                                     "case axis")
                strides.append(0 if value.shape[0] == 1 else int(np.prod(shape, dtype=np.int64)))
            elif value.shape != shape:
                raise ValueError(f"input #{k}: expected shape {list(shape)}")
            pointers.append(_address(value))
        return pointers, strides, n

    def _scratch_pointers(self) -> list[int]:
        local = self._local
        pointers = getattr(local, "scratch", None)
        if pointers is None:
            local.arrays = [np.empty(max(n, 1), d) for n, d in self._scratch]
            pointers = local.scratch = [_address(a) for a in local.arrays]
        return pointers

    def _call(self, entry: Any, pointers: list[int], extents: Any = None) -> None:
        status = entry(self._array_type(*pointers), extents, 0.0)
        if status:
            raise IndexError(self.layout.errors[status - 1])

    # -- entry points ------------------------------------------------------------------
    def run(self, *args: np.ndarray) -> tuple[np.ndarray, ...]:
        """The plan's ``run``: the output arenas, one per dtype."""
        split = len(self._head)
        head = self._head_pointers(args[:split])
        inputs, _, _ = self._input_pointers(args[split:])
        outputs = tuple(np.empty(n, d) for n, d in self._outputs)
        self._call(self._run, head + inputs + self._scratch_pointers()
                   + [_address(o) for o in outputs])
        return outputs

    def bind(self, *head: np.ndarray) -> Callable[..., tuple[np.ndarray, ...]]:
        """``run`` with the parameter and constant buffers fixed (checked once)."""
        pointers = self._head_pointers(head)
        kept = tuple(head)  # the bound plan's own buffers, alive as long as it is

        def call(*inputs: np.ndarray) -> tuple[np.ndarray, ...]:
            assert kept is not None
            addresses, _, _ = self._input_pointers(inputs)
            outputs = tuple(np.empty(n, d) for n, d in self._outputs)
            self._call(self._run, pointers + addresses + self._scratch_pointers()
                       + [_address(o) for o in outputs])
            return outputs
        return call

    def scalars(self) -> Callable[..., tuple]:
        """``run`` returning every root as a Python number (all-scalar plans)."""
        def numbers(*args: np.ndarray) -> tuple:
            outs = self.run(*args)
            return tuple(outs[k][offset].item() for k, offset in self._picks)
        return numbers

    def batch(self) -> Callable[..., tuple[np.ndarray, ...]]:
        """``run`` over N cases: inputs with a leading case axis (or 1, shared)."""
        def run_batch(*args: np.ndarray) -> tuple[np.ndarray, ...]:
            split = len(self._head)
            head = self._head_pointers(args[:split])
            inputs, strides, n = self._input_pointers(args[split:], batch=True)
            outputs = tuple(np.empty((n, size), d) for size, d in self._outputs)
            extents = (ctypes.c_int64 * (1 + len(strides)))(n, *strides)
            self._call(self._batch_fn, head + inputs + self._scratch_pointers()
                       + [_address(o) for o in outputs], extents)
            return outputs
        return run_batch

    def entry(self, name: str) -> Any:
        raise NotImplementedError(f"the llvm backend has no {name} entry point")


__all__ = ["LlvmProgram"]
