"""Our register-tiled products (``Gemm`` of method ``"tiles"``): chosen by shape and
vector width; the same bits on both compiled backends (which emit one tiled function)
at every thread count, within float32 rounding of the reference interpreter; both
vector widths and the Numba intrinsic equal to plain scalar chains of fused
multiply-adds; the Numba cache keyed by the function's source."""

from __future__ import annotations

import numpy as np
import pytest
from backends_agree import same_bits_everywhere

import tensorcode as tc
from tensorcode.compiler.lower import loops
from tensorcode.compiler.lower.partition import walk


def _product(form, m, k, n, seed=0):
    """``form``: ``"atb"`` a weight gradient ``x.T @ g``, ``"ab"`` ``x @ w``, ``"abt"``
    ``x @ w.T`` (its ``B`` read across rows: packed a panel at a time)."""
    rng = np.random.default_rng(seed)
    tape = tc.Tape()
    if form == "atb":
        x = tape.input(rng.normal(size=(k, m)).astype(np.float32), name="x")
        g = tape.input(rng.normal(size=(k, n)).astype(np.float32), name="g")
        y = x.T @ g
    else:
        x = tape.input(rng.normal(size=(m, k)).astype(np.float32), name="x")
        shape = (k, n) if form == "ab" else (n, k)
        w = tape.parameter(rng.normal(size=shape).astype(np.float32))
        y = x @ (w if form == "ab" else w.T)
    return tape.into_network(), y


@pytest.fixture
def avx512_rule(monkeypatch):
    """The choice of tiles as on a CPU with AVX-512 (where the rule tiles the most
    shapes), whatever this one has: the tiles themselves keep this CPU's width."""
    from tensorcode.compiler.lower import statements

    monkeypatch.setattr(statements, "vector_lanes", lambda: 16)


def _methods(network, y):
    kernels = network.entry([y]).lower("reference").program.loops
    return [s.method for kernel in kernels for s in walk(kernel.body)
            if isinstance(s, loops.Gemm)]


@pytest.mark.parametrize("form, m, k, n", [
    ("atb", 37, 300, 45),    # rows and columns left over from whole tiles and vectors
    ("atb", 64, 2048, 192),  # long shared dimension: split into partials on the pool
    ("ab", 2048, 33, 20),    # many rows: split by rows on the pool
    ("abt", 40, 70, 40),     # packed B
    ("abt", 24, 70, 100),    # more columns than rows: run transposed, A packed instead
])
def test_tiled_products_give_the_same_bits_on_every_backend_and_thread_count(
        avx512_rule, form, m, k, n):
    network, y = _product(form, m, k, n)
    assert _methods(network, y) == ["tiles"] * len(_methods(network, y)) != []
    same_bits_everywhere(network, y)


def test_batched_attention_products_are_tiled_per_head(avx512_rule):
    rng = np.random.default_rng(1)
    tape = tc.Tape()
    q = tape.input(rng.normal(size=(4, 64, 16)).astype(np.float32), name="q")
    v = tape.input(rng.normal(size=(4, 64, 16)).astype(np.float32), name="v")
    y = (q @ q.transpose((0, 2, 1))) @ v
    network = tape.into_network()
    assert _methods(network, y) == ["tiles", "tiles"]
    same_bits_everywhere(network, y)


def test_products_whose_panels_leave_the_cache_keep_blas():
    def suit(m, k, n, a="C", b="C", dtype="float32", lanes=16):
        return loops.tiles_suit(m, k, n, a, b, dtype, lanes)
    assert suit(128, 768, 2304) and suit(128, 768, 50257, b="F")  # GPT-2's, its head
    assert suit(128, 3072, 768)  # few rows walk a deeper panel few times
    assert suit(256, 8192, 256, a="F")  # a weight gradient x.T @ g
    assert not suit(2048, 2048, 2048)  # a panel of B leaves the cache
    assert not suit(64, 2048, 192, a="F", dtype="float64")
    assert not suit(64, 2048, 8, a="F")  # under a vector of columns
    assert not suit(4, 512, 64)  # under a tile of rows
    assert not suit(64, 2048, 64, b="F")  # too deep to pack
    # without AVX-512 only many rows over a short shared dimension are tiled
    assert suit(2048, 32, 128, lanes=8) and suit(512, 256, 256, lanes=8)
    assert not suit(128, 768, 2304, lanes=8) and not suit(64, 2048, 256, a="F", lanes=8)
    assert not suit(2048, 64, 96, b="F", lanes=8)
    network, y = _product("ab", 512, 2048, 512)
    assert _methods(network, y) and set(_methods(network, y)) == {"blas"}


