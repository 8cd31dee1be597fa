"""The Numba backend's kernel loops: each kernel of a schedule as Python source.

``Generator(program).kernel(k, kernel)`` appends kernel ``k`` to the body of the plan's
module (``module.generate`` assembles the module around it; ``backend``
compiles and caches it). Every kernel becomes explicit loops over flat arrays (strides
and sizes are literals, so LLVM unrolls and vectorizes); matmuls above
``LOOP_MATMUL_LIMIT`` call ``np.dot`` (BLAS) on contiguous or transposed views. Each
``Arena`` of the program is one array argument or local, named by ``Arena.label``.

Only scalars are baked into the code, each cast to its node's dtype (``np.float32(...)``
globals), so no computation silently widens to float64. The one deliberate widening: a
float32 sum or mean reduced into a register accumulates in float64 and rounds once when
stored. No ``parallel=True`` and no ``fastmath`` in the generated code: results match
the reference interpreter within dtype tolerances. A float reduction over the innermost
loop runs in two passes (``row_terms``): the terms go to a row of scratch, reduced by a
vectorized helper of ``intrinsics`` (the only code compiled with relaxed flags, each
saying why); the program's scratch arenas have room for the rows (``lower/layout.py``).
"""

from __future__ import annotations

import io
import math
import tokenize
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core import philox
from ...core import registry as primitives
from ...core.dtypes import DTYPES, NUMPY_SOURCE
from ...core.ir import number_literal
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
from ...lower.layout import coalesce, fused_layout, row_terms
from ...lower.program import Program
from ...lower.schedule import blas_layout
from .lowerings import lowering

#: bump when generated code changes meaning (part of every cache key)
CODEGEN_VERSION = "6"

