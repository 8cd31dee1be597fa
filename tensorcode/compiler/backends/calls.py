"""The declared calls a backend's handle offers in their plain form, for a handle with
no cheaper one of its own.

``backends.Compiled`` declares every call a plan makes; a handle that has nothing better
than "call ``run`` with the fixed buffers first" inherits these: ``bind`` and
``bind_scalars`` put the parameter and constant buffers in front of each call,
``bind_step`` does the same for ``run_step`` (and its writable buffers after the inputs),
and ``refusal`` reads a ``Refused`` its entry points raised. The llvm handle overrides
the binds (it checks the fixed buffers once); the Numba handle overrides ``refusal``
(Numba's dispatcher and generated checks raise Python's own exceptions).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ..lower.program import Refused


class PlainCalls:
    """``bind``, ``bind_scalars``, ``bind_step`` and ``refusal`` over a handle's
    ``run``, ``scalars()`` and ``step()`` (see the module doc)."""

    #: the exception types this handle's entry points raise when they refuse a call
    refused: tuple[type[BaseException], ...] = (Refused,)
    run: Any

    def scalars(self) -> Any:  # pragma: no cover - every handle defines it
        raise NotImplementedError

    def step(self) -> Any:  # pragma: no cover - every handle defines it
        raise NotImplementedError

    def refusal(self, error: BaseException, inputs: Sequence[Any], leading: int | None = None
                ) -> Refused | None:
        """The status and argument index of ``error`` (one of ``refused``), or ``None``
        when it is not a refusal (then the plan lets it through as it is)."""
        return error if isinstance(error, Refused) else None

    def bind(self, *head: Any) -> Callable[..., Any]:
        """``run`` with the parameter and constant buffers ``head`` in front."""
        return functools.partial(self.run, *head)

    def bind_scalars(self, *head: Any) -> Callable[..., Any]:
        """``scalars()`` with the parameter and constant buffers ``head`` in front."""
        return functools.partial(self.scalars(), *head)

    def bind_step(self, head: Sequence[Any], tail: Sequence[Any]
                  ) -> Callable[[Sequence[Any], float], Any]:
        """``call(inputs, lr) -> loss``: ``run_step(*head, *inputs, *tail, lr)``."""
        run_step = self.step()
        head, tail = list(head), list(tail)

        def call(inputs: Sequence[Any], lr: float) -> Any:
            return run_step(*head, *inputs, *tail, lr)
        return call


__all__ = ["PlainCalls"]
