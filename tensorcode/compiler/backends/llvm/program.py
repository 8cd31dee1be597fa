"""The handle a plan calls: an LLVM plan's entry points through ``ctypes``.

Every entry point has the one C signature ``i32 (ptr arrays, ptr extents, double lr)``
(``codegen.ENTRY_TYPE``): ``arrays`` the data pointers in ``Layout.arguments`` order.
``LlvmProgram`` checks what it is handed (the inputs against the ``Program``'s, the fixed
buffers against their sizes), allocates fresh output arenas per call (results never
alias) and keeps one scratch arena per thread (scratch never leaves a call). A call it
refuses raises ``Refused`` with the ``Status`` and the argument's index; the object's
nonzero status is ``Status.RANGE``, with the message ``Layout.errors`` holds for it as
the detail (the plan turns either into its documented ``FeedError``). Nothing keeps a
caller's array past the call; a bound call keeps the arrays it was bound to, as the
bound plan does.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...lower.program import Refused, Status
from ..calls import PlainCalls
from .interface import ARRAY_DATA_OFFSET, PROFILE_ENTRY, Layout

_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double)
_ZERO = ctypes.c_double(0.0)  # the learning rate a forward entry point ignores


def _unconverted(address: int) -> Any:
    """An entry point called with arguments ctypes passes as they are (no per-argument
    conversion through a prototype: a third of a small call's ``ctypes`` cost): only for
    calls that hand it exactly a pointer array, ``None`` and a ``c_double``."""
    entry = ctypes.CFUNCTYPE(ctypes.c_int32)(address)
    entry.argtypes = None  # type: ignore[assignment]  # (ctypes accepts None: no prototype)
    return entry


def _interface_address(array: np.ndarray) -> int:
    """An array's data pointer through the array interface (portable, but it builds a
    dict per call: microseconds, more than a small plan's whole run)."""
    return int(array.__array_interface__["data"][0])


def _field_address() -> Callable[[np.ndarray], int] | None:
    """An array's data pointer read from its object: NumPy's ``PyArrayObject`` starts
    with ``PyObject_HEAD`` and then the ``data`` field (what ``PyArray_DATA`` reads), and
    CPython's ``id`` is the object's address. Used only where that layout is proven on
    this interpreter: the reader must agree with the array interface on arrays of every
    kind (offset views, Fortran order, read-only, empty), else ``None``. Only for an
    exact ``np.ndarray``: every caller checks ``type(value) is np.ndarray`` first (a
    NumPy scalar or another object has no ``data`` field there)."""
    if sys.implementation.name != "cpython":
        return None
    field = ctypes.c_size_t.from_address

    def read(array: np.ndarray) -> int:
        return field(id(array) + ARRAY_DATA_OFFSET).value

    base = np.arange(24.0)
    probes = [base, base[5:], base.reshape(4, 6).T, np.asfortranarray(base.reshape(4, 6)),
              np.frombuffer(bytes(16), np.uint8), np.zeros(0, np.float32)]
    if all(read(a) == _interface_address(a) for a in probes):
        return read
    return None  # pragma: no cover - another interpreter's object layout


_field_reader = _field_address()
_address: Callable[[np.ndarray], int] = _field_reader or _interface_address
#: whether ``tc_run_objects`` may read the data pointers from the array objects (where
#: the reader above is proven): a bound call then hands it ``id(array)`` per input and
#: output, about 0.35 us less per array than reading each pointer here
_OBJECTS = _field_reader is not None


def _check_input(k: int, value: Any, dtype: np.dtype) -> None:
    """``Refused(INPUT, k)`` unless ``value`` is a C-contiguous ndarray of exactly
    ``dtype`` (what every call path asks of an input before taking its pointer)."""
    if type(value) is not np.ndarray or value.dtype != dtype or not value.flags.c_contiguous:
        raise Refused(Status.INPUT, k)


def _range(errors: list[str], status: int) -> Refused:
    """The refusal of the object's nonzero ``status``: an index out of range."""
    return Refused(Status.RANGE, -1, errors[status - 1])


def _set_inputs(wanted: Sequence[tuple[np.dtype, tuple[int, ...]]], inputs: Sequence[Any],
                pointers: Any, start: int, last: list[Any]) -> None:
    """Check ``inputs`` against ``wanted`` (dtype, shape) and write their pointers into
    ``pointers`` from ``start``. An input that is the previous call's array object (held
    in ``last`` by a weak reference, so no caller array is kept alive past a call), still
    of the same dtype, shape and contiguity, keeps its pointer: a training loop that
    feeds the same arrays every step pays only that identity check."""
    if len(inputs) != len(wanted):
        raise Refused(Status.ARITY, len(inputs))
    for k, value in enumerate(inputs):
        dtype, shape = wanted[k]
        seen = last[k]
        if seen is not None and seen() is value and value.dtype is dtype and \
                value.shape == shape and value.flags.c_contiguous:
            continue  # (an array's dtype, shape and strides can change in place)
        _check_input(k, value, dtype)
        if value.shape != shape:
            raise Refused(Status.SHAPE, k)
        pointers[start + k] = _address(value)
        last[k] = weakref.ref(value)


def _set_objects(wanted: Sequence[tuple[np.dtype, tuple[int, ...]]], inputs: Sequence[Any],
                 objects: Any, start: int) -> None:
    """Check ``inputs`` against ``wanted`` (dtype, shape) and write each one's object
    address into ``objects`` from ``start``, for ``tc_run_objects``, which reads the
    data pointers at the call (nothing to remember between calls: each is a few
    attribute reads and an ``id``)."""
    if len(inputs) != len(wanted):
        raise Refused(Status.ARITY, len(inputs))
    for k, value in enumerate(inputs):
        dtype, shape = wanted[k]
        if type(value) is not np.ndarray or value.dtype != dtype or \
                not value.flags.c_contiguous:
            _check_input(k, value, dtype)  # raises, naming what is wrong
        if value.shape != shape:
            raise Refused(Status.SHAPE, k)
        objects[start + k] = id(value)


class LlvmProgram(PlainCalls):
    """The ``backends.Compiled`` entry points of a loaded LLVM plan object."""

    def __init__(self, key: str, layout: Layout, addresses: dict[str, int],
                 input_shapes: Sequence[tuple[int, ...]], head_sizes: Sequence[int],
                 picks: Sequence[tuple[int, int]], source: Callable[[], str]) -> None:
        self.key = key
        self.layout = layout
        self._source = source
        self._run = _ENTRY(addresses["tc_run"])  # a ctypes call releases the GIL
        self._run_bound = _unconverted(addresses["tc_run"])
        self._run_objects = _unconverted(addresses["tc_run_objects"])
        self._batch_fn = _ENTRY(addresses["tc_batch"])
        self._step = _ENTRY(addresses["tc_step"]) if "tc_step" in addresses else None
        self._steps = _ENTRY(addresses["tc_steps"]) if "tc_steps" in addresses else None
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
            raise Refused(Status.BUFFER, len(head))
        pointers = []
        for k, (value, (dtype, size)) in enumerate(zip(head, self._head)):
            if type(value) is not np.ndarray or value.dtype != dtype or \
                    not value.flags.c_contiguous or value.size < size:
                raise Refused(Status.BUFFER, k)
            pointers.append(_address(value))
        return pointers

    def _input_pointers(self, inputs: Sequence[Any], batch: bool = False
                        ) -> tuple[list[int], list[int], int]:
        """Pointers of ``inputs``, and for a batch each input's stride between cases
        and the number of cases."""
        if len(inputs) != len(self._inputs):
            raise Refused(Status.ARITY, len(inputs))
        pointers, strides, n = [], [], 1
        if batch:
            for value in inputs:
                if isinstance(value, np.ndarray) and value.ndim and value.shape[0] != 1:
                    n = value.shape[0]
        for k, (value, (dtype, shape)) in enumerate(zip(inputs, self._inputs)):
            _check_input(k, value, dtype)
            if batch:
                if value.shape[1:] != shape or (value.shape[0] != n and value.shape[0] != 1):
                    raise Refused(Status.SHAPE, k)
                strides.append(0 if value.shape[0] == 1 else int(np.prod(shape, dtype=np.int64)))
            elif value.shape != shape:
                raise Refused(Status.SHAPE, k)
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
            raise _range(self.layout.errors, status)

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
        """``run`` with the parameter and constant buffers fixed (checked once, their
        pointers kept in a per-thread pointer array; inputs as in ``bind_step``)."""
        fixed = self._head_pointers(head)
        kept = tuple(head)  # the bound plan's own buffers, alive as long as it is
        errors, wanted, shapes = self.layout.errors, self._inputs, self._outputs
        start = len(fixed)
        at = start + len(wanted) + len(self._scratch)
        local = threading.local()

        def prepared() -> tuple[Any, list[Any]]:
            pointers = fixed + [0] * len(wanted) + self._scratch_pointers() + \
                [0] * len(shapes)
            local.state = (self._array_type_of(len(pointers))(*pointers), [None] * len(wanted))
            return local.state

        if _OBJECTS:
            # inputs and outputs go as array objects (see ``_OBJECTS``), each alive
            # through the call, held by ``inputs`` and ``outputs``
            entry = self._run_objects

            def call_objects(*inputs: np.ndarray) -> tuple[np.ndarray, ...]:
                assert kept is not None
                objects = (getattr(local, "state", None) or prepared())[0]
                _set_objects(wanted, inputs, objects, start)
                outputs = tuple([np.empty(n, d) for n, d in shapes])  # results never alias
                j = at
                for output in outputs:
                    objects[j] = id(output)
                    j += 1
                status = entry(objects, None, _ZERO)
                if status:
                    raise _range(errors, status)
                return outputs
            return call_objects

        entry = self._run_bound

        def call(*inputs: np.ndarray) -> tuple[np.ndarray, ...]:
            assert kept is not None
            pointers, last = getattr(local, "state", None) or prepared()
            _set_inputs(wanted, inputs, pointers, start, last)
            outputs = []  # fresh per call: results never alias
            j = at
            for n, d in shapes:
                output = np.empty(n, d)
                pointers[j] = _address(output)
                outputs.append(output)
                j += 1
            status = entry(pointers, None, _ZERO)
            if status:
                raise _range(errors, status)
            return tuple(outputs)
        return call

    def bind_scalars(self, *head: np.ndarray) -> Callable[..., tuple]:
        """``scalars`` with the parameter and constant buffers fixed (as ``bind``). The
        roots come back as Python numbers, copied out before the call returns, so each
        thread writes one output arena of its own, made once: no array is allocated per
        call."""
        fixed = self._head_pointers(head)
        kept = tuple(head)  # the bound plan's own buffers, alive as long as it is
        entry, errors, wanted = self._run_bound, self.layout.errors, self._inputs
        start = len(fixed)
        local = threading.local()

        def prepared() -> tuple[Any, list[tuple[Any, int]], list[Any]]:
            outputs = [np.empty(max(n, 1), d) for n, d in self._outputs]
            pointers = fixed + [0] * len(wanted) + self._scratch_pointers() + \
                [_address(o) for o in outputs]
            local.state = (self._array_type_of(len(pointers))(*pointers),
                           [(outputs[k].item, offset) for k, offset in self._picks],
                           [None] * len(wanted))
            return local.state

        def numbers(*inputs: np.ndarray) -> tuple:
            assert kept is not None
            pointers, reads, last = getattr(local, "state", None) or prepared()
            _set_inputs(wanted, inputs, pointers, start, last)
            status = entry(pointers, None, _ZERO)
            if status:
                raise _range(errors, status)
            return tuple([read(offset) for read, offset in reads])
        return numbers

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

    # -- a step plan's entry points -------------------------------------------------
    def set_step(self, loss: tuple[str, int], states: int, parameter_sizes: Sequence[int],
                 slots: int) -> None:
        """Make this a step plan's program: the loss root's (dtype, offset), the number
        of state tables, the elements each writable parameter buffer must hold and the
        number of slots."""
        self._loss = (self.output_dtypes.index(loss[0]), loss[1], np.dtype(loss[0]))
        dtypes = [dtype for dtype, _ in self._head[:len(parameter_sizes)]]
        self._tail = [(d, n) for d, n in zip(dtypes, parameter_sizes)]
        self._tail += [(d, n) for _ in range(states) for d, n in zip(dtypes, parameter_sizes)]
        self._tail += [(np.dtype("float64"), slots), (np.dtype("uint8"), slots)]

    def _tail_pointers(self, tail: Sequence[Any]) -> list[int]:
        if len(tail) != len(self._tail):
            raise Refused(Status.BUFFER, len(self._head) + len(tail))
        pointers = []
        for k, (value, (dtype, size)) in enumerate(zip(tail, self._tail)):
            if type(value) is not np.ndarray or value.dtype != dtype or \
                    not value.flags.c_contiguous or not value.flags.writeable or \
                    value.size < size:
                raise Refused(Status.BUFFER, len(self._head) + k)
            pointers.append(_address(value))
        return pointers

    @property
    def fuses_updates(self) -> bool:
        """Whether this is a step plan's program (``set_step``), with its own update."""
        return hasattr(self, "_loss")

    def step(self) -> Any:
        """A step plan's ``run_step`` (the Numba backend's argument order: parameters,
        constants, inputs, writable parameters, states, step counts, state flags, ``lr``)."""
        if not self.fuses_updates:
            raise NotImplementedError("this plan has no run_step entry point")
        return self.run_step

    def steps(self) -> Any:
        """A step plan's ``run_steps`` (``step``'s arguments with K learning rates)."""
        if not self.fuses_updates:
            raise NotImplementedError("this plan has no run_steps entry point")
        return self.run_steps

    def run_step(self, *args: Any) -> float:
        *arrays, lr = args
        split, inputs_end = len(self._head), len(self._head) + len(self._inputs)
        head = self._head_pointers(arrays[:split])
        inputs, _, _ = self._input_pointers(arrays[split:inputs_end])
        tail = self._tail_pointers(arrays[inputs_end:])
        outputs = tuple(np.empty(n, d) for n, d in self._outputs)
        pointers = head + inputs + self._scratch_pointers() + \
            [_address(o) for o in outputs] + tail
        assert self._step is not None  # set_step is called only for objects that have it
        status = self._step(self._array_type_of(len(pointers))(*pointers), None, float(lr))
        if status:
            raise _range(self.layout.errors, status)
        k, offset, _ = self._loss
        return float(outputs[k][offset])

    def bind_step(self, head: Sequence[np.ndarray], tail: Sequence[np.ndarray]
                  ) -> Callable[..., float]:
        """``run_step`` with the parameter, constant, state and step buffers fixed:
        ``call(inputs, lr) -> loss``. The fixed buffers are checked once and their
        pointers kept (with the arrays themselves, alive as long as the call is); per
        call only the inputs are checked (``_set_inputs``: the previous call's array,
        unchanged, keeps its pointer). Each thread has its own
        scratch, output arenas and pointer array, so concurrent calls never share a
        buffer they write (the loss is read from the outputs; they never leave the
        call)."""
        assert self._step is not None and self.fuses_updates
        fixed_head = self._head_pointers(head)
        fixed_tail = self._tail_pointers(tail)
        kept = (tuple(head), tuple(tail))
        entry, errors = self._step, self.layout.errors
        wanted = self._inputs
        start = len(fixed_head)
        count = len(fixed_head) + len(wanted) + len(self._scratch) + len(self._outputs) + \
            len(fixed_tail)
        array_type = self._array_type_of(count)
        loss_arena, loss_offset, _ = self._loss
        local = threading.local()

        def prepared() -> tuple[Any, list[np.ndarray], list[Any]]:
            outputs = [np.empty(max(n, 1), d) for n, d in self._outputs]
            pointers = fixed_head + [0] * len(wanted) + self._scratch_pointers() + \
                [_address(o) for o in outputs] + fixed_tail
            state = (array_type(*pointers), outputs, [None] * len(wanted))
            local.state = state
            return state

        def call(inputs: Sequence[Any], lr: float) -> float:
            assert kept is not None
            pointers, outputs, last = getattr(local, "state", None) or prepared()
            _set_inputs(wanted, inputs, pointers, start, last)
            status = entry(pointers, None, lr)
            if status:
                raise _range(errors, status)
            return float(outputs[loss_arena][loss_offset])
        return call

    def run_steps(self, *args: Any) -> np.ndarray:
        *arrays, lrs = args
        lrs = np.ascontiguousarray(lrs, dtype=np.float64)
        split, inputs_end = len(self._head), len(self._head) + len(self._inputs)
        head = self._head_pointers(arrays[:split])
        inputs, strides, n = self._input_pointers(arrays[split:inputs_end], batch=True)
        n = lrs.shape[0]
        for k, value in enumerate(arrays[split:inputs_end]):
            if value.shape[0] not in (1, n):
                raise Refused(Status.SHAPE, k)
        tail = self._tail_pointers(arrays[inputs_end:])
        outputs = tuple(np.empty(size, d) for size, d in self._outputs)
        losses = np.empty(n, self._loss[2])
        pointers = head + inputs + self._scratch_pointers() + \
            [_address(o) for o in outputs] + tail + [_address(lrs), _address(losses)]
        extents = (ctypes.c_int64 * (1 + len(strides)))(n, *strides)
        assert self._steps is not None
        status = self._steps(self._array_type_of(len(pointers))(*pointers), extents, 0.0)
        if status:
            raise _range(self.layout.errors, status)
        return losses

    @staticmethod
    def _array_type_of(n: int) -> Any:
        return ctypes.c_void_p * n


def profile_reader(addresses: dict[str, int], n: int
                   ) -> Callable[[bool], tuple[np.ndarray, int, int]]:
    """Reads a profiled plan's counters through its ``tc_profile`` entry: ``read(reset)``
    returns the ``n`` kernels' cycles, the number of calls and the cycle counter now
    (``reset`` zeroes the counters after reading)."""
    entry = _ENTRY(addresses[PROFILE_ENTRY])
    pointers = ctypes.c_void_p * 1

    def read(reset: bool) -> tuple[np.ndarray, int, int]:
        out = np.zeros(n + 2, np.int64)
        entry(pointers(out.ctypes.data), None, 1.0 if reset else 0.0)
        return out[:n].copy(), int(out[n]), int(out[n + 1])
    return read


def eager_call(address: int, dtype: str, states: int) -> Callable[..., None]:
    """The Python side of an optimizer's eager update (``update.eager_module``):
    ``update(P, G, U, S0.., K, PS, N, GS, steps, present, lr)``, each array checked for
    its dtype, layout and writability, and the slot tables against the buffers' sizes,
    so the native loop never reads or writes outside them."""
    entry = _ENTRY(address)
    value_type = np.dtype(dtype)
    int64, float64, uint8 = np.dtype("int64"), np.dtype("float64"), np.dtype("uint8")
    expected = ([(value_type, False)] * 2 + [(value_type, True)] * (1 + states)
                + [(int64, False)] * 4 + [(float64, True), (uint8, True)])
    array_type = ctypes.c_void_p * len(expected)

    def update(*args: Any) -> None:
        *arrays, lr = args
        if len(arrays) != len(expected):
            raise TypeError(f"the update takes {len(expected)} arrays, got {len(arrays)}")
        for k, (value, (want, written)) in enumerate(zip(arrays, expected)):
            if type(value) is not np.ndarray or value.dtype != want or value.ndim != 1 or \
                    not value.flags.c_contiguous or (written and not value.flags.writeable):
                raise TypeError(f"no matching definition for argument {k}: expected a "
                                f"{'writable ' if written else ''}C-contiguous 1-d "
                                f"{want.name} array")
        p, g, u, *rest = arrays
        slots, starts, sizes, gradient_starts, steps, present = rest[states:]
        n = slots.shape[0]
        if n:
            if starts.shape[0] != n or sizes.shape[0] != n or gradient_starts.shape[0] != n:
                raise ValueError("the slot tables differ in length")
            room = min([p.shape[0], u.shape[0]] + [s.shape[0] for s in rest[:states]])
            if slots.min() < 0 or slots.max() >= min(steps.shape[0], present.shape[0]) or \
                    starts.min() < 0 or sizes.min() < 0 or gradient_starts.min() < 0 or \
                    (starts + sizes).max() > room or \
                    (gradient_starts + sizes).max() > g.shape[0]:
                raise IndexError("the slot tables reach outside the update's buffers")
        extents = ctypes.c_int64(n)
        entry(array_type(*[_address(a) for a in arrays]), ctypes.byref(extents), float(lr))
    return update


__all__ = ["LlvmProgram", "eager_call", "profile_reader"]
