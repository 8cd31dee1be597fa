"""A schedule rendered to one LLVM module: one function per kernel, ``body``, the entries.

``render(schedule, approximate)`` builds an ``llvmlite.ir.Module`` holding:

- one internal function per kernel, ``k<n>(arenas..) -> i32``, written by the method of
  ``Renderer`` named after the kernel's kind (``fused``, ``matmul``, ``take``, ...); it
  returns 0, or a status (``Layout.errors``) when an index is out of range;
- ``body(arenas..) -> i32``: every kernel in order, stopping at the first status;
- the C-ABI entry points, all ``i32 (ptr arrays, ptr extents, double lr)``: ``tc_run``
  (one call of ``body`` over the pointers in ``arrays``, in ``Layout.arguments`` order),
  ``tc_run_objects`` (the same, with each input's and output's entry the address of its
  NumPy array object, whose data pointer it reads at ``ARRAY_DATA_OFFSET``: a caller
  then hands over ``id(array)`` instead of extracting each pointer in Python) and
  ``tc_batch`` (``extents[0]`` cases; ``extents[1 + k]`` is input ``k``'s stride
  between cases in elements, 0 for an input shared by every case; output arenas hold
  one row per case; one scratch arena).

The kernels compute what the Numba backend's generated loops compute (``numba.py``),
in the same order: the same loop layout (``fused_layout``), the float64 accumulators of
float reductions, reductions over the innermost loop in two passes (the terms to a row
of scratch, then a vectorized reduction of the row), and matrix products above
``LOOP_MATMUL_LIMIT`` through the same BLAS routines Numba's ``np.dot`` calls
(``sgemm``/``dgemm``, or ``gemv``/``dot`` for a vector operand) with the same arguments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from ....errors import CompileError
from ...core import registry as primitives
from ...lower.kernels import (
    Arena,
    ConcatKernel,
    CopyKernel,
    FusedKernel,
    Kernel,
    MatmulKernel,
    OneHotKernel,
    PadKernel,
    RandomKernel,
    Scalar,
    ScatterAddKernel,
    Strided,
    TakeKernel,
    broadcast_access,
    c_strides,
)
from ...lower.layout import coalesce, fused_layout, row_terms, scratch_sizes
from ...lower.schedule import Schedule, blas_layout
from . import ops, rows
from .interface import ARRAY_DATA_OFFSET, BLAS_PREFIX, Layout, layout_of, range_error
from .random import RandomFills
from .types import (
    ENTRY_TYPE,
    F32,
    I8,
    I32,
    I64,
    PTR,
    TYPES,
    constant,
    convert,
    i32,
    i64,
    is_float,
    load,
    loop,
    offset,
    store,
)

_MAX = {"max": ">=", "min": "<="}


class Renderer:
    """Builds the module of one schedule (see the module docstring)."""

    def __init__(self, schedule: Schedule, approximate: bool, step: Any = None) -> None:
        self.step = step
        self.s = schedule
        self.g = schedule.graph
        self.approximate = approximate
        self.layout = layout_of(schedule)
        self.module = ir.Module(name="tensorcode_plan")
        self.module.triple = ""
        self.position = {arena: k for k, arena in enumerate(self.layout.arguments)}
        self.kernel_type = ir.FunctionType(I32, [PTR] * len(self.layout.arguments))
        self.rows = rows.RowReductions(self.module)
        self.random = RandomFills(self.module)
        self.b: ir.IRBuilder
        self.fn: ir.Function
        self.fail: dict[int, ir.Block] = {}

    # -- the module --------------------------------------------------------------------
    def render(self) -> ir.Module:
        kernels = []
        for k, kernel in enumerate(self.s.kernels):
            kernels.append(self.kernel(k, kernel))
        body = ir.Function(self.module, self.kernel_type, "body")
        body.linkage = "internal"
        self._noalias(body)
        b = ir.IRBuilder(body.append_basic_block("entry"))
        for k, fn in enumerate(kernels):
            status = b.call(fn, body.args)
            failed = b.icmp_signed("!=", status, i32(0))
            stop = body.append_basic_block(f"stop{k}")
            go = body.append_basic_block(f"k{k}.done")
            b.cbranch(failed, stop, go)
            b.position_at_end(stop)
            b.ret(status)
            b.position_at_end(go)
        b.ret(i32(0))
        self._entry_run(body)
        self._entry_batch(body)
        if self.step is not None:
            self._entry_steps(body)
        return self.module

    def _noalias(self, fn: ir.Function) -> None:
        for arg in fn.args:
            arg.add_attribute("noalias")

    def _arguments(self, b: ir.IRBuilder, arrays: ir.Value) -> list[ir.Value]:
        return [b.load(b.gep(arrays, [i64(k)], inbounds=True, source_etype=PTR), typ=PTR)
                for k in range(len(self.layout.arguments))]

    def _entry_run(self, body: ir.Function) -> None:
        fn = ir.Function(self.module, ENTRY_TYPE, "tc_run")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.ret(b.call(body, self._arguments(b, fn.args[0])))
        fn = ir.Function(self.module, ENTRY_TYPE, "tc_run_objects")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        arguments = self._arguments(b, fn.args[0])
        for k, arena in enumerate(self.layout.arguments):
            if arena.role in ("input", "output"):
                field = b.gep(arguments[k], [i64(ARRAY_DATA_OFFSET)], inbounds=True,
                              source_etype=I8)
                arguments[k] = b.load(field, typ=PTR)
        b.ret(b.call(body, arguments))

    def _entry_batch(self, body: ir.Function) -> None:
        """``tc_batch``: ``body`` once per case over that case's rows."""
        fn = ir.Function(self.module, ENTRY_TYPE, "tc_batch")
        arrays, extents, _ = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        base = self._arguments(b, arrays)
        n = load(b, extents, "int64", i64(0))
        strides: dict[int, ir.Value] = {}
        inputs = [k for k, a in enumerate(self.layout.arguments) if a.role == "input"]
        for j, k in enumerate(inputs):
            strides[k] = load(b, extents, "int64", i64(1 + j))
        for k, a in enumerate(self.layout.arguments):
            if a.role == "output":
                strides[k] = i64(self.layout.outputs[a.dtype])
        with loop(b, n, "case") as c:
            pointers = []
            for k, (arena, pointer) in enumerate(zip(self.layout.arguments, base)):
                if k in strides:
                    step = b.mul(c, strides[k])
                    pointer = b.gep(pointer, [step], inbounds=True,
                                    source_etype=TYPES[arena.dtype])
                pointers.append(pointer)
            status = b.call(body, pointers)
            failed = fn.append_basic_block("case.failed")
            after = fn.append_basic_block("case.ok")
            b.cbranch(b.icmp_signed("!=", status, i32(0)), failed, after)
            b.position_at_end(failed)
            b.ret(status)
            b.position_at_end(after)
        b.ret(i32(0))

    def _entry_steps(self, body: ir.Function) -> None:
        """``tc_step`` and ``tc_steps``: after the arenas, ``arrays`` holds the writable
        parameter buffers (one per dtype), the state buffers (state-major), the slots'
        step counts and state flags, then for ``tc_steps`` the K learning rates and the
        K losses' buffer."""
        from .update import update_function

        spec, layout = self.step, self.layout
        dtypes = list(self.s.sources.parameter_dtypes)
        n_state = len(spec.rule.state_keys)
        slots = list(getattr(spec, "updated", spec.slots))
        updates = {d: update_function(self.module, spec.rule, d,
                                      [t for t in slots if t[1] == d]) for d in dtypes}
        count = len(layout.arguments)
        outputs = {a.dtype: k for k, a in enumerate(layout.arguments) if a.role == "output"}

        def extras(b: ir.IRBuilder, arrays: ir.Value, n: int) -> list[ir.Value]:
            return [b.load(b.gep(arrays, [i64(count + j)], inbounds=True, source_etype=PTR),
                           typ=PTR) for j in range(n)]

        def update_all(b: ir.IRBuilder, base: list[ir.Value], extra: list[ir.Value],
                       lr: ir.Value) -> None:
            steps, present = extra[len(dtypes) * (1 + n_state):][:2]
            for p, d in enumerate(dtypes):
                states = [extra[len(dtypes) * (1 + j) + p] for j in range(n_state)]
                b.call(updates[d], [extra[p], base[outputs[d]], *states, steps, present, lr])

        n_extra = len(dtypes) * (1 + n_state) + 2
        fn = ir.Function(self.module, ENTRY_TYPE, "tc_step")
        arrays, extents, lr = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        base = self._arguments(b, arrays)
        status = b.call(body, base)
        failed = fn.append_basic_block("failed")
        ok = fn.append_basic_block("ok")
        b.cbranch(b.icmp_signed("!=", status, i32(0)), failed, ok)
        b.position_at_end(failed)
        b.ret(status)
        b.position_at_end(ok)
        update_all(b, base, extras(b, arrays, n_extra), lr)
        b.ret(i32(0))

        loss_dtype, loss_offset = spec.loss
        fn = ir.Function(self.module, ENTRY_TYPE, "tc_steps")
        arrays, extents, _ = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        base = self._arguments(b, arrays)
        extra = extras(b, arrays, n_extra + 2)
        lrs, losses = extra[n_extra:]
        n = load(b, extents, "int64", i64(0))
        inputs = [k for k, a in enumerate(layout.arguments) if a.role == "input"]
        strides = {k: load(b, extents, "int64", i64(1 + j)) for j, k in enumerate(inputs)}
        with loop(b, n, "case") as c:
            pointers = [b.gep(p, [b.mul(c, strides[k])], inbounds=True,
                              source_etype=TYPES[layout.arguments[k].dtype])
                        if k in strides else p for k, p in enumerate(base)]
            status = b.call(body, pointers)
            failed = fn.append_basic_block("case.failed")
            after = fn.append_basic_block("case.ok")
            b.cbranch(b.icmp_signed("!=", status, i32(0)), failed, after)
            b.position_at_end(failed)
            b.ret(status)
            b.position_at_end(after)
            update_all(b, base, extra, load(b, lrs, "float64", c))
            loss = load(b, base[outputs[loss_dtype]], loss_dtype, i64(loss_offset))
            store(b, loss, losses, loss_dtype, c)
        b.ret(i32(0))

    # -- kernels -----------------------------------------------------------------------
    def kernel(self, k: int, kernel: Kernel) -> ir.Function:
        fn = ir.Function(self.module, self.kernel_type, f"k{k}")
        fn.linkage = "internal"
        self._noalias(fn)
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.fail = {}
        render = getattr(self, f"k_{kernel.kind}", None)
        if render is None:  # pragma: no cover - every kernel kind has a method
            raise CompileError(f"llvm backend: no lowering for a {kernel.kind} kernel")
        render(kernel)
        self.b.ret(i32(0))
        return fn

    def array(self, loc: Strided) -> ir.Value:
        return self.fn.args[self.position[loc.arena]]

    def arena(self, role: str, dtype: str) -> ir.Value:
        return self.fn.args[self.position[Arena(role, dtype)]]

    def read(self, loc: Any, strides: Sequence[int], names: Sequence[ir.Value]) -> ir.Value:
        """The element of ``loc`` at loop indices ``names`` (a constant for a scalar)."""
        if isinstance(loc, Scalar):
            return constant(loc.value, loc.dtype)
        index = offset(self.b, loc.offset, list(zip(strides, names)))
        return load(self.b, self.array(loc), loc.dtype, index)

    def write(self, value: ir.Value, loc: Strided, strides: Sequence[int],
              names: Sequence[ir.Value]) -> None:
        index = offset(self.b, loc.offset, list(zip(strides, names)))
        store(self.b, value, self.array(loc), loc.dtype, index)

    def nest(self, dims: Sequence[int], prefix: str) -> _Nest:
        return _Nest(self.b, dims, prefix)

    def fill(self, loc: Strided, value: ir.Value) -> None:
        with loop(self.b, loc.size, "z") as z:
            self.write(value, loc, [1], [z])

    def check(self, index: ir.Value, size: int, kernel: Kernel) -> None:
        """Return the kernel's status (``range_error``) unless ``0 <= index < size``."""
        status = self.layout.errors.index(str(range_error(self.s, kernel))) + 1
        bad = self.b.icmp_unsigned(">=", index, i64(size))  # negative: huge unsigned
        ok = self.fn.append_basic_block("in_range")
        fail = self.fn.append_basic_block("out_of_range")
        self.b.cbranch(bad, fail, ok)
        self.b.position_at_end(fail)
        self.b.ret(i32(status))
        self.b.position_at_end(ok)

    def index_value(self, loc: Any, shape: Sequence[int], names: Sequence[ir.Value]
                    ) -> ir.Value:
        """An index operand's element as i64."""
        strides = list(loc.strides) if isinstance(loc, Strided) else []
        strides = [0 if size == 1 else st for size, st in zip(shape, strides)]
        value = self.read(loc, strides, names)
        return convert(self.b, value, loc.dtype, "int64")

    # fused elementwise loops and their reductions
    def k_fused(self, kernel: FusedKernel) -> None:
        g, b = self.g, self.b
        layout = fused_layout(g, kernel)
        stores, loads = kernel.stores, kernel.loads
        dims, reductions, local = layout.dims, layout.reductions, layout.local
        for r in reductions:
            if r not in local:  # accumulated in place: the stores start at the identity
                self.fill(stores[r], self._identity(g.nodes[r]))
        opens: dict[int, list[int]] = {}
        for r, d in local.items():
            opens.setdefault(d, []).append(r)
        row_of: dict[int, tuple[str, int]] = {}
        offsets = {d: int(n) for d, n in self.s.arena.items()}
        for r, dtype in row_terms(g, layout):
            start = offsets.get(dtype, 0)
            offsets[dtype] = start + dims[-1]
            row_of[r] = (dtype, start)
        # accumulators live in stack slots (promoted to registers by LLVM)
        entry = self.fn.entry_basic_block
        slots: dict[int, ir.Value] = {}
        with b.goto_block(entry):
            b.position_at_start(entry)
            for r in local:
                if r not in row_of:
                    slots[r] = b.alloca(self._acc_type(g.nodes[r]))

        names: list[ir.Value] = []
        stack: list[Any] = []

        def open_level(d: int) -> None:
            for r in opens.get(d, []):
                if r in slots:
                    b.store(self._acc_init(g.nodes[r]), slots[r])

        def close_level(d: int) -> None:
            for r in opens.get(d, []):
                node = g.nodes[r]
                dtype = node.type.dtype
                if r in row_of:
                    row_dtype, start = row_of[r]
                    row = self.arena("scratch", row_dtype)
                    pointer = b.gep(row, [i64(start)], inbounds=True,
                                    source_etype=TYPES[row_dtype])
                    value = self.rows.call(b, node.op, row_dtype, pointer, dims[-1])
                    acc_dtype = "float64" if node.op in ("sum", "mean") else row_dtype
                else:
                    value = b.load(slots[r], typ=self._acc_type(node))
                    acc_dtype = self._acc_dtype(node)
                if node.op == "mean":
                    value = b.fdiv(value, constant(float(self._count(r)), acc_dtype))
                value = convert(b, value, acc_dtype, dtype)
                self.write(value, stores[r], layout.red_vec[r][:d], names[:d])

        for d in range(len(dims)):
            open_level(d)
            nest = loop(b, dims[d], f"i{d}")
            names.append(nest.__enter__())
            stack.append(nest)
        open_level(len(dims))
        values: dict[int, ir.Value] = {}
        for j, loc in loads.items():
            if isinstance(loc, Scalar):
                values[j] = constant(loc.value, loc.dtype)
        for j in layout.load_keys:
            values[j] = self.read(loads[j], layout.load_vec[j], names)
        for i in kernel.nodes:
            node = g.nodes[i]
            if primitives.is_reduction(node.op):
                x = values[node.inputs[0]]
                dtype = node.type.dtype
                if i in row_of:
                    row_dtype, start = row_of[i]
                    store(b, x, self.arena("scratch", row_dtype), row_dtype,
                          offset(b, start, [(1, names[-1])]))
                elif i in local:
                    acc = b.load(slots[i], typ=self._acc_type(node))
                    b.store(self._accumulate(node, acc, x), slots[i])
                else:
                    loc = stores[i]
                    index = offset(b, loc.offset, list(zip(layout.red_vec[i], names)))
                    old = load(b, self.array(loc), dtype, index)
                    if node.op in ("sum", "mean"):
                        new = b.fadd(old, x) if is_float(dtype) else b.add(old, x)
                    else:
                        new = ops.maximum(ops.Element(b, dtype, dtype), old, x, _MAX[node.op])
                    store(b, new, self.array(loc), dtype, index)
                continue
            values[i] = self.elementwise(node, [values[j] for j in node.inputs])
            if i in layout.store_vec:
                self.write(values[i], stores[i], layout.store_vec[i], names)
        close_level(len(dims))
        for d in range(len(dims) - 1, -1, -1):
            stack.pop().__exit__(None, None, None)
            names.pop()
            close_level(d)
        for r in reductions:
            node = g.nodes[r]
            if r not in local and node.op == "mean" and node.type.is_float:
                loc, dtype = stores[r], node.type.dtype
                count = constant(float(self._count(r)), dtype)
                with loop(b, loc.size, "q") as q:
                    index = offset(b, loc.offset, [(1, q)])
                    old = load(b, self.array(loc), dtype, index)
                    store(b, b.fdiv(old, count), self.array(loc), dtype, index)

    def elementwise(self, node: Any, args: list[ir.Value]) -> ir.Value:
        """One element of ``node`` from the lowering table (its float32 approximation
        when approximations are on)."""
        dtype = node.type.dtype
        operand = self.g.nodes[node.inputs[0]].type.dtype if node.inputs else dtype
        element = ops.Element(self.b, dtype, operand)
        if dtype == "float32" and self.approximate and node.op in ops.APPROXIMATIONS:
            return ops.APPROXIMATIONS[node.op](element, args)
        lowering = ops.LOWERINGS.get(node.op)
        if lowering is None:
            raise CompileError(f"llvm backend: no lowering for op {node.op!r}")
        return lowering(element, args)

    def _count(self, r: int) -> int:
        node = self.g.nodes[r]
        shape = self.g.nodes[node.inputs[0]].type.shape
        return math.prod(shape[a] for a in node.attr("axis"))

    def _identity(self, node: Any) -> ir.Constant:
        dtype = node.type.dtype
        if node.op in ("sum", "mean"):
            return constant(0, dtype)
        if node.type.is_float:
            return constant(-np.inf if node.op == "max" else np.inf, dtype)
        info = np.iinfo(dtype)
        return constant(info.min if node.op == "max" else info.max, dtype)

    def _acc_dtype(self, node: Any) -> str:
        """A register accumulator's dtype: float64 for a float sum or mean, int64 for
        an integer sum (Numba's ``0.0``/``0`` start), the node's own for max/min."""
        if node.op in ("sum", "mean"):
            return "float64" if node.type.is_float else "int64"
        return str(node.type.dtype)

    def _acc_type(self, node: Any) -> ir.Type:
        return TYPES[self._acc_dtype(node)]

    def _acc_init(self, node: Any) -> ir.Constant:
        if node.op in ("sum", "mean"):
            return constant(0, self._acc_dtype(node))
        return self._identity(node)

    def _accumulate(self, node: Any, acc: ir.Value, x: ir.Value) -> ir.Value:
        b, dtype = self.b, node.type.dtype
        if node.op in ("sum", "mean"):
            wide = self._acc_dtype(node)
            x = convert(b, x, dtype, wide)
            return b.fadd(acc, x) if is_float(wide) else b.add(acc, x)
        return ops.maximum(ops.Element(b, dtype, dtype), acc, x, _MAX[node.op])

    # copies, concatenation, padding
    def k_copy(self, kernel: CopyKernel) -> None:
        src, dst = kernel.src, kernel.dst
        vectors = [list(dst.strides)]
        if isinstance(src, Strided):
            vectors.append(list(broadcast_access(src, dst.shape)))
        dims, vecs = coalesce(dst.shape, vectors)
        with self.nest(dims, "i") as names:
            value = self.read(src, vecs[1] if len(vecs) > 1 else [], names)
            self.write(value, dst, vecs[0], names)

    def k_concat(self, kernel: ConcatKernel) -> None:
        out, axis = kernel.out, kernel.axis
        strides = c_strides(out.shape)
        start = 0
        for src in kernel.ins:
            shape = src.shape if isinstance(src, Strided) else \
                tuple(1 if a == axis else d for a, d in enumerate(out.shape))
            dst = Strided(out.base, out.offset + start * strides[axis], shape, strides,
                          out.dtype)
            self.k_copy(CopyKernel([], shape, src, dst))
            start += shape[axis]

    def k_pad(self, kernel: PadKernel) -> None:
        out = kernel.out
        self.fill(out, constant(0, out.dtype))
        strides = c_strides(out.shape)
        shape = self.g.nodes[self.g.nodes[kernel.nodes[0]].inputs[0]].type.shape
        dst = Strided(out.base, out.offset + kernel.before * strides[kernel.axis], shape,
                      strides, out.dtype)
        self.k_copy(CopyKernel([], shape, kernel.x, dst))

    # gathers and scatters
    def k_take(self, kernel: TakeKernel) -> None:
        x, idx, out, axis = kernel.x, kernel.index, kernel.out, kernel.axis
        node = self.g.nodes[kernel.nodes[0]]
        xshape = self.g.nodes[node.inputs[0]].type.shape
        ishape = self.g.nodes[node.inputs[1]].type.shape
        pre, post = xshape[:axis], xshape[axis + 1:]
        with self.nest(pre, "p") as names_pre, self.nest(ishape, "q") as names_idx:
            ix = self.index_value(idx, ishape, names_idx)
            self.check(ix, xshape[axis], kernel)
            with self.nest(post, "r") as names_post:
                out_index = offset(self.b, out.offset, list(zip(
                    c_strides(out.shape), names_pre + names_idx + names_post)))
                if isinstance(x, Scalar):
                    value = constant(x.value, x.dtype)
                else:
                    xs = [0 if size == 1 else st for size, st in zip(x.shape, x.strides)]
                    terms = list(zip(xs[:axis], names_pre)) + [(x.strides[axis], ix)] + \
                        list(zip(xs[axis + 1:], names_post))
                    value = load(self.b, self.array(x), x.dtype,
                                 offset(self.b, x.offset, terms))
                store(self.b, value, self.array(out), out.dtype, out_index)

    def k_scatter_add(self, kernel: ScatterAddKernel) -> None:
        values, idx, out = kernel.values, kernel.index, kernel.out
        axis, size = kernel.axis, kernel.size
        node = self.g.nodes[kernel.nodes[0]]
        gshape = self.g.nodes[node.inputs[0]].type.shape
        ishape = self.g.nodes[node.inputs[1]].type.shape
        pre, post = gshape[:axis], gshape[axis + len(ishape):]
        self.fill(out, constant(0, out.dtype))
        b = self.b
        with self.nest(pre, "p") as names_pre, self.nest(ishape, "q") as names_idx:
            ix = self.index_value(idx, ishape, names_idx)
            self.check(ix, size, kernel)
            with self.nest(post, "r") as names_post:
                gstrides = list(broadcast_access(values, gshape)) \
                    if isinstance(values, Strided) else []
                value = self.read(values, gstrides, names_pre + names_idx + names_post)
                ostrides = c_strides(pre + (size,) + post)
                terms = list(zip(ostrides[:axis], names_pre)) + [(ostrides[axis], ix)] + \
                    list(zip(ostrides[axis + 1:], names_post))
                index = offset(b, out.offset, terms)
                old = load(b, self.array(out), out.dtype, index)
                new = b.fadd(old, value) if is_float(out.dtype) else b.add(old, value)
                store(b, new, self.array(out), out.dtype, index)

    def k_one_hot(self, kernel: OneHotKernel) -> None:
        idx, out, n = kernel.index, kernel.out, kernel.n
        node = self.g.nodes[kernel.nodes[0]]
        ishape = self.g.nodes[node.inputs[0]].type.shape
        self.fill(out, constant(0, out.dtype))
        with self.nest(ishape, "q") as names:
            ix = self.index_value(idx, ishape, names)
            self.check(ix, n, kernel)
            base = offset(self.b, out.offset, list(zip([s * n for s in c_strides(ishape)],
                                                       names)))
            store(self.b, constant(1, out.dtype), self.array(out), out.dtype,
                  self.b.add(base, ix))

    # matrix products
    def k_matmul(self, kernel: MatmulKernel) -> None:
        a, bm, out = kernel.a, kernel.b, kernel.out
        batch, m, kk, n = kernel.batch, kernel.m, kernel.k, kernel.n
        dtype = out.dtype
        b = self.b
        with self.nest(batch, "j") as bnames:
            flat = offset(b, 0, list(zip(c_strides(batch), bnames)))
            ob = b.add(i64(out.offset), b.mul(flat, i64(m * n)))

            def batch_offset(loc: Any) -> ir.Value:
                if isinstance(loc, Scalar):
                    return i64(0)
                lead = len(batch) - (len(loc.shape) - 2)
                strides = [0] * lead + [0 if size == 1 else st for size, st in
                                        zip(loc.shape[:-2], loc.strides[:-2])]
                return offset(b, loc.offset, list(zip(strides, bnames)))

            ab, bb = batch_offset(a), batch_offset(bm)
            if kernel.mode == "blas":
                assert isinstance(a, Strided) and isinstance(bm, Strided)
                self._blas(a, ab, bm, bb, out, ob, m, kk, n)
                return

            def elem(loc: Any, row: ir.Value, col: ir.Value, base: ir.Value) -> ir.Value:
                if isinstance(loc, Scalar):
                    return constant(loc.value, loc.dtype)
                sr, sc = loc.strides[-2], loc.strides[-1]
                index = base
                if loc.shape[-2] != 1 and sr:
                    index = b.add(index, b.mul(row, i64(sr)) if sr != 1 else row)
                if loc.shape[-1] != 1 and sc:
                    index = b.add(index, b.mul(col, i64(sc)) if sc != 1 else col)
                return load(b, self.array(loc), loc.dtype, index)

            out_arr = self.array(out)
            zero = constant(0, dtype)
            mul = b.fmul if is_float(dtype) else b.mul
            add = b.fadd if is_float(dtype) else b.add

            def target(i: ir.Value, j: ir.Value) -> ir.Value:
                return b.add(ob, b.add(b.mul(i, i64(n)), j))

            if kernel.mode == "kij":
                with loop(b, m * n, "mi") as mi:
                    store(b, zero, out_arr, dtype, b.add(ob, mi))
                with loop(b, kk, "mk") as mk, loop(b, m, "mi") as mi, loop(b, n, "mj") as mj:
                    t = target(mi, mj)
                    product = mul(elem(a, mi, mk, ab), elem(bm, mk, mj, bb))
                    store(b, add(load(b, out_arr, dtype, t), product), out_arr, dtype, t)
            else:  # ikj
                with loop(b, m, "mi") as mi:
                    with loop(b, n, "mj") as mj:
                        store(b, zero, out_arr, dtype, target(mi, mj))
                    with loop(b, kk, "mk") as mk:
                        av = elem(a, mi, mk, ab)
                        with loop(b, n, "mj") as mj:
                            t = target(mi, mj)
                            product = mul(av, elem(bm, mk, mj, bb))
                            store(b, add(load(b, out_arr, dtype, t), product), out_arr,
                                  dtype, t)

    def _blas(self, a: Strided, ab: ir.Value, bm: Strided, bb: ir.Value, out: Strided,
              ob: ir.Value, m: int, kk: int, n: int) -> None:
        """``np.dot`` of two BLAS-readable views into ``out`` as Numba's ``dot_3_mm``
        calls BLAS: ``dot`` for two vectors, ``gemv`` when one side is a vector,
        ``gemm`` otherwise, with its transposes and leading dimensions."""
        b = self.b
        dtype = out.dtype
        kind = "s" if dtype == "float32" else "d"
        ty = TYPES[dtype]
        pa = b.gep(self.array(a), [ab], inbounds=True, source_etype=ty)
        pb = b.gep(self.array(bm), [bb], inbounds=True, source_etype=ty)
        pc = b.gep(self.array(out), [ob], inbounds=True, source_etype=ty)
        a_layout, b_layout = blas_layout(a, m, kk), blas_layout(bm, kk, n)
        if n == 1 and m == 1:
            fn = self._blas_function(f"{kind}dot", ty, 5)
            value = b.call(fn, [self._int(kk), pa, self._int(1), pb, self._int(1)])
            b.store(value, pc)
            return
        if n == 1 or m == 1:
            # M * V: the matrix is ``a`` (V = b); V * M: the matrix is ``b``
            if n == 1:
                matrix, layout, shape, vector = pa, a_layout, (m, kk), pb
                trans = layout == "C"
            else:
                matrix, layout, shape, vector = pb, b_layout, (kk, n), pa
                trans = layout != "C"
            if layout == "F":
                rows_, cols, lda = shape[0], shape[1], shape[0]
            else:
                cols, rows_, lda = shape[0], shape[1], shape[1]
            fn = self._blas_function(f"{kind}gemv", ir.VoidType(), 11)
            b.call(fn, [self._char("t" if trans else "n"), self._int(rows_), self._int(cols),
                        self._scalar(1.0, dtype), matrix, self._int(lda), vector,
                        self._int(1), self._scalar(0.0, dtype), pc, self._int(1)])
            return
        # M * M: C^T = B^T A^T in BLAS's column-major terms
        transa = "n" if b_layout == "C" else "t"
        lda = n if b_layout == "C" else kk
        transb = "n" if a_layout == "C" else "t"
        ldb = kk if a_layout == "C" else m
        fn = self._blas_function(f"{kind}gemm", ir.VoidType(), 13)
        b.call(fn, [self._char(transa), self._char(transb), self._int(n), self._int(m),
                    self._int(kk), self._scalar(1.0, dtype), pb, self._int(lda), pa,
                    self._int(ldb), self._scalar(0.0, dtype), pc, self._int(n)])

    def _blas_function(self, name: str, result: ir.Type, arity: int) -> ir.Function:
        symbol = f"{BLAS_PREFIX}{name}_"
        fn = self.module.globals.get(symbol)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(result, [PTR] * arity), symbol)
        return fn

    def _slot(self, ty: ir.Type, value: ir.Constant) -> ir.Value:
        """A stack slot holding ``value`` (Fortran BLAS takes every argument by
        reference)."""
        entry = self.fn.entry_basic_block
        with self.b.goto_block(entry):
            self.b.position_at_start(entry)
            slot = self.b.alloca(ty)
        self.b.store(value, slot)
        return slot

    def _int(self, value: int) -> ir.Value:
        return self._slot(I32, i32(value))

    def _char(self, letter: str) -> ir.Value:
        return self._slot(I8, ir.Constant(I8, ord(letter)))

    def _scalar(self, value: float, dtype: str) -> ir.Value:
        return self._slot(TYPES[dtype], constant(value, dtype))

    # random draws
    def k_random(self, kernel: RandomKernel) -> None:
        out, key = kernel.out, kernel.key
        assert isinstance(key, Strided) and out.contiguous  # an input; a fresh buffer
        b = self.b
        out_pointer = b.gep(self.array(out), [i64(out.offset)], inbounds=True,
                            source_etype=TYPES[out.dtype])
        key_pointer = b.gep(self.array(key), [i64(key.offset)], inbounds=True,
                            source_etype=TYPES[key.dtype])
        if kernel.op != "categorical":
            self.random.fill(b, kernel, out_pointer, key_pointer)
            return
        logits = kernel.logits
        assert isinstance(logits, Strided)
        shape = logits.shape
        start = scratch_sizes(self.s)
        room = {d: start.get(d, 0) for d in ("float64", "int64", logits.dtype)}

        def scratch(dtype: str, n: int) -> ir.Value:
            at = room[dtype]
            room[dtype] += n
            return b.gep(self.arena("scratch", dtype), [i64(at)], inbounds=True,
                         source_etype=TYPES[dtype])

        classes = int(shape[-1])
        z, cumulative = scratch("float64", classes), scratch("float64", classes)
        order, work = scratch("int64", classes), scratch("int64", classes)
        if logits.contiguous:
            rows_pointer = b.gep(self.array(logits), [i64(logits.offset)], inbounds=True,
                                 source_etype=TYPES[logits.dtype])
        else:  # gathered into scratch first, as the Numba backend does
            at = room[logits.dtype]
            copy = Strided(Arena("scratch", logits.dtype), at, shape, c_strides(shape),
                           logits.dtype)
            self.k_copy(CopyKernel([], shape, logits, copy))
            rows_pointer = scratch(logits.dtype, math.prod(shape))
        self.random.categorical(b, kernel, out_pointer, key_pointer, rows_pointer,
                                logits.dtype, classes, (z, cumulative, order, work))


class _Nest:
    """Nested counted loops over ``dims`` as one context: yields their indices."""

    def __init__(self, b: ir.IRBuilder, dims: Sequence[int], prefix: str) -> None:
        self.b, self.dims, self.prefix = b, list(dims), prefix
        self.loops: list[Any] = []

    def __enter__(self) -> list[ir.Value]:
        names = []
        for d, n in enumerate(self.dims):
            context = loop(self.b, n, f"{self.prefix}{d}")
            names.append(context.__enter__())
            self.loops.append(context)
        return names

    def __exit__(self, *exc: Any) -> None:
        while self.loops:
            self.loops.pop().__exit__(None, None, None)


def render(schedule: Schedule, approximate: bool, step: Any = None
           ) -> tuple[ir.Module, Layout]:
    """The module of ``schedule`` (with a step plan's update and entry points when
    ``step``, a ``StepSpec``, is given) and its argument layout."""
    renderer = Renderer(schedule, approximate, step)
    module = renderer.render()
    return module, renderer.layout


__all__ = ["render", "ENTRY_TYPE", "F32", "I64"]