#: the ``intrinsics`` function reducing a row, by reduction op
_ROW_REDUCTION = {"sum": "row_sum", "mean": "row_sum", "max": "row_max", "min": "row_min"}

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
        self.kernel_index = 0
        self.uses_pow2 = False
        self.row_reductions: set[str] = set()
        self.random_fills: set[str] = set()

    # -- names ----------------------------------------------------------------------
    def const(self, value: Any, dtype: str) -> str:
        text = number_literal(value, dtype)
        key = (dtype, text)
        if key not in self.consts:
            name = f"K{len(self.consts)}"
            self.consts[key] = name
            # the comment is the checked number itself, never text the node carried
            note = repr(float(value)) if dtype in ("float32", "float64") else text
            self.const_lines.append(f"{name} = {NP[dtype]}({text})  # {note}")
        return self.consts[key]

    def base(self, loc: Strided) -> tuple[str, int]:
        """The flat array holding ``loc`` and the element offset of its start."""
        return loc.arena.label, loc.offset

    def index(self, offset: Any, strides: Sequence[int], names: Sequence[str]) -> str:
        terms = [] if offset == 0 else [str(offset)]
        for s, n in zip(strides, names):
            if s == 0:
                continue
            terms.append(n if s == 1 else f"{n} * {s}")
        return " + ".join(terms) if terms else "0"

    def access(self, loc: Any, strides: Sequence[int], names: Sequence[str],
               extra: str | None = None) -> str:
        if isinstance(loc, Scalar):
            return self.const(loc.value, loc.dtype)
        array, offset = self.base(loc)
        idx = self.index(offset, strides, names)
        if extra:
            idx = extra if idx == "0" else f"{idx} + {extra}"
        return f"{array}[{idx}]"

    # -- kernels --------------------------------------------------------------------
    def kernel(self, k: int, kernel: Kernel) -> None:
        self.kernel_index = k
        e = self.out
        e.line(f"# kernel {k}: {kernel.kind} {' '.join('%' + str(i) for i in kernel.nodes)}")
        start = len(e.lines)
        getattr(self, f"k_{kernel.kind}")(kernel)
        e.lines[start:] = kernel_scoped(e.lines[start:], k)

    def k_fused(self, kernel: FusedKernel) -> None:
        g, e = self.s.graph, self.out
        layout = fused_layout(g, kernel)
        stores: dict[int, Strided] = kernel.stores
        loads: dict[int, Any] = kernel.loads
        members = kernel.nodes
        dims, reductions, local = layout.dims, layout.reductions, layout.local
        load_keys, load_vec = layout.load_keys, layout.load_vec
        store_vec, red_vec = layout.store_vec, layout.red_vec
        names = [f"i{d}" for d in range(len(dims))]
        for r in reductions:
            if r not in local:  # accumulated in place: the stores start at the identity
                self._fill(stores[r], self._init(g.nodes[r]), g.nodes[r].type.dtype)
        pre: dict[int, list[int]] = {}
        for r, d in local.items():
            pre.setdefault(d, []).append(r)
        # each row in scratch past the schedule's own arena (``scratch_sizes``)
        rows: dict[int, tuple[str, int]] = {}
        offsets = dict(self.s.row_start)
        for r, dtype in row_terms(g, layout):
            base = offsets.get(dtype, 0)
            offsets[dtype] = base + dims[-1]
            rows[r] = (Arena("scratch", dtype).label, base)
            self.row_reductions.add(_ROW_REDUCTION[g.nodes[r].op])

        def open_level(d: int) -> None:
            for r in pre.get(d, []):
                if r in rows:
                    continue
                node = g.nodes[r]
                e.line(f"a{r} = {self._acc_init(node)}")

        def close_level(d: int) -> None:
            for r in pre.get(d, []):
                node = g.nodes[r]
                if r in rows:
                    row, base = rows[r]
                    e.line(f"a{r} = {_ROW_REDUCTION[node.op]}({row}[{base}:"
                           f"{base + dims[-1]}])")
                value = f"a{r}"
                dtype = node.type.dtype
                if node.op == "mean":
                    count = self._count(r)
                    value = f"{value} / {count}.0" if node.type.is_float else value
                target = self.access(stores[r], red_vec[r][:d], names[:d])
                e.line(f"{target} = {NP[dtype]}({value})")

        for d in range(len(dims)):
            open_level(d)
            e.open(names[d], dims[d])
        open_level(len(dims))
        for j, loc in loads.items():
            if isinstance(loc, Scalar):
                e.line(f"v{j} = {self.const(loc.value, loc.dtype)}")
        for j in load_keys:
            e.line(f"v{j} = {self.access(loads[j], load_vec[j], names)}")
        for i in members:
            node = g.nodes[i]
            if primitives.is_reduction(node.op):
                x = f"v{node.inputs[0]}"
                if i in rows:
                    row, base = rows[i]
                    e.line(f"{row}[{base} + {names[-1]}] = {x}")
                elif i in local:
                    if node.op in ("sum", "mean"):
                        e.line(f"a{i} += {x}")
                    else:
                        fn = "np.maximum" if node.op == "max" else "np.minimum"
                        e.line(f"a{i} = {fn}(a{i}, {x})")
                else:
                    target = self.access(stores[i], red_vec[i], names)
                    if node.op in ("sum", "mean"):
                        e.line(f"{target} = {self._wrap(f'{target} + {x}', node.type.dtype)}")
                    else:
                        fn = "np.maximum" if node.op == "max" else "np.minimum"
                        e.line(f"{target} = {fn}({target}, {x})")
                continue
            self._elementwise(i, node)
            if i in store_vec:
                e.line(f"{self.access(stores[i], store_vec[i], names)} = v{i}")
        close_level(len(dims))
        for d in range(len(dims) - 1, -1, -1):
            e.close()
            close_level(d)
        for r in reductions:
            node = g.nodes[r]
            if r not in local and node.op == "mean" and node.type.is_float:
                loc = stores[r]
                array, offset = self.base(loc)
                count = self.const(self._count(r), node.type.dtype)
                v = f"q{self.kernel_index}"
                e.open(v, loc.size)
                e.line(f"{array}[{self.index(offset, [1], [v])}] = "
                       f"{array}[{self.index(offset, [1], [v])}] / {count}")
                e.close()

    def _count(self, r: int) -> int:
        node = self.s.graph.nodes[r]
        shape = self.s.graph.nodes[node.inputs[0]].type.shape
        return math.prod(shape[a] for a in node.attr("axis"))

    def _init(self, node: Any) -> str:
        dtype = node.type.dtype
        if node.op in ("sum", "mean"):
            return self.const(0, dtype)
        if node.type.is_float:
            return self.const(-np.inf if node.op == "max" else np.inf, dtype)
        info = np.iinfo(dtype)
        return self.const(info.min if node.op == "max" else info.max, dtype)

    def _acc_init(self, node: Any) -> str:
        if node.op in ("sum", "mean"):
            return "0.0" if node.type.is_float else "0"
        return self._init(node)

    def _wrap(self, text: str, dtype: str) -> str:
        return f"np.int32({text})" if dtype == "int32" else text

    def _elementwise(self, i: int, node: Any) -> None:
        """Assign ``v{i}`` from the op's row in ``lowerings``: its float32 approximation
        when the row has one and approximations are on, else its scalar template."""
        args = [f"v{j}" for j in node.inputs]
        dtype = node.type.dtype
        row = lowering(node.op)
        if row.approx_f32 is not None and dtype == "float32" and self.approximate:
            code = row.approx_f32(args, str(i), lambda value: self.const(value, dtype))
            for line in code.lines:
                self.out.line(line)
            self.uses_pow2 = self.uses_pow2 or "pow2_float32" in code.intrinsics
            self.out.line(f"v{i} = {code.value}")
            return
        operand = self.s.graph.nodes[node.inputs[0]].type.dtype if node.inputs else dtype
        text = row.template.format(*args, one=self.const(1, dtype), zero=self.const(0, dtype),
                                   zero0=self.const(0, operand), np_dtype=NP[dtype])
        self.out.line(f"v{i} = {self._wrap(text, dtype)}")

    def _fill(self, loc: Strided, value: str, dtype: str) -> None:
        e = self.out
        array, offset = self.base(loc)
        v = f"z{self.kernel_index}"
        e.open(v, loc.size)
        e.line(f"{array}[{self.index(offset, [1], [v])}] = {value}")
        e.close()

    def _nest(self, dims: Sequence[int], prefix: str) -> list[str]:
        names = [f"{prefix}{d}" for d in range(len(dims))]
        for n, d in zip(names, dims):
            self.out.open(n, d)
        return names

    def k_copy(self, kernel: CopyKernel) -> None:
        src, dst = kernel.src, kernel.dst
        shape = dst.shape
        vectors = [list(dst.strides)]
        if isinstance(src, Strided):
            vectors.append(list(broadcast_access(src, shape)))
        dims, vecs = coalesce(shape, vectors)
        names = self._nest(dims, "i")
        value = self.access(src, vecs[1] if len(vecs) > 1 else [], names)
        self.out.line(f"{self.access(dst, vecs[0], names)} = {value}")
        self.out.close(len(dims))

    def k_matmul(self, kernel: MatmulKernel) -> None:
        e, k = self.out, self.kernel_index
        a, b, out = kernel.a, kernel.b, kernel.out
        batch, m, kk, n = kernel.batch, kernel.m, kernel.k, kernel.n
        dtype = out.dtype
        # batch offsets
        bnames = self._nest(batch, "j")
        flat = self.index(0, c_strides(batch), bnames) if batch else "0"

        def batch_off(loc: Any) -> str:
            if isinstance(loc, Scalar):
                return "0"
            lead = len(batch) - (len(loc.shape) - 2)
            strides = [0] * lead + [0 if sz == 1 else st for sz, st in
                                    zip(loc.shape[:-2], loc.strides[:-2])]
            _, off = self.base(loc)
            return self.index(off, strides, bnames)

        oarr, ooff = self.base(out)
        e.line(f"ob{k} = {ooff} + ({flat}) * {m * n}" if batch else f"ob{k} = {ooff}")
        ab = batch_off(a)
        bb = batch_off(b)
        e.line(f"ab{k} = {ab}")
        e.line(f"bb{k} = {bb}")
        if kernel.mode == "blas":
            # the schedule picks blas only for two strided operands (schedule.blas_layout)
            assert isinstance(a, Strided) and isinstance(b, Strided)
            e.line(f"np.dot({self._blas_view(a, m, kk, f'ab{k}')}, "
                   f"{self._blas_view(b, kk, n, f'bb{k}')}, "
                   f"{oarr}[ob{k}:ob{k} + {m * n}].reshape(({m}, {n})))")
            e.close(len(batch))
            return

        def elem(loc: Any, r: str, c: str, base: str) -> str:
            if isinstance(loc, Scalar):
                return self.const(loc.value, loc.dtype)
            arr, _ = self.base(loc)
            sr, sc = loc.strides[-2], loc.strides[-1]
            terms = [base]
            if loc.shape[-2] != 1 and sr:
                terms.append(r if sr == 1 else f"{r} * {sr}")
            if loc.shape[-1] != 1 and sc:
                terms.append(c if sc == 1 else f"{c} * {sc}")
            return f"{arr}[{' + '.join(terms)}]"

        zero = self.const(0, dtype)
        if kernel.mode == "kij":
            e.open(f"mi{k}", m * n)
            e.line(f"{oarr}[ob{k} + mi{k}] = {zero}")
            e.close()
            e.open(f"mk{k}", kk)
            e.open(f"mi{k}", m)
            e.open(f"mj{k}", n)
            target = f"{oarr}[ob{k} + mi{k} * {n} + mj{k}]"
            product = (elem(a, f'mi{k}', f'mk{k}', f'ab{k}') + " * "
                       + elem(b, f'mk{k}', f'mj{k}', f'bb{k}'))
            e.line(f"{target} = {self._wrap(f'{target} + {product}', dtype)}")
            e.close(3 + len(batch))
            return
        if kernel.mode == "ikj":
            e.open(f"mi{k}", m)
            e.open(f"mj{k}", n)
            e.line(f"{oarr}[ob{k} + mi{k} * {n} + mj{k}] = {zero}")
            e.close()
            e.open(f"mk{k}", kk)
            e.line(f"av{k} = {elem(a, f'mi{k}', f'mk{k}', f'ab{k}')}")
            e.open(f"mj{k}", n)
            target = f"{oarr}[ob{k} + mi{k} * {n} + mj{k}]"
            product = f"av{k} * " + elem(b, f'mk{k}', f'mj{k}', f'bb{k}')
            e.line(f"{target} = {self._wrap(f'{target} + {product}', dtype)}")
            e.close(3)
        else:
            e.open(f"mi{k}", m)
            e.open(f"mj{k}", n)
            e.line(f"acc{k} = {zero}")
            e.open(f"mk{k}", kk)
            product = (elem(a, f'mi{k}', f'mk{k}', f'ab{k}') + " * "
                       + elem(b, f'mk{k}', f'mj{k}', f'bb{k}'))
            e.line(f"acc{k} = {self._wrap(f'acc{k} + {product}', dtype)}")
            e.close()
            e.line(f"{oarr}[ob{k} + mi{k} * {n} + mj{k}] = acc{k}")
            e.close(2)
        e.close(len(batch))

    def _blas_view(self, loc: Strided, rows: int, cols: int, base: str) -> str:
        arr, _ = self.base(loc)
        layout = blas_layout(loc, rows, cols)
        span = f"{arr}[{base}:{base} + {rows * cols}]"
        if layout == "C":
            return f"{span}.reshape(({rows}, {cols}))"
        return f"{span}.reshape(({cols}, {rows})).T"

    def _check(self, var: str, size: int, op: str) -> None:
        self.out.line(f"if {var} < 0 or {var} >= {size}:")
        self.out.line(f"    raise IndexError('{op}: an index is out of range for an axis of "
                      f"size {size}')")

    def k_take(self, kernel: TakeKernel) -> None:
        x, idx, out, axis = kernel.x, kernel.index, kernel.out, kernel.axis
        k, e = self.kernel_index, self.out
        xshape = self.s.graph.nodes[self.s.graph.nodes[kernel.nodes[0]].inputs[0]].type.shape
        ishape = self.s.graph.nodes[self.s.graph.nodes[kernel.nodes[0]].inputs[1]].type.shape
        pre, post = xshape[:axis], xshape[axis + 1:]
        names_pre = self._nest(pre, "p")
        names_idx = self._nest(ishape, "q")
        istr = list(idx.strides) if isinstance(idx, Strided) else []
        istrides = [0 if sz == 1 else st for sz, st in zip(ishape, istr)]
        e.line(f"ix{k} = {self.access(idx, istrides, names_idx)}")
        self._check(f"ix{k}", xshape[axis], "take")
        names_post = self._nest(post, "r")
        oshape = out.shape
        ostr = c_strides(oshape)
        oidx = self.index(0, ostr, names_pre + names_idx + names_post)
        if isinstance(x, Scalar):
            value = self.const(x.value, x.dtype)
        else:
            xs = [0 if sz == 1 else st for sz, st in zip(x.shape, x.strides)]
            xnames = names_pre + ["_"] + names_post
            xi = self.index(0, xs[:axis] + [0] + xs[axis + 1:], xnames)
            xa, xoff = self.base(x)
            ax = x.strides[axis]
            term = f"ix{k}" if ax == 1 else f"ix{k} * {ax}"
            value = f"{xa}[{xoff} + {xi} + {term}]" if xi != "0" else f"{xa}[{xoff} + {term}]"
        oa, ooff = self.base(out)
        e.line(f"{oa}[{self.index(ooff, [1], [oidx]) if oidx != '0' else ooff}] = {value}")
        e.close(len(pre) + len(ishape) + len(post))

    def k_scatter_add(self, kernel: ScatterAddKernel) -> None:
        gl, idx, out = kernel.values, kernel.index, kernel.out
        axis, size = kernel.axis, kernel.size
        k, e = self.kernel_index, self.out
        graph = self.s.graph
        gshape = graph.nodes[graph.nodes[kernel.nodes[0]].inputs[0]].type.shape
        ishape = graph.nodes[graph.nodes[kernel.nodes[0]].inputs[1]].type.shape
        pre, post = gshape[:axis], gshape[axis + len(ishape):]
        self._fill(out, self.const(0, out.dtype), out.dtype)
        names_pre = self._nest(pre, "p")
        names_idx = self._nest(ishape, "q")
        istr = list(idx.strides) if isinstance(idx, Strided) else []
        istrides = [0 if sz == 1 else st for sz, st in zip(ishape, istr)]
        e.line(f"ix{k} = {self.access(idx, istrides, names_idx)}")
        self._check(f"ix{k}", size, "scatter_add")
        names_post = self._nest(post, "r")
        gstr = list(broadcast_access(gl, gshape)) if isinstance(gl, Strided) else []
        value = self.access(gl, gstr, names_pre + names_idx + names_post)
        ostr = c_strides(pre + (size,) + post)
        oidx = self.index(0, list(ostr[:axis]) + list(ostr[axis + 1:]), names_pre + names_post)
        ax = ostr[axis]
        term = f"ix{k}" if ax == 1 else f"ix{k} * {ax}"
        oa, ooff = self.base(out)
        target = f"{oa}[{ooff} + {oidx} + {term}]" if oidx != "0" else f"{oa}[{ooff} + {term}]"
        e.line(f"{target} = {self._wrap(f'{target} + {value}', out.dtype)}")
        e.close(len(pre) + len(ishape) + len(post))

    def k_one_hot(self, kernel: OneHotKernel) -> None:
        idx, out, n = kernel.index, kernel.out, kernel.n
        k, e = self.kernel_index, self.out
        graph = self.s.graph
        ishape = graph.nodes[graph.nodes[kernel.nodes[0]].inputs[0]].type.shape
        self._fill(out, self.const(0, out.dtype), out.dtype)
        names = self._nest(ishape, "q")
        istr = list(idx.strides) if isinstance(idx, Strided) else []
        istrides = [0 if sz == 1 else st for sz, st in zip(ishape, istr)]
        e.line(f"ix{k} = {self.access(idx, istrides, names)}")
        self._check(f"ix{k}", n, "one_hot")
        oa, ooff = self.base(out)
        flat = self.index(0, [s * n for s in c_strides(ishape)], names)
        pos = f"{ooff} + {flat} + ix{k}" if flat != "0" else f"{ooff} + ix{k}"
        e.line(f"{oa}[{pos}] = {self.const(1, out.dtype)}")
        e.close(len(ishape))

    def k_concat(self, kernel: ConcatKernel) -> None:
        out, axis = kernel.out, kernel.axis
        ostr = c_strides(out.shape)
        start = 0
        for src in kernel.ins:
            shape = src.shape if isinstance(src, Strided) else None
            if shape is None:  # a scalar: its shape is the out shape with 1 on the axis
                shape = tuple(1 if a == axis else d for a, d in enumerate(out.shape))
            dst = Strided(out.base, out.offset + start * ostr[axis], shape, ostr, out.dtype)
            self.k_copy(CopyKernel([], shape, src, dst))
            start += shape[axis]

    def k_pad(self, kernel: PadKernel) -> None:
        src, out, axis, before = kernel.x, kernel.out, kernel.axis, kernel.before
        self._fill(out, self.const(0, out.dtype), out.dtype)
        ostr = c_strides(out.shape)
        graph = self.s.graph
        shape = graph.nodes[graph.nodes[kernel.nodes[0]].inputs[0]].type.shape
        dst = Strided(out.base, out.offset + before * ostr[axis], shape, ostr, out.dtype)
        self.k_copy(CopyKernel([], shape, src, dst))

    def _contiguous(self, loc: Any, shape: tuple[int, ...]) -> tuple[str, int]:
        """A flat array holding ``loc`` in C order from an offset: its own arena when
        it is contiguous there, else a gathered copy."""
        if isinstance(loc, Strided) and loc.contiguous:
            return self.base(loc)
        name = f"g{self.kernel_index}"
        self.out.line(f"{name} = np.empty({math.prod(shape)}, {NP[loc.dtype]})")
        names = self._nest(shape, "i")
        src = list(broadcast_access(loc, shape)) if isinstance(loc, Strided) else []
        self.out.line(f"{name}[{self.index(0, c_strides(shape), names)}] = "
                      f"{self.access(loc, src, names)}")
        self.out.close(len(shape))
        return name, 0

    def k_random(self, kernel: RandomKernel) -> None:
        """A call of the node's fill in ``random_kernels`` (the Philox stream); every
        scalar argument is a number the generator formats itself."""
        out, key = kernel.out, kernel.key
        assert isinstance(key, Strided) and out.contiguous  # an input; a fresh buffer
        oa, ooff = self.base(out)
        ka, koff = self.base(key)
        keys = f"{ka}[{koff}:{koff + 4}]"
        if kernel.op == "categorical":
            node = self.s.graph.nodes[kernel.nodes[0]]
            logits_shape = self.s.graph.nodes[node.inputs[1]].type.shape
            la, loff = self._contiguous(kernel.logits, logits_shape)
            temperature = self.const(kernel.attrs["temperature"], "float64")
            top_p = self.const(kernel.attrs["top_p"], "float64")
            fill = "fill_categorical"
            args = (f"{oa}, {ooff}, {out.size}, {la}, {loff}, {int(logits_shape[-1])}, "
                    f"{keys}, {int(kernel.offset)}, {temperature}, {int(kernel.attrs['top_k'])}, "
                    f"{top_p}")
        elif kernel.op == "bernoulli":
            fill = "fill_bernoulli"
            threshold = philox.bernoulli_threshold(kernel.attrs["p"])
            args = f"{oa}, {ooff}, {out.size}, {keys}, {int(kernel.offset)}, {int(threshold)}"
        else:
            fill = {"random_normal": "fill_normal",
                    "random_uniform": f"fill_uniform_{DTYPES[out.dtype]}"}[kernel.op]
            args = f"{oa}, {ooff}, {out.size}, {keys}, {int(kernel.offset)}"
        self.random_fills.add(fill)
        self.out.line(f"{fill}({args})")


__all__ = ["CODEGEN_VERSION", "NP", "Generator"]
