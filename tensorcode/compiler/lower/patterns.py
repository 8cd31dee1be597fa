"""Rewrite rules as data: a pattern over a node and its inputs, and what to do on a match.

The model is tinygrad's ``UPat``/``PatternMatcher``, kept small. A ``Pat`` says what a
node must be: its ``op`` (one name, a set, or any), patterns for its ``src`` inputs in
order, a ``where`` test, and a ``name`` under which the match binds the node's id. A
``Rules`` holds ``(pattern, action)`` pairs in the order they are tried; ``apply`` runs
the first action whose pattern matches and that returns something (an action may still
decline with ``None``, for a condition the pattern cannot say). Rules are indexed by
op once, so a node meets only the rules that can match it.

The graph passes (``passes.simplify``) and the kernel builders (``kernels.view_of``,
``kernels.index_kernel``) are tables of these rules instead of chains of op names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.ir import Node

#: ``where(node, nodes)``: a test of a matched node (``nodes``: the graph it reads from)
Where = Callable[[Node, Sequence[Node]], bool]


@dataclass(frozen=True)
class Pat:
    """A pattern over one node (see the module doc). ``op=None`` matches any op and
    ``src=None`` any inputs; ``name`` binds the node's id in the graph (for the root, the
    node being rewritten, whose id is not known yet, nothing is bound)."""

    op: str | frozenset[str] | None = None
    src: tuple[Pat, ...] | None = None
    name: str | None = None
    where: Where | None = None

    def ops(self) -> frozenset[str] | None:
        """The op names this pattern's node may have (``None``: any)."""
        if self.op is None:
            return None
        return frozenset([self.op]) if isinstance(self.op, str) else self.op

    def match(self, node: Node, nodes: Sequence[Node], bound: dict[str, int]) -> bool:
        """Whether ``node`` (whose inputs are ids into ``nodes``) matches, binding the
        named inputs' ids into ``bound``."""
        ops = self.ops()
        if ops is not None and node.op not in ops:
            return False
        if self.src is not None:
            if len(self.src) != len(node.inputs):
                return False
            for pattern, j in zip(self.src, node.inputs):
                if not pattern.match(nodes[j], nodes, bound):
                    return False
                if pattern.name is not None:
                    bound[pattern.name] = j
        return self.where is None or self.where(node, nodes)


#: ``action(context, node, **bound)``: the rewrite of a match, or ``None`` to decline
Action = Callable[..., Any]


class Rules:
    """``(pattern, action)`` pairs tried in order (see the module doc)."""

    def __init__(self, rules: Iterable[tuple[Pat, Action]]) -> None:
        self.rules = tuple(rules)
        self._by_op: dict[str, tuple[tuple[Pat, Action], ...]] = {}

    def _for(self, op: str) -> tuple[tuple[Pat, Action], ...]:
        found = self._by_op.get(op)
        if found is None:
            found = tuple((pattern, action) for pattern, action in self.rules
                          if pattern.ops() is None or op in pattern.ops())  # type: ignore[operator]
            self._by_op[op] = found
        return found

    def apply(self, context: Any, node: Node, nodes: Sequence[Node]) -> Any:
        """The first matching rule's result for ``node`` (``None`` when none applies);
        ``context`` is handed to the action first (the pass's own state)."""
        for pattern, action in self._for(node.op):
            bound: dict[str, int] = {}
            if pattern.match(node, nodes, bound):
                result = action(context, node, **bound)
                if result is not None:
                    return result
        return None

    def ops(self) -> frozenset[str]:
        """Every op a rule names (a rule for any op adds nothing here)."""
        return frozenset(op for pattern, _ in self.rules for op in (pattern.ops() or ()))


__all__ = ["Pat", "Rules", "Where", "Action"]
