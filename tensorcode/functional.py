"""The functional namespace: every op and composite as a function (``tc.exp(x)``,
``tc.sum(x, axis=0)``, ``tc.softmax(x)``), one public name each, as ``jnp.*`` and
``torch.*`` are.

The names are derived from the op registry (``tensorcode.compiler.core.registry.REGISTRY``)
when this module is imported, so the list cannot drift from the ops: a registry op is a
function here under its own name, except the ones below (``PUBLIC_NAMES`` renames,
``INTERNAL_OPS`` are recorded only by other ops' gradient rules), and an op of a kind this
module does not know how to call fails the import (and the test suite), never silently.
The composites (``softmax``, ``cross_entropy``, ..., ``dropout``) are the functions of
``tensorcode.compiler.trace.composites`` and ``tensorcode.compiler.trace.draws``. The
method forms on ``Expr`` (``x.exp()``, ``x.sum(axis=0)``) stay; a function here records
exactly what the method records.

``detach`` and ``stop_gradient`` spelled one op twice: the public function is
``tc.stop_gradient`` (JAX's name; the Rust guide's ``.detach()`` means something else
there), and the method ``x.detach()`` keeps working.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .compiler.core import registry as primitives
from .compiler.trace import composites as functions
from .compiler.trace import draws
from .compiler.trace.tape import Expr

#: registry ops whose public function has another name
PUBLIC_NAMES = {"detach": "stop_gradient"}
#: registry ops that only gradient rules record (the adjoints of ``slice`` and ``take``),
#: and the bit operations only scalar graphs use (the float32 approximations, Philox)
INTERNAL_OPS = frozenset({"pad", "scatter_add", "floor", "shift_left", "shift_right",
                          "bitcast", "bitwise_and", "bitwise_or", "bitwise_xor",
                          "mul_wide"})
#: functions built from primitives, with no registry entry of their own
COMPOSITES = ("softmax", "log_softmax", "logsumexp", "cross_entropy", "layer_norm", "gelu",
              "mse", "dropout")
#: registry kinds whose ops are called as the ``Expr`` method of the same name
_METHOD_KINDS = ("reduction", "view", "movement", "index", "elementwise")


def _expr(value: Any, op: str) -> Expr:
    if not isinstance(value, Expr):
        raise TypeError(f"tc.{op}: the first operand must be an Expr recorded on a tape "
                        f"(tape.input, tape.parameter, tape.leaf), got "
                        f"{type(value).__name__}")
    return value


def _binary(op: str) -> Callable[[Any, Any], Expr]:
    def function(a: Any, b: Any) -> Expr:
        anchor = a if isinstance(a, Expr) else b
        anchor = _expr(anchor, op)
        builder = anchor.builder
        return builder.apply(op, [builder.lift(a, anchor), builder.lift(b, anchor)])
    function.__doc__ = (f"Record the elementwise ``{op}`` of ``a`` and ``b`` (NumPy "
                        "broadcasting; a Python number is a weak literal).")
    return function


def _unary(op: str) -> Callable[[Any], Expr]:
    def function(x: Any) -> Expr:
        x = _expr(x, op)
        return x.builder.apply(op, [x])
    function.__doc__ = f"Record the elementwise ``{op}`` of ``x``."
    return function


def _method(op: str, name: str) -> Callable[..., Expr]:
    def function(x: Any, *args: Any, **kwargs: Any) -> Expr:
        return getattr(_expr(x, name), op)(*args, **kwargs)
    function.__doc__ = f"``tc.{name}(x, ...)`` is ``x.{op}(...)``."
    return function


def _function_for(op: str, name: str) -> Callable[..., Any]:
    """The public function of registry op ``op``."""
    for module in (functions, draws):
        existing = getattr(module, name, None)
        if callable(existing):
            return existing
    definition = primitives.REGISTRY[op]
    if definition.kind in ("elementwise", "contraction") and definition.arity == 2:
        return _binary(op)
    if definition.kind in _METHOD_KINDS and callable(getattr(Expr, op, None)):
        return _method(op, name)
    if definition.kind == "elementwise" and definition.arity == 1:
        return _unary(op)  # an operator's op (``-x``), no method of its own
    raise TypeError(f"the registry op {op!r} (kind {definition.kind!r}) has no public "
                    "function: give it one here, or list it in INTERNAL_OPS")


def _namespace() -> dict[str, Callable[..., Any]]:
    table: dict[str, Callable[..., Any]] = {}
    for op in primitives.REGISTRY:
        if op in INTERNAL_OPS:
            continue
        name = PUBLIC_NAMES.get(op, op)
        function = _function_for(op, name)
        if getattr(function, "__module__", None) == __name__:
            function.__name__ = function.__qualname__ = name
        table[name] = function
    for name in COMPOSITES:
        table[name] = getattr(functions, name, None) or getattr(draws, name)
    return table


_NAMESPACE = _namespace()
globals().update(_NAMESPACE)

__all__ = sorted(_NAMESPACE)
