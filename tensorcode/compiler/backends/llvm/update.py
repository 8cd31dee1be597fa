"""A step plan's update as IR: the optimizer's rule graph, lowered like any other ops.

An update rule (``compiler/update.py``) is a small graph of elementwise ops on scalars,
each node at a level: ``CALL`` (once per call), ``SLOT`` (once per parameter slot: the
step count and whether the slot has state) or ``ELEMENT``. ``update_function`` renders
one dtype's update for a step plan as ``update_<dtype>(U, O, S0.., steps, present, lr)``:
a loop over the slots the loss reaches (their tables are constant arrays of the module)
around the element loop, each node through the backend's lowering table
(``ops.LOWERINGS``, never an approximation: the same operations as the Numba backend's
update), reading the gradient from the output arena ``O`` and writing the new parameter
and state in place. ``eager_module`` renders the same loops as an optimizer's eager
``step`` (``tc_update``: the slot tables are arguments, the new parameters go to a
separate buffer). Every old value of an element is read before any new one is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ....errors import CompileError
from ...core.dtypes import DTYPES
from . import ops
from .interface import EAGER_ENTRY, rule_api
from .types import ENTRY_TYPE, F64, I8, I32, I64, PTR, TYPES, constant, i64, load, loop, store


def update_function(module: ir.Module, rule: Any, dtype: str,
                    slots: list[tuple[int, str, int, int, int]]) -> ir.Function:
    """``update_<dtype>(U, O, S0.., steps, present, lr)`` of a step plan (see the module
    doc): the parameters updated in place, the slot tables constants of the module."""
    n_state = len(rule.state_keys)
    short = DTYPES[dtype]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * (4 + n_state) + [F64]),
                     f"update_{short}")
    fn.linkage = "internal"
    u, o, *states = fn.args[:2 + n_state]
    steps, present, lr = fn.args[2 + n_state:]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    tables = {}
    for field, letter in ((0, "K"), (2, "P"), (3, "N"), (4, "G")):
        numbers = [int(t[field]) for t in slots]
        array_type = ir.ArrayType(I64, max(len(numbers), 1))
        table = ir.GlobalVariable(module, array_type, f"U{letter}_{short}")
        table.linkage = "internal"
        table.global_constant = True
        table.initializer = ir.Constant(array_type, numbers or [0])
        tables[letter] = table

    def column(letter: str, q: ir.Value) -> ir.Value:
        pointer = b.gep(tables[letter], [i64(0), q], inbounds=True,
                        source_etype=tables[letter].value_type)
        return b.load(pointer, typ=I64)

    _emit(b, rule, dtype, Arrays(u, u, o, states, steps, present), lr, i64(len(slots)),
          column)
    b.ret_void()
    return fn


#: the eager update's one exported function (``ENTRY_TYPE``)


def eager_module(rule: Any, dtype: str) -> ir.Module:
    """A module whose ``tc_update(arrays, extents, lr)`` is an optimizer's eager update:
    ``arrays`` the pointers ``P, G, U, S0.., K, PS, N, GS, steps, present`` (the calling
    convention of every backend's ``update``: ``P``, ``G`` and the slot tables read,
    ``U``, the states, ``steps`` and ``present`` written) and ``extents[0]`` the number
    of slots."""
    n_state = len(rule.state_keys)
    module = ir.Module(name="tensorcode_update")
    fn = ir.Function(module, ENTRY_TYPE, EAGER_ENTRY)
    arrays, extents, lr = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pointers = [b.load(b.gep(arrays, [i64(k)], inbounds=True, source_etype=PTR), typ=PTR)
                for k in range(3 + n_state + 6)]
    p, g, u, *states = pointers[:3 + n_state]
    k, ps, n, gs, steps, present = pointers[3 + n_state:]
    table = {"K": k, "P": ps, "N": n, "G": gs}
    count = load(b, extents, "int64", i64(0))
    _emit(b, rule, dtype, Arrays(p, u, g, states, steps, present), lr, count,
          lambda letter, q: load(b, table[letter], "int64", q))
    b.ret(ir.Constant(I32, 0))
    return module


@dataclass(frozen=True)
class Arrays:
    """The arrays an update walks: it reads ``source`` and writes ``target`` (the same
    array for a step plan's in-place update), reads ``gradients``."""

    source: ir.Value
    target: ir.Value
    gradients: ir.Value
    states: list[ir.Value]
    steps: ir.Value
    present: ir.Value


def _emit(b: ir.IRBuilder, rule: Any, dtype: str, arrays: Arrays, lr: ir.Value,
          count: ir.Value, column: Callable[[str, ir.Value], ir.Value]) -> None:
    """The update's loops at ``b``: over ``count`` slots (their index ``K``, start
    ``P``, size ``N`` and gradient start ``G`` read through ``column``), then over each
    slot's elements, every rule node through ``ops.LOWERINGS`` at its level."""
    api = rule_api()
    nodes, inputs, outputs = rule.graph(dtype)
    levels = rule.levels(dtype)
    n_state = len(rule.state_keys)
    values: dict[int, ir.Value] = {}
    scalar_inputs = {name: inputs[2 + n_state + k] for k, name in
                     enumerate(api.SCALAR_INPUTS)}
    if scalar_inputs["lr"] is not None:
        values[scalar_inputs["lr"]] = lr if dtype == "float64" else b.fptrunc(lr, TYPES[dtype])
    if scalar_inputs["lr64"] is not None:
        values[scalar_inputs["lr64"]] = lr
    order = api.closure(nodes, outputs)

    def compute(level: int) -> None:
        for i in order:
            if i in values:
                continue
            node = nodes[i]
            if node.op == "leaf":
                values[i] = constant(node.value.reshape(-1)[0], node.type.dtype)
                continue
            if node.op == "input" or max(levels[i], api.CALL) != level:
                continue
            lowering = ops.LOWERINGS.get(node.op)
            if lowering is None:
                raise CompileError(f"llvm backend: no lowering for op {node.op!r}")
            operand = nodes[node.inputs[0]].type.dtype if node.inputs else node.type.dtype
            element = ops.Element(b, node.type.dtype, operand)
            values[i] = lowering(element, [values[j] for j in node.inputs])

    compute(api.CALL)
    with loop(b, count, "slot") as q:
        k, start, n, gs = (column(letter, q) for letter in "KPNG")
        slot_values = dict(values)
        st = b.fadd(load(b, arrays.steps, "float64", k), constant(1.0, "float64"))
        if scalar_inputs["step"] is not None:
            values[scalar_inputs["step"]] = st
        if scalar_inputs["first"] is not None:
            had = b.icmp_unsigned("==", b.load(b.gep(arrays.present, [k], source_etype=I8),
                                               typ=I8), ir.Constant(I8, 0))
            values[scalar_inputs["first"]] = b.select(had, constant(1.0, "float64"),
                                                      constant(0.0, "float64"))
        compute(api.SLOT)
        with loop(b, n, "e") as e:
            at = b.add(start, e)
            reads = [load(b, arrays.source, dtype, at),
                     load(b, arrays.gradients, dtype, b.add(gs, e))]
            reads += [load(b, s, dtype, at) for s in arrays.states]
            for position, i in enumerate(inputs[:2 + n_state]):
                if i is not None:
                    values[i] = reads[position]
            compute(api.ELEMENT)
            results = [values[i] for i in outputs]
            store(b, results[0], arrays.target, dtype, at)
            for s, value in zip(arrays.states, results[1:]):
                store(b, value, s, dtype, at)
        store(b, st, arrays.steps, "float64", k)
        if rule.keeps_state:
            b.store(ir.Constant(I8, 1), b.gep(arrays.present, [k], source_etype=I8))
        values.clear()
        values.update(slot_values)


__all__ = ["update_function", "eager_module"]