def _tiles_function(lanes, packed, m, k, n):
    """``c = A @ B`` by ``TileProducts`` of ``lanes`` float32 lanes, compiled alone:
    ``A`` row-major ``m x k``, ``B`` ``k x n`` (``packed``: stored transposed)."""
    import ctypes

    import llvmlite.binding as llvm
    from llvmlite import ir

    from tensorcode.compiler.backends.llvm.types import PTR
    from tensorcode.compiler.backends.tiles import TileProducts

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module("tiles_alone")
    module.triple = llvm.get_process_triple()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * 3), "run")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    b_steps = (1, k) if packed else (n, 1)
    TileProducts(module, lanes).call(builder, "float32", fn.args[0], k, 1, fn.args[1],
                                     *b_steps, fn.args[2], n, m, k, n)
    builder.ret_void()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten())
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), machine)
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3)(engine.get_function_address("run"))

    def run(a, b):
        out = np.empty((m, n), np.float32)
        call(a.ctypes.data, b.ctypes.data, out.ctypes.data)
        return out
    run.engine = engine  # kept alive with the function
    return run


def _scalar_chains(a, b):
    """``a @ b`` as ``loops.Gemm`` defines the tiles' outputs: one chain of fused
    multiply-adds per output, in order, onto zero (written here as plainly as it reads)."""
    from numba import njit
    from numba.core.extending import intrinsic

    @intrinsic
    def fma(typingctx, x, y, z):
        def codegen(context, builder, signature, args):
            return builder.fma(*args)
        return x(x, y, z), codegen

    @njit
    def chains(a, b):
        out = np.zeros((a.shape[0], b.shape[1]), np.float32)
        for i in range(a.shape[0]):
            for j in range(b.shape[1]):
                acc = np.float32(0)
                for q in range(a.shape[1]):
                    acc = fma(a[i, q], b[q, j], acc)
                out[i, j] = acc
        return out
    return chains(a, b)


@pytest.mark.parametrize("packed", [False, True])
def test_both_vector_widths_and_the_numba_intrinsic_compute_the_chains(packed):
    # 8 lanes and 6-row tiles (AVX2) and 16 lanes and 8-row tiles (AVX-512), both run
    # here (where AVX-512 is missing LLVM splits the wider vectors), and the Numba
    # backend's intrinsic: every output the same chain of fused multiply-adds
    from numba import njit

    from tensorcode.compiler.backends.numba.intrinsics import tile_product

    m, k, n = 29, 131, 83  # rows, vectors and columns left over for both widths
    rng = np.random.default_rng(2)
    a = rng.normal(size=(m, k)).astype(np.float32)
    b = rng.normal(size=(n, k) if packed else (k, n)).astype(np.float32)
    want = _scalar_chains(a, b.T.copy() if packed else b)
    for lanes in (8, 16):
        assert np.array_equal(_tiles_function(lanes, packed, m, k, n)(a, b), want)

    @njit
    def numba_tiles(a, b, out, b_k, b_j):
        tile_product(a, 0, k, 1, b, 0, b_k, b_j, out, 0, n, m, k, n)
    out = np.empty(m * n, np.float32)
    numba_tiles(a.reshape(-1), b.reshape(-1), out, *((1, k) if packed else (n, 1)))
    assert np.array_equal(out.reshape(m, n), want)
    np.testing.assert_allclose(want, a @ (b.T if packed else b), rtol=1e-4, atol=1e-4)


def test_the_numba_cache_is_keyed_by_the_tiles_source():
    # a Numba plan runs the tiled product through an intrinsic, so its cached code
    # changes with tiles.py even when the generated module's text does not
    import json

    from tensorcode.compiler.backends.numba import backend
    from tensorcode.compiler.backends.plan_directory import source_digest

    emitted = json.loads(backend.environment_key())["emitted"]
    assert emitted == source_digest(backend._EMITTED_SOURCES)
    assert "tensorcode.compiler.backends.tiles" in backend._EMITTED_SOURCES
    without = source_digest(("tensorcode.compiler.backends.numba.intrinsics",))
    assert without != emitted
