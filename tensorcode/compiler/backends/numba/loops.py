"""The Numba backend's kernels: each loop kernel of a program as Python source.

``Generator(program).kernel(k, kernel)`` appends loop kernel ``k`` of
``program.loops`` (``lower/loops.py``) to the body of the plan's module
(``module.generate`` assembles the module around it; ``backend`` compiles and caches
it). The generator is a table of statement kinds (``STATEMENTS``) and the backend's op
table (``lowerings``): every loop becomes a ``for`` over ``range`` with a literal
extent, every load and store an index into a flat array named by ``Arena.label``, every
scalar op its template, so LLVM unrolls and vectorizes what the loop program spells out.

Only scalars are baked into the code: a 64-bit number as a literal, any other as a
``np.float32(...)``-style global cast to its dtype, so no computation silently widens
to float64 (an int32 result is wrapped back to int32, as Numba computes int32 in int64).
The one deliberate widening is the loop program's: float sums accumulate in float64. No
``parallel=True`` and no ``fastmath`` in the generated code: results match the reference
interpreter within dtype tolerances. The rows of two-pass reductions are reduced by the
vectorized helpers of ``intrinsics`` (the only code compiled with relaxed flags, each
saying why); matrix products by BLAS call ``np.dot`` on views, those with a vector
side the ``intrinsics`` loop of their ``MatVec`` form; a categorical draw's rows are
sampled by ``random_kernels``.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.dtypes import FLOAT_DTYPES, NUMPY, NUMPY_SOURCE
from ...core.ir import number_literal
from ...lower import loops
from ...lower.approximations import APPROXIMATIONS, expand
from ...lower.kernels import Arena, Strided
from ...lower.loops import LoopKernel
from ...lower.program import Program
from .lowerings import lowering

#: bump when generated code changes meaning (part of every cache key)
CODEGEN_VERSION = "11"

#: the ``intrinsics`` function reducing a row, by the row's reduction
_ROW_REDUCTION = {"sum": "row_sum", "max": "row_max", "min": "row_min"}

#: the ``intrinsics`` function computing a ``MatVec``, by its form
_MATVEC = {"dot": "matvec_dot", "axpy": "matvec_axpy"}

NP = NUMPY_SOURCE


class _Emitter:
    def __init__(self, indent: int = 1) -> None:
        self.lines: list[str] = []
        self.indent = indent

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def open(self, var: str, n: int) -> None:
        self.line(f"for {var} in range({n}):")
        self.indent += 1

    def close(self, count: int = 1) -> None:
        self.indent -= count


_ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "//=", "%=", "**=", "|=", "&=", "^=",
               ">>=", "<<="}


def _tokens(line: str) -> list[tokenize.TokenInfo]:
    return [t for t in tokenize.generate_tokens(io.StringIO(line).readline)
            if t.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING)]


def _assigned(tokens: list[tokenize.TokenInfo]) -> list[str]:
    """The plain names a line binds: ``for`` targets, and the names left of an
    assignment at bracket depth 0 (``W_f64[i] = ...`` binds nothing)."""
    if tokens and tokens[0].string == "for":
        end = next(i for i, t in enumerate(tokens) if t.string == "in")
        return [t.string for t in tokens[1:end] if t.type == tokenize.NAME]
    depth = 0
    groups: list[list[tokenize.TokenInfo]] = [[]]
    for t in tokens:
        if t.type == tokenize.OP and t.string in "([{":
            depth += 1
        elif t.type == tokenize.OP and t.string in ")]}":
            depth -= 1
        elif depth == 0 and t.type == tokenize.OP and t.string in _ASSIGN_OPS:
            return [g[0].string for g in groups if len(g) == 1 and g[0].type == tokenize.NAME]
        elif depth == 0 and t.type == tokenize.OP and t.string == ",":
            groups.append([])
            continue
        groups[-1].append(t)
    return []


def kernel_scoped(lines: list[str], k: int) -> list[str]:
    """Kernel ``k``'s lines with every name the kernel binds suffixed ``_k{k}``.

    Kernels rematerialize values under their node's name (``v6 = W_f64[1]`` in each
    kernel that reads node 6), so without this a name would be bound in many kernels;
    Numba's SSA pass rebuilds every such name over the whole function, which made it a
    large share of a big plan's compile time. Scoped, a name is bound in one kernel only
    and SSA is left with the loop-carried accumulators. Only names this generator bound
    are renamed (globals, arrays and attributes are not bound in a kernel); the source
    text comes from the generator alone, so the tokens are its own."""
    parsed = [(line, _tokens(line.strip())) for line in lines]
    bound = {name for _, tokens in parsed for name in _assigned(tokens)}
    if not bound:
        return list(lines)
    out = []
    for line, tokens in parsed:
        body = line.lstrip()
        pieces, last, previous = [], 0, None
        for t in tokens:
            if t.type == tokenize.NAME and t.string in bound and previous != ".":
                pieces += [body[last:t.start[1]], f"{t.string}_k{k}"]
                last = t.end[1]
            previous = t.string
        pieces.append(body[last:])
        out.append(line[:len(line) - len(body)] + "".join(pieces))
    return out


class Generator:
    def __init__(self, program: Program, approximate: bool = True) -> None:
        self.s = program
        self.approximate = approximate
        self.consts: dict[tuple[str, Any], str] = {}
        self.const_lines: list[str] = []
        self.out = _Emitter()
        self.tags = 0
        self.intrinsics: set[str] = set()
        self.samplers: set[str] = set()

    # -- names ----------------------------------------------------------------------
    def const(self, value: Any, dtype: str) -> str:
        text = number_literal(value, dtype)
        key = (dtype, text)
        if key not in self.consts:
            name = f"K{len(self.consts)}"
            self.consts[key] = name
            # the comment is the checked number itself, never text the node carried
            note = repr(float(value)) if dtype in FLOAT_DTYPES else text
            self.const_lines.append(f"{name} = {NP[dtype]}({text})  # {note}")
        return self.consts[key]

    def number(self, c: loops.Const) -> str:
        """A 64-bit number as a literal (Numba types a literal int64 or float64, exactly:
        ``repr`` of a float round-trips), any other as a typed global (``const``)."""
        if c.dtype == "int64" and -2 ** 31 < int(c.value) < 2 ** 31:
            return str(int(c.value))
        if c.dtype == "float64" and np.isfinite(c.value):
            return repr(float(c.value))
        return self.const(c.value, c.dtype)

    # -- kernels --------------------------------------------------------------------
    def kernel(self, k: int, kernel: LoopKernel) -> None:
        e = self.out
        e.line(f"# kernel {k}: {kernel.title}")
        start = len(e.lines)
        self.accumulators = {a.name: a for a in kernel.accumulators}
        self.block(kernel.body)
        e.lines[start:] = kernel_scoped(e.lines[start:], k)

    def block(self, body: Any) -> None:
        for stmt in body:
            STATEMENTS[type(stmt)](self, stmt)

    # values
    def value(self, expr: loops.Expr) -> str:
        if isinstance(expr, loops.Ref):
            return expr.name
        if isinstance(expr, loops.Const):
            return self.number(expr)
        if isinstance(expr, loops.Index):
            terms = [] if expr.base == 0 else [str(expr.base)]
            for stride, term in expr.terms:
                if stride == 0:
                    continue
                name = self.operand(term)
                terms.append(name if stride == 1 else f"{name} * {stride}")
            return " + ".join(terms) if terms else "0"
        if isinstance(expr, loops.Load):
            return f"{expr.arena.label}[{self.value(expr.index)}]"
        return self.apply(expr)

    def operand(self, expr: loops.Expr) -> str:
        """``expr`` as an operand of a larger expression (parenthesized if compound)."""
        text = self.value(expr)
        compound = isinstance(expr, (loops.Apply, loops.Index)) and \
            not text.isidentifier() and not text.isdigit()
        return f"({text})" if compound or text.startswith("-") else text

    def apply(self, expr: loops.Apply) -> str:
        """The op's template in ``lowerings``; a float32 op with an approximation
        (``lower/approximations.py``), unless exact math was asked for, is its scalar
        graph instead: its statements first, then its value."""
        dtype = expr.dtype
        if dtype == "float32" and self.approximate and expr.op in APPROXIMATIONS:
            self.tags += 1
            lets, value = expand(expr.op, expr.args[0], str(self.tags))
            for let in lets:
                self.s_let(let)
            return self.value(value)
        args = [self.operand(a) for a in expr.args]
        row = lowering(expr.op)
        self.intrinsics |= row.intrinsics
        template = row.template  # a constant is made only where the template reads it
        named = {"one": (1, dtype), "zero": (0, dtype), "zero0": (0, expr.operand)}
        text = template.format(*args, np_dtype=NP[dtype], **{
            key: self.const(v, d) for key, (v, d) in named.items() if f"{{{key}}}" in template})
        return f"np.int32({text})" if dtype == "int32" else text

    # statements
    def s_let(self, s: loops.Let) -> None:
        self.out.line(f"{s.name} = {self.value(s.value)}")

    def s_store(self, s: loops.Store) -> None:
        value = self.value(s.value)
        self.out.line(f"{s.arena.label}[{self.value(s.index)}] = {value}")

    def s_loop(self, s: loops.Loop) -> None:
        self.out.open(s.var, s.extent)
        self.block(s.body)
        self.out.close()

    def s_init(self, s: loops.Init) -> None:
        identity = self.accumulators[s.name].identity
        self.out.line(f"{s.name} = {self.value(identity)}")

    def s_accumulate(self, s: loops.Accumulate) -> None:
        # the value widens to the accumulator's dtype as Numba types the expression
        acc = self.accumulators[s.name]
        combined = loops.Apply(s.combine, (loops.Ref(s.name), s.value), acc.dtype, acc.dtype)
        self.out.line(f"{s.name} = {self.value(combined)}")

    def s_check(self, s: loops.Check) -> None:
        value = self.operand(s.value)
        self.out.line(f"if {value} < 0 or {value} >= {int(s.size)}:")
        self.out.line(f"    raise IndexError({s.message!r})")

    def s_row_reduce(self, s: loops.RowReduce) -> None:
        fn = _ROW_REDUCTION[s.op]
        self.intrinsics.add(fn)
        row = Arena("scratch", s.dtype).label
        self.out.line(f"{s.name} = {fn}({row}[{s.start}:{s.start + s.n}])")

    def s_gemm(self, s: loops.Gemm) -> None:
        if s.method == "tiles":
            self.intrinsics.add("tile_product")
            (a_i, a_k), (b_k, b_j) = s.a_steps, s.b_steps
            self.out.line(f"tile_product({s.a.arena.label}, {self.operand(s.a_at)}, {a_i}, "
                          f"{a_k}, {s.b.arena.label}, {self.operand(s.b_at)}, {b_k}, {b_j}, "
                          f"{s.out.arena.label}, {self.operand(s.out_at)}, "
                          f"{s.out_ld or s.n}, {s.m}, {s.k}, {s.n})")
            return
        def view(loc: Strided, at: loops.Expr, layout: str, rows: int, cols: int) -> str:
            start = self.operand(at)
            span = f"{loc.arena.label}[{start}:{start} + {rows * cols}]"
            if layout == "C":
                return f"{span}.reshape(({rows}, {cols}))"
            return f"{span}.reshape(({cols}, {rows})).T"

        def strided(loc: Strided, at: loops.Expr, shape: tuple[int, int],
                    strides: tuple[int, int]) -> str:
            start, item = self.operand(at), NUMPY[loc.dtype].itemsize
            return (f"np.lib.stride_tricks.as_strided({loc.arena.label}[{start}:], "
                    f"shape={shape}, strides=({strides[0] * item}, {strides[1] * item}))")

        def operand(loc: Strided, at: loops.Expr, layout: str, rows: int, cols: int,
                    ld: int) -> str:
            """An operand in place, or a block of a larger one (``ld``) packed first
            (``np.dot`` would copy it, with a warning, to call BLAS: BLAS packs it again
            either way)."""
            if not ld:
                return view(loc, at, layout, rows, cols)
            steps = (ld, 1) if layout == "C" else (1, ld)
            return f"np.ascontiguousarray({strided(loc, at, (rows, cols), steps)})"

        a = operand(s.a, s.a_at, s.a_layout, s.m, s.k, s.a_ld)
        b = operand(s.b, s.b_at, s.b_layout, s.k, s.n, s.b_ld)
        if s.out_ld:  # a block of the output's columns: BLAS writes a packed one
            self.out.line(f"{strided(s.out, s.out_at, (s.m, s.n), (s.out_ld, 1))}[:, :] = "
                          f"np.dot({a}, {b})")
            return
        self.out.line(f"np.dot({a}, {b}, {view(s.out, s.out_at, 'C', s.m, s.n)})")

    def s_sample(self, s: loops.Sample) -> None:
        """A call of ``random_kernels.sample_rows``; every argument is a number the
        generator formats itself."""
        out, logits = s.out, s.logits
        temperature = self.const(s.attrs["temperature"], "float64")
        top_p = self.const(s.attrs["top_p"], "float64")
        uniforms = Arena("scratch", "float64").label
        self.samplers.add("sample_rows")
        self.out.line(f"sample_rows({out.arena.label}, {out.offset}, {out.size}, "
                      f"{logits.arena.label}, {logits.offset}, {int(logits.shape[-1])}, "
                      f"{uniforms}, {s.uniforms}, {temperature}, {int(s.attrs['top_k'])}, "
                      f"{top_p})")

    def s_mat_vec(self, s: loops.MatVec) -> None:
        """A product with a vector side: ``intrinsics``' loop of its form."""
        fn = _MATVEC[s.form]
        self.intrinsics.add(fn)
        self.out.line(f"{fn}({s.matrix.arena.label}, {self.operand(s.matrix_at)}, {int(s.ld)}, "
                      f"{s.vector.arena.label}, {self.operand(s.vector_at)}, "
                      f"{s.out.arena.label}, {self.operand(s.out_at)}, {int(s.k)}, {int(s.n)})")


#: the writer of each statement kind of the loop program
STATEMENTS: dict[type, Callable[[Generator, Any], None]] = {
    loops.Let: Generator.s_let,
    loops.Store: Generator.s_store,
    loops.Loop: Generator.s_loop,
    loops.Init: Generator.s_init,
    loops.Accumulate: Generator.s_accumulate,
    loops.Check: Generator.s_check,
    loops.RowReduce: Generator.s_row_reduce,
    loops.Gemm: Generator.s_gemm,
    loops.MatVec: Generator.s_mat_vec,
    loops.Sample: Generator.s_sample,
}


__all__ = ["CODEGEN_VERSION", "NP", "Generator", "STATEMENTS", "kernel_scoped"]
