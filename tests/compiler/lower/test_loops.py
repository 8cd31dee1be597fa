"""The loop program: every kernel kind lowers to its statements, and the statements
alone compute what the reference computes (a small interpreter here runs them)."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_graphs import TOLERANCE, mlp_program, random_program

import tensorcode as tc
from tensorcode.compiler.core import philox, registry
from tensorcode.compiler.lower import loops
from tensorcode.compiler.lower.kernels import Arena
from tensorcode.compiler.lower.program import Program


def program_of(entry) -> Program:
    return entry.lower("reference").program


# ---------------------------------------------------------------------------------------
# an interpreter of the loop program: one scalar at a time, ops by the registry's rules


class Interpreter:
    def __init__(self, program: Program) -> None:
        self.p = program
        g = program.graph
        self.arrays: dict[Arena, np.ndarray] = {}
        for array in program.parameters:
            self.arrays[array.arena] = np.zeros(array.size, array.dtype)
        for node, dtype, offset in program.parameter_nodes:
            value = np.asarray(g.nodes[node].value).reshape(-1)
            self.arrays[Arena("parameter", dtype)][offset:offset + value.size] = value
        for array, node in zip(program.constants, program.constant_nodes):
            self.arrays[array.arena] = np.asarray(g.nodes[node].value, array.dtype).reshape(-1)
        for array, node in zip(program.inputs, program.input_nodes):
            self.arrays[array.arena] = np.asarray(g.nodes[node].value, array.dtype).reshape(-1)
        for array in program.scratch + program.outputs:
            self.arrays[array.arena] = np.full(array.size, 7, array.dtype)  # not zeros

    def run(self) -> list[np.ndarray]:
        for kernel in self.p.loops:
            self.values: dict[str, np.generic] = {}
            self.accumulators = {a.name: a for a in kernel.accumulators}
            self.block(kernel.body)
        return [self.arrays[Arena("output", r.dtype)][r.offset:r.offset + int(np.prod(r.shape))]
                .reshape(r.shape) for r in self.p.roots]

    def block(self, body) -> None:
        for s in body:
            getattr(self, type(s).__name__)(s)

    def value(self, e):
        if isinstance(e, loops.Const):
            return np.array(e.value).astype(e.dtype)[()]
        if isinstance(e, loops.Ref):
            return self.values[e.name]
        if isinstance(e, loops.Index):
            return np.int64(e.base + sum(s * int(self.value(t)) for s, t in e.terms))
        if isinstance(e, loops.Load):
            return self.arrays[e.arena][int(self.value(e.index))]
        args = [np.asarray(self.value(a)) for a in e.args]
        if e.op == "astype":
            return args[0].astype(e.dtype)[()]
        attrs = {"dtype": e.dtype} if e.op == "bitcast" else {}
        with np.errstate(all="ignore"):
            result = registry.REGISTRY[e.op].reference(args, attrs)
        return np.asarray(result).astype(e.dtype)[()]

    def Let(self, s):
        self.values[s.name] = self.value(s.value)

    def Store(self, s):
        value = self.value(s.value)
        self.arrays[s.arena][int(self.value(s.index))] = value

    def Loop(self, s):
        for i in range(s.extent):
            self.values[s.var] = np.int64(i)
            self.block(s.body)

    def Init(self, s):
        self.values[s.name] = self.value(self.accumulators[s.name].identity)

    def Accumulate(self, s):
        acc = self.accumulators[s.name]
        x = np.asarray(self.value(s.value)).astype(acc.dtype)
        self.values[s.name] = self.value(loops.Apply(s.combine, (loops.Ref(s.name), loops.Const(
            x[()], acc.dtype)), acc.dtype, acc.dtype))

    def Check(self, s):
        if not 0 <= int(self.value(s.value)) < s.size:
            raise IndexError(s.message)

    def RowReduce(self, s):
        row = self.arrays[Arena("scratch", s.dtype)][s.start:s.start + s.n]
        fn = {"sum": lambda r: r.astype(np.float64).sum(), "max": np.max, "min": np.min}[s.op]
        self.values[s.name] = np.asarray(fn(row)).astype(s.result)[()]

    def Sample(self, s):
        classes = s.logits.shape[-1]
        logits = self.arrays[s.logits.arena][s.logits.offset:s.logits.offset + s.logits.size]
        uniforms = self.arrays[Arena("scratch", "float64")]
        for r in range(s.out.size):
            z = logits[r * classes:(r + 1) * classes].astype(np.float64) / s.attrs["temperature"]
            self.arrays[s.out.arena][s.out.offset + r] = philox.categorical_row(
                z, uniforms[s.uniforms + r], s.attrs["top_k"], s.attrs["top_p"])

    def Gemm(self, s):
        def view(loc, at, layout, rows, cols):
            start = int(self.value(at))
            flat = self.arrays[loc.arena][start:start + rows * cols]
            return flat.reshape(rows, cols) if layout == "C" else flat.reshape(cols, rows).T
        product = view(s.a, s.a_at, s.a_layout, s.m, s.k) @ view(s.b, s.b_at, s.b_layout,
                                                                 s.k, s.n)
        start = int(self.value(s.out_at))
        self.arrays[s.out.arena][start:start + s.m * s.n] = product.reshape(-1)


    def MatVec(self, s):
        # the order ``loops.MatVec`` fixes, one correctly rounded op at a time
        matrix, vector = self.arrays[s.matrix.arena], self.arrays[s.vector.arena]
        at = int(self.value(s.matrix_at))
        v = vector[int(self.value(s.vector_at)):][:s.k]
        if s.form == "dot":
            terms = np.stack([matrix[at + j * s.ld:][:s.k] for j in range(s.n)]) * v
            lanes = np.zeros((s.n, loops.MATVEC_LANES), terms.dtype)
            for q in range(s.k):
                lanes[:, q % loops.MATVEC_LANES] = lanes[:, q % loops.MATVEC_LANES] + terms[:, q]
            width = loops.MATVEC_LANES // 2
            while width:
                lanes[:, :width] = lanes[:, :width] + lanes[:, width:2 * width]
                width //= 2
            result = lanes[:, 0]
        else:
            result = np.zeros(s.n, matrix.dtype)
            for q in range(s.k):
                result = result + v[q] * matrix[at + q * s.ld:][:s.n]
        start = int(self.value(s.out_at))
        self.arrays[s.out.arena][start:start + s.n] = result


def interpreted(entry):
    return Interpreter(program_of(entry)).run()


def check_against_reference(entry, dtype):
    plan = entry.lower("reference")
    run = plan.forward(plan.network.parameters())
    expected = [run.of(plan.network.symbol(r)) for r in plan.roots]
    for got, want in zip(interpreted(entry), expected, strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   **TOLERANCE[dtype])


@pytest.mark.parametrize("seed", range(6))
def test_the_statements_alone_compute_what_the_reference_computes(seed):
    network, _loss, adjoints, extras = random_program(seed, "float64", steps=10)
    check_against_reference(network.entry(list(adjoints.roots()) + list(extras)), "float64")


def test_rows_blas_and_gathers_compute_the_reference():
    # a batch of 40 rows: softmax rows over 20 classes (two-pass rows), BLAS products,
    # an embedding's take and its scatter-add gradient
    network, _loss, adjoints, _ = mlp_program((6, 48, 20), batch=40, loss="xent",
                                              dtype="float64", embedding=(11, 3, 2))
    entry = network.entry(list(adjoints.roots()))
    program = program_of(entry)
    kinds = {type(s) for k in program.loops for s in k.statements()}
    assert {loops.RowReduce, loops.Gemm, loops.Check, loops.Accumulate} <= kinds
    check_against_reference(entry, "float64")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_products_with_a_vector_side_stream_in_the_order_the_loop_program_fixes(dtype):
    # each form, with a row length that leaves lanes over (k % 16 != 0); both compiled
    # backends compute the interpreter's bits (products and sums correctly rounded, in
    # the statement's order), and the reference within tolerance
    rng = np.random.default_rng(3)
    tape = tc.Tape()
    x = tape.input(rng.normal(size=(1, 203)).astype(dtype), name="x")
    columns = tape.parameter(rng.normal(size=(203, 171)).astype(dtype))  # axpy
    rows = tape.parameter(rng.normal(size=(190, 203)).astype(dtype))  # dot
    keys = tape.input(rng.normal(size=(3, 40, 16)).astype(dtype), name="keys")
    query = tape.input(rng.normal(size=(3, 1, 16)).astype(dtype), name="query")
    roots = [x @ columns, x @ rows.T, rows @ x.reshape(203, 1), query @ keys.transpose(0, 2, 1)]
    network = tape.into_network()
    entry = network.entry(roots)
    forms = sorted(s.form for k in program_of(entry).loops for s in k.statements()
                   if isinstance(s, loops.MatVec))
    assert forms == ["axpy", "dot", "dot", "dot"]  # the keys are read in place
    check_against_reference(entry, dtype)
    want = interpreted(entry)
    for backend in ("llvm", "numba"):
        plan = entry.lower(backend)
        run = plan.forward(network.parameters())
        for root, expected in zip(roots, want, strict=True):
            assert np.array_equal(run.of(root), expected), backend


def test_an_index_out_of_range_stops_at_its_check():
    tape = tc.Tape()
    table = tape.input(np.arange(12.0).reshape(4, 3), name="table")
    index = tape.input(np.array([0, 9]), name="index")
    taken = table.take(index, axis=0)
    entry = tape.into_network().entry([taken])
    with pytest.raises(IndexError, match="take: an index is out of range for an axis of size 4"):
        interpreted(entry)
    assert loops.errors(program_of(entry).loops) == [
        "take: an index is out of range for an axis of size 4"]


# ---------------------------------------------------------------------------------------
# the records


def test_reduction_identities_and_accumulator_dtypes():
    assert loops.identity("sum", "float32") == loops.Const(0, "float32")
    assert loops.identity("max", "float64").value == -np.inf
    assert loops.identity("min", "int32").value == np.iinfo(np.int32).max
    assert loops.accumulator_dtype("sum", "float32") == "float64"
    assert loops.accumulator_dtype("mean", "int32") == "int64"
    assert loops.accumulator_dtype("max", "float32") == "float32"


def test_every_kernel_kind_lowers_and_loops_carry_annotations():
    network, _loss, adjoints, extras = random_program(3, "float32", steps=14, parts=2)
    entry = network.entry(list(adjoints.roots()) + list(extras))
    program = program_of(entry)
    assert len(program.loops) == len(program.kernels)
    for kernel, loop_kernel in zip(program.kernels, program.loops):
        assert loop_kernel.title.startswith(kernel.kind)
        assert tuple(kernel.nodes) == loop_kernel.nodes
        for s in loop_kernel.statements():
            assert isinstance(s, loops.Stmt)
            if isinstance(s, loops.Loop):
                assert s.annotations == loops.Annotations()  # nothing decided yet
                assert s.extent >= 0


def test_categorical_workspace_lies_in_scratch_past_the_rows():
    tape = tc.Tape()
    key = tape.random_key()
    logits = tape.input(np.random.default_rng(1).normal(size=(6, 9)), name="logits")
    roots = [tc.random.categorical(key, logits.T.T * 1.0),
             tc.random.categorical(key, logits.T, top_p=0.5)]
    entry = tape.into_network().entry(roots)
    program = program_of(entry)
    sizes = {a.dtype: a.size for a in program.scratch}
    samples = [s for k in program.loops for s in k.statements()
               if isinstance(s, loops.Sample)]
    assert len(samples) == 2
    for sample in samples:
        z, cumulative, order, work = sample.workspace
        assert cumulative + 9 <= sizes["float64"] and work + 9 <= sizes["int64"]
        assert sample.uniforms + 6 <= sizes["float64"]
        assert len({z, cumulative, sample.uniforms}) == 3
        assert sample.logits.contiguous
        end = sample.logits.offset + sample.logits.size
        assert sample.logits.arena.role != "scratch" or end <= sizes[sample.logits.dtype]


def test_every_random_draw_interprets_to_the_reference_bits():
    """The Philox stream is loop-program statements: interpreted with the registry's
    references they draw what the reference backend draws (``core/philox.py``)."""
    tape = tc.Tape()
    key = tape.random_key()
    logits = tape.input(np.random.default_rng(1).normal(size=(5, 7)), name="logits")
    roots = [tc.random.random_uniform(key, (3, 5)), tc.random.random_uniform(key, (7,), "float64"),
             tc.random.random_normal(key, (3,)), tc.random.random_normal(key, (2,), "float64"),
             tc.random.bernoulli(key, 0.3, (6,), "int32"),
             tc.random.categorical(key, logits, 0.8, top_k=4, top_p=0.9)]
    network = tape.into_network()
    entry = network.entry(roots)
    state = np.array([5, -3, 2**32 - 2, 7], np.int64)  # a low word that carries
    run = entry.lower("reference").forward(network.parameters(), {network.inputs()[0]: state})
    interpreter = Interpreter(program_of(entry))
    (arena,) = [a.arena for a in interpreter.p.inputs if a.dtype == "int64"]
    interpreter.arrays[arena] = state
    for got, root in zip(interpreter.run(), roots, strict=True):
        want = run.of(root)
        assert got.dtype == want.dtype and np.array_equal(got, want), root


def test_each_renderer_has_a_row_for_every_statement_kind():
    from tensorcode.compiler.backends.llvm.codegen import STATEMENTS as LLVM
    from tensorcode.compiler.backends.numba.loops import STATEMENTS as NUMBA

    kinds = set(loops.Stmt.__args__)
    assert set(LLVM) == kinds and set(NUMBA) == kinds


def test_a_float32_program_widens_only_its_accumulators():
    """No float32 op reads a float64 value: float64 appears only where the loop
    program accumulates (a sum's register, a mean's count, the rounding back)."""
    network, _loss, adjoints, _ = mlp_program((4, 16, 1), batch=48, dtype="float32")
    program = program_of(network.entry(list(adjoints.roots())))
    wide = {a.name for k in program.loops for a in k.accumulators}
    wide |= {s.name for k in program.loops for s in k.statements()
             if isinstance(s, loops.RowReduce) and s.result == "float64"}
    assert wide

    def check(e) -> None:
        if isinstance(e, loops.Const):
            assert e.dtype != "float64", e  # only as a mean's count, below
        elif isinstance(e, loops.Apply):
            for a in e.args:
                if isinstance(a, loops.Const) and a.dtype == "float64":
                    assert e.op == "div" and e.args[0] in [loops.Ref(w) for w in wide], e
                else:
                    check(a)
        elif isinstance(e, loops.Load):
            check(e.index)

    for kernel in program.loops:
        for s in kernel.statements():
            if isinstance(s, (loops.Let, loops.Store)):
                check(s.value)
