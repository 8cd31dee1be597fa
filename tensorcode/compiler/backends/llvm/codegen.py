"""A ``Program`` rendered to one LLVM module: one function per kernel, ``body``, the entries.

``render(program, approximate)`` builds an ``llvmlite.ir.Module`` holding:

- one internal function per kernel, ``k<n>(arenas..) -> i32``, rendered from the
  kernel's loop program (``lower/loops.py``) by the statement table ``STATEMENTS`` and
  the op table ``ops.LOWERINGS``; it returns 0, or a status (``Layout.errors``) when an
  index is out of range;
- ``body(arenas..) -> i32``: every kernel in order, stopping at the first status;
- the C-ABI entry points, all ``i32 (ptr arrays, ptr extents, double lr)``: ``tc_run``
  (one call of ``body`` over the pointers in ``arrays``, in ``Layout.arguments`` order),
  ``tc_run_objects`` (the same, with each input's and output's entry the address of its
  NumPy array object, whose data pointer it reads at ``ARRAY_DATA_OFFSET``: a caller
  then hands over ``id(array)`` instead of extracting each pointer in Python) and
  ``tc_batch`` (``extents[0]`` cases; ``extents[1 + k]`` is input ``k``'s stride
  between cases in elements, 0 for an input shared by every case; output arenas hold
  one row per case; one scratch arena).

The loop program fixes what every kernel computes and in which order, so this module
and the Numba backend's (``backends/numba/loops.py``) give the same bits: float
reductions into a register accumulate in float64, reductions over the innermost loop
run in two passes (the terms to a row of scratch, then ``rows.py``'s vectorized
reduction of the row), a ``MatVec`` runs ``matvec.py``'s loops in the order the loop
program fixes, and a ``Gemm`` calls the BLAS routine Numba's ``np.dot`` calls
(``sgemm``/``dgemm``, or ``dot`` for two vectors) with the same arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llvmlite import ir

from ....errors import CompileError
from ...lower import loops, partition
from ...lower.approximations import APPROXIMATIONS, expand
from ...lower.kernels import Arena, Strided
from ...lower.loops import LoopKernel
from ...lower.program import Program
from ...lower.update import StepSpec
from ..tiles import TileProducts
from . import ops, rows
from .interface import ARRAY_DATA_OFFSET, BLAS_PREFIX, POOL_RUN, Layout, layout_of
from .matvec import MatVecs
from .profile import Counters
from .sample import Sampler
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
    load,
    loop,
    offset,
    store,
)


class Renderer:
    """Builds the module of one ``Program`` (see the module docstring)."""

    def __init__(self, program: Program, approximate: bool, profile: bool = False) -> None:
        self.step = program.step
        self.profile = profile
        self.p = program
        self.g = program.graph
        self.approximate = approximate
        self.layout = layout_of(program)
        self.module = ir.Module(name="tensorcode_plan")
        self.module.triple = ""
        self.position = {arena: k for k, arena in enumerate(self.layout.arguments)}
        self.kernel_type = ir.FunctionType(I32, [PTR] * len(self.layout.arguments))
        self.rows = rows.RowReductions(self.module)
        self.sampler = Sampler()
        self.matvecs = MatVecs(self.module)
        self.tiles = TileProducts(self.module)
        self.b: ir.IRBuilder
        self.fn: ir.Function
        self.args: list[ir.Value] = []
        self.fail: dict[int, ir.Block] = {}
        #: the row room of each dtype, and a partition chunk's own copy of it
        self.row_room = partition.row_regions(self.g, program.kernels, program.row_start)
        self.private: dict[str, ir.Value] = {}
        self.depth = 0
        self.tags = 0

    # -- the module --------------------------------------------------------------------
    def render(self) -> ir.Module:
        kernels = [self.kernel(k, kernel) for k, kernel in enumerate(self.p.loops)]
        body = ir.Function(self.module, self.kernel_type, "body")
        body.linkage = "internal"
        self._noalias(body)
        b = ir.IRBuilder(body.append_basic_block("entry"))
        counters = Counters(self.module, len(kernels)) if self.profile else None
        if counters is not None:
            counters.called(b)
        for k, fn in enumerate(kernels):
            started = counters.start(b) if counters is not None else None
            status = b.call(fn, body.args)
            if counters is not None:
                counters.stop(b, k, started)
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
            self._entry_steps(body, self.step)
        if counters is not None:
            counters.entry()
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

    def _entry_steps(self, body: ir.Function, spec: StepSpec) -> None:
        """``tc_step`` and ``tc_steps``: after the arenas, ``arrays`` holds the writable
        parameter buffers (one per dtype), the state buffers (state-major), the slots'
        step counts and state flags, then for ``tc_steps`` the K learning rates and the
        K losses' buffer."""
        from .update import update_function

        layout = self.layout
        dtypes = [a.dtype for a in self.p.parameters]
        n_state = len(spec.rule.state_keys)
        slots = list(spec.updated)
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

    # -- kernels: a statement table over the loop program -----------------------------
    def kernel(self, k: int, kernel: LoopKernel) -> ir.Function:
        fn = ir.Function(self.module, self.kernel_type, f"k{k}")
        fn.linkage = "internal"
        self._noalias(fn)
        self.fn = fn
        self.args = list(fn.args)
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.values: dict[str, ir.Value] = {}
        self.accumulators = {a.name: a for a in kernel.accumulators}
        self.slots: dict[str, ir.Value] = {}
        #: the kernel's top-level ``Let``s so far (a partitioned loop's chunk rebinds
        #: those it reads, ``partition.outer_lets``)
        self.top_lets: list[loops.Let] = []
        for stmt in kernel.body:
            if self.accumulators and not self.slots and loops.uses_accumulators(stmt):
                self._open_slots()
            self.statement(stmt)
        self.b.ret(i32(0))
        return fn

    def block(self, body: Sequence[loops.Stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: loops.Stmt) -> None:
        render = STATEMENTS.get(type(stmt))
        if render is None:  # pragma: no cover - every statement kind has a row
            raise CompileError(f"llvm backend: no rendering of a {type(stmt).__name__}")
        render(self, stmt)

    def arena(self, arena: Arena) -> ir.Value:
        return self.args[self.position[arena]]

    def address(self, arena: Arena, dtype: str, index: loops.Expr) -> tuple[ir.Value, ir.Value]:
        """The base pointer and element index of an access: the arena's, or a partition
        chunk's own row room when the access lies in the row room."""
        if self.private and partition.in_row_room(arena.role, dtype, index, self.row_room):
            assert isinstance(index, loops.Index)
            start = self.row_room[dtype][0]
            terms = [(stride, self.value(term)) for stride, term in index.terms]
            return self.private[dtype], offset(self.b, index.base - start, terms)
        return self.arena(arena), self.value(index)

    def pointer(self, view: Strided, at: ir.Value | None = None) -> ir.Value:
        """The address of ``view``'s first element (``at`` elements in, if given)."""
        return self.b.gep(self.arena(view.arena), [i64(view.offset) if at is None else at],
                          inbounds=True, source_etype=TYPES[view.dtype])

    def _open_slots(self) -> None:
        """A stack slot per accumulator of the kernel (promoted to registers by LLVM),
        made before the first top-level statement that uses one."""
        entry = self.fn.entry_basic_block
        with self.b.goto_block(entry):
            self.b.position_at_start(entry)
            for acc in self.accumulators.values():
                self.slots[acc.name] = self.b.alloca(TYPES[acc.dtype])

    def slot(self, name: str) -> ir.Value:
        if not self.slots:
            self._open_slots()
        return self.slots[name]

    # values
    def value(self, expr: loops.Expr) -> ir.Value:
        if isinstance(expr, loops.Ref):
            if expr.name in self.accumulators:
                acc = self.accumulators[expr.name]
                return self.b.load(self.slot(expr.name), typ=TYPES[acc.dtype])
            return self.values[expr.name]
        if isinstance(expr, loops.Const):
            return constant(expr.value, expr.dtype)
        if isinstance(expr, loops.Index):
            terms = [(stride, self.value(term)) for stride, term in expr.terms]
            return offset(self.b, expr.base, terms)
        if isinstance(expr, loops.Load):
            base, index = self.address(expr.arena, expr.dtype, expr.index)
            return load(self.b, base, expr.dtype, index)
        return self.apply(expr)

    def apply(self, expr: loops.Apply) -> ir.Value:
        """One element of a registry op from the op table; a float32 op with an
        approximation (``lower/approximations.py``), unless exact math was asked for, is
        its scalar graph instead."""
        if expr.dtype == "float32" and self.approximate and expr.op in APPROXIMATIONS:
            self.tags += 1
            lets, value = expand(expr.op, expr.args[0], str(self.tags))
            for let in lets:
                self.s_let(let)
            return self.value(value)
        args = [self.value(a) for a in expr.args]
        element = ops.Element(self.b, expr.dtype, expr.operand)
        lowering = ops.LOWERINGS.get(expr.op)
        if lowering is None:
            raise CompileError(f"llvm backend: no lowering for op {expr.op!r}")
        return lowering(element, args)

    # statements
    def s_let(self, s: loops.Let) -> None:
        self.values[s.name] = self.value(s.value)
        if self.depth == 0:
            self.top_lets.append(s)

    def s_store(self, s: loops.Store) -> None:
        value = self.value(s.value)
        base, index = self.address(s.arena, s.dtype, s.index)
        store(self.b, value, base, s.dtype, index)

    def s_loop(self, s: loops.Loop) -> None:
        if s.annotations.partition and self.depth == 0:
            self._partitioned(s)
            return
        self.depth += 1
        with loop(self.b, s.extent, s.var) as index:
            self.values[s.var] = index
            self.block(s.body)
        self.depth -= 1

    def _partitioned(self, s: loops.Loop) -> None:
        """A partitioned loop: its chunks as a function ``chunk(ctx, c)`` over
        iterations ``[c * partition, min(extent, (c + 1) * partition))`` with ``ctx`` the
        kernel's arena pointers and a row room of its own (binding again the top-level
        ``Let``s the loop reads, ``partition.outer_lets``), called through the worker
        pool's ``tc_pool_run`` (``backends/pool.py``), which runs every chunk once."""
        chunk_type = ir.FunctionType(ir.VoidType(), [PTR, I64])
        name = f"{self.fn.name}.part{len(self.module.globals)}"
        chunk_fn = ir.Function(self.module, chunk_type, name)
        chunk_fn.linkage = "internal"
        outer = (self.fn, self.b, self.args, self.slots, self.private, self.values)
        self.fn, self.slots, self.values = chunk_fn, {}, dict(self.values)
        self.b = b = ir.IRBuilder(chunk_fn.append_basic_block("entry"))
        context, c = chunk_fn.args
        self.args = [b.load(b.gep(context, [i64(k)], inbounds=True, source_etype=PTR),
                            typ=PTR) for k in range(len(self.layout.arguments))]
        self.private = {d: b.alloca(TYPES[d], size=i64(end - start))
                        for d, (start, end) in self.row_room.items()}
        size = s.annotations.partition
        low = b.mul(c, i64(size), flags=["nuw", "nsw"])
        high = b.add(low, i64(size), flags=["nuw", "nsw"])
        high = b.select(b.icmp_signed("<", high, i64(s.extent)), high, i64(s.extent))
        self.depth = 1
        for let in partition.outer_lets(self.top_lets, s):
            self.values[let.name] = self.value(let.value)
        with loop(b, b.sub(high, low), s.var) as index:
            self.values[s.var] = self.b.add(low, index, flags=["nuw", "nsw"])
            self.block(s.body)
        self.depth = 0
        self.b.ret_void()
        self.fn, self.b, self.args, self.slots, self.private, self.values = outer
        b = self.b
        entry = self.fn.entry_basic_block
        with b.goto_block(entry):
            b.position_at_start(entry)
            context = b.alloca(PTR, size=i64(len(self.args)))
        for k, pointer in enumerate(self.args):
            b.store(pointer, b.gep(context, [i64(k)], inbounds=True, source_etype=PTR))
        run = self.module.globals.get(POOL_RUN)
        if run is None:
            run = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]),
                              POOL_RUN)
        b.call(run, [chunk_fn, context, i64(partition.chunks(s))])

    def s_init(self, s: loops.Init) -> None:
        acc = self.accumulators[s.name]
        self.b.store(constant(acc.identity.value, acc.identity.dtype), self.slot(s.name))

    def s_accumulate(self, s: loops.Accumulate) -> None:
        b, acc = self.b, self.accumulators[s.name]
        current = b.load(self.slot(s.name), typ=TYPES[acc.dtype])
        x = convert(b, self.value(s.value), s.dtype, acc.dtype)
        combined = ops.LOWERINGS[s.combine](ops.Element(b, acc.dtype, acc.dtype), [current, x])
        b.store(combined, self.slot(s.name))

    def s_check(self, s: loops.Check) -> None:
        """Return the plan's status for ``s.message`` unless ``0 <= value < size``."""
        status = self.layout.errors.index(s.message) + 1
        bad = self.b.icmp_unsigned(">=", self.value(s.value), i64(s.size))  # negative: huge
        ok = self.fn.append_basic_block("in_range")
        fail = self.fn.append_basic_block("out_of_range")
        self.b.cbranch(bad, fail, ok)
        self.b.position_at_end(fail)
        self.b.ret(i32(status))
        self.b.position_at_end(ok)

    def s_row_reduce(self, s: loops.RowReduce) -> None:
        base, at = self.address(Arena("scratch", s.dtype), s.dtype, loops.Index(s.start))
        row = self.b.gep(base, [at], inbounds=True, source_etype=TYPES[s.dtype])
        self.values[s.name] = self.rows.call(self.b, s.op, s.dtype, row, s.n)

    def s_gemm(self, s: loops.Gemm) -> None:
        """``np.dot`` of two BLAS-readable views as Numba's ``dot_3_mm`` calls BLAS:
        ``dot`` for two vectors, ``gemm`` otherwise, with its transposes and leading
        dimensions (a product with one vector side is a ``MatVec``)."""
        b = self.b
        m, kk, n, dtype = s.m, s.k, s.n, s.out.dtype
        kind = "s" if dtype == "float32" else "d"
        ty = TYPES[dtype]
        pa = self.pointer(s.a, self.value(s.a_at))
        pb = self.pointer(s.b, self.value(s.b_at))
        pc = self.pointer(s.out, self.value(s.out_at))
        if s.method == "tiles":
            self.tiles.call(b, dtype, pa, *s.a_steps, pb, *s.b_steps, pc, s.out_ld or n,
                            m, kk, n)
            return
        a_layout, b_layout = s.a_layout, s.b_layout
        if n == 1 and m == 1:
            fn = self._blas_function(f"{kind}dot", ty, 5)
            value = b.call(fn, [self._int(kk), pa, self._int(1), pb, self._int(1)])
            b.store(value, pc)
            return
        # M * M: C^T = B^T A^T in BLAS's column-major terms
        transa = "n" if b_layout == "C" else "t"
        lda = (s.b_ld or n) if b_layout == "C" else (s.b_ld or kk)
        transb = "n" if a_layout == "C" else "t"
        ldb = (s.a_ld or kk) if a_layout == "C" else (s.a_ld or m)
        fn = self._blas_function(f"{kind}gemm", ir.VoidType(), 13)
        b.call(fn, [self._char(transa), self._char(transb), self._int(n), self._int(m),
                    self._int(kk), self._scalar(1.0, dtype), pb, self._int(lda), pa,
                    self._int(ldb), self._scalar(0.0, dtype), pc, self._int(s.out_ld or n)])

    def s_mat_vec(self, s: loops.MatVec) -> None:
        """A product with a vector side: ``matvec.py``'s streaming loop of its form."""
        self.matvecs.call(self.b, s.form, s.out.dtype, self.pointer(s.matrix,
                                                                    self.value(s.matrix_at)),
                          s.ld, self.pointer(s.vector, self.value(s.vector_at)),
                          self.pointer(s.out, self.value(s.out_at)), s.k, s.n)

    def _blas_function(self, name: str, result: ir.Type, arity: int) -> ir.Function:
        symbol = f"{BLAS_PREFIX}{name}_"
        fn = self.module.globals.get(symbol)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(result, [PTR] * arity), symbol)
        return fn

    def _by_reference(self, ty: ir.Type, value: ir.Constant) -> ir.Value:
        """A stack slot holding ``value`` (Fortran BLAS takes every argument by
        reference)."""
        entry = self.fn.entry_basic_block
        with self.b.goto_block(entry):
            self.b.position_at_start(entry)
            slot = self.b.alloca(ty)
        self.b.store(value, slot)
        return slot

    def _int(self, value: int) -> ir.Value:
        return self._by_reference(I32, i32(value))

    def _char(self, letter: str) -> ir.Value:
        return self._by_reference(I8, ir.Constant(I8, ord(letter)))

    def _scalar(self, value: float, dtype: str) -> ir.Value:
        return self._by_reference(TYPES[dtype], constant(value, dtype))

    def s_sample(self, s: loops.Sample) -> None:
        scratch = [Arena("scratch", d) for d in ("float64", "float64", "int64", "int64")]
        room = tuple(self.b.gep(self.arena(arena), [i64(at)], inbounds=True,
                                source_etype=TYPES[arena.dtype])
                     for arena, at in zip(scratch, s.workspace))
        uniforms = self.b.gep(self.arena(scratch[0]), [i64(s.uniforms)], inbounds=True,
                              source_etype=TYPES["float64"])
        self.sampler.categorical(self.b, s, self.pointer(s.out), self.pointer(s.logits),
                                 uniforms, room)


#: the renderer of each statement kind of the loop program
STATEMENTS: dict[type, Callable[[Renderer, Any], None]] = {
    loops.Let: Renderer.s_let,
    loops.Store: Renderer.s_store,
    loops.Loop: Renderer.s_loop,
    loops.Init: Renderer.s_init,
    loops.Accumulate: Renderer.s_accumulate,
    loops.Check: Renderer.s_check,
    loops.RowReduce: Renderer.s_row_reduce,
    loops.Gemm: Renderer.s_gemm,
    loops.MatVec: Renderer.s_mat_vec,
    loops.Sample: Renderer.s_sample,
}


def render(program: Program, approximate: bool, profile: bool = False
           ) -> tuple[ir.Module, Layout]:
    """The module of ``program`` (with a step plan's update and entry points when it has
    a ``step``; with kernel counters and ``tc_profile`` when ``profile``) and its
    argument layout."""
    renderer = Renderer(program, approximate, profile)
    module = renderer.render()
    return module, renderer.layout


__all__ = ["render", "ENTRY_TYPE", "F32", "I64"]
