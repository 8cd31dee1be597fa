"""TensorCode: record small trainable programs, differentiate them into more IR, and
lower them to fast CPU executors.

The public surface is small: ``Tape`` records, ``Network`` runs, ``Parameters`` is the
caller's state; ``tc.nn``, ``tc.init``, ``tc.optim``, ``tc.checkpoint`` and ``tc.random``
hold the building blocks, ``tc.training`` and ``tc.tools`` the Trainer and the owned tools;
each is a real module (``import tensorcode.optim`` works as ``import torch.optim`` does).
Every public name but the errors loads on first use (PEP 562), so
``import tensorcode`` imports neither NumPy nor the compiler until a name is read, and
never numba. The runtime's modules load on first use too, so ``import
tensorcode.compiler`` (which runs this file first) loads the compiler alone: dependencies
point products -> runtime -> compiler, never back.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    ArtifactError,
    CompileError,
    DistillationError,
    DTypeError,
    FeedError,
    PatchError,
    ShapeError,
    TensorCodeError,
    TrainingError,
)

if TYPE_CHECKING:  # pragma: no cover - what mypy and readers see; loaded lazily below
    from . import checkpoint, functional, init, nn, optim, random, tools, training
    from .compiler.backends.threads import get_num_threads, set_num_threads
    from .compiler.plans.network import Backward, Network, Run
    from .compiler.plans.plan import Plan
    from .compiler.plans.tables import Gradients, Parameters
    from .compiler.plans.tape import Tape
    from .compiler.trace.expr import Expr
    from .compiler.trace.tape import Adjoints
    from .runtime.experience import InputRef, OutputRef, trace

#: the functional namespace (``tc.exp(x)``, ``tc.sum(x, axis=0)``, ``tc.softmax(x)``):
#: ``tensorcode.functional.__all__``, derived there from the op registry; written out here
#: so that ``import tensorcode`` loads nothing, and a test keeps the two lists equal
_FUNCTIONAL = (
    "abs", "add", "astype", "bernoulli", "broadcast_to", "categorical", "concat", "cos",
    "cross_entropy", "div", "dropout", "eq", "erf", "exp", "ge", "gelu", "gt", "layer_norm",
    "le", "log", "log1p", "log_softmax", "logsumexp", "lt", "matmul", "max", "maximum", "mean",
    "min", "minimum", "mse", "mul", "ne", "neg", "one_hot", "pow", "random_normal",
    "random_uniform", "relu", "reshape", "sigmoid", "sin", "slice", "softmax", "softplus",
    "sqrt", "stop_gradient", "sub", "sum", "take", "tanh", "transpose", "where")

#: every public name but the errors, loaded when first read: name -> (module, attribute;
#: None for the module itself). ``import tensorcode`` runs no NumPy and no compiler code.
_LAZY: dict[str, tuple[str, str | None]] = {
    **{name: ("tensorcode.functional", name) for name in _FUNCTIONAL},
    "functional": ("tensorcode.functional", None),
    **{name: ("tensorcode.compiler.plans.network", name)
       for name in ("Backward", "Network", "Run")},
    "Plan": ("tensorcode.compiler.plans.plan", "Plan"),
    "Gradients": ("tensorcode.compiler.plans.tables", "Gradients"),
    "Parameters": ("tensorcode.compiler.plans.tables", "Parameters"),
    "Adjoints": ("tensorcode.compiler.trace.tape", "Adjoints"),
    "Expr": ("tensorcode.compiler.trace.expr", "Expr"),
    "Tape": ("tensorcode.compiler.plans.tape", "Tape"),
    "nn": ("tensorcode.nn", None),
    # the importable modules of the surface (``import tensorcode.optim`` works too)
    **{name: (f"tensorcode.{name}", None) for name in (
        "init", "checkpoint", "random", "optim", "training", "tools")},
    "trace": ("tensorcode.runtime.experience", "trace"),
    "OutputRef": ("tensorcode.runtime.experience", "OutputRef"),
    "InputRef": ("tensorcode.runtime.experience", "InputRef"),
    **{name: ("tensorcode.compiler.backends.threads", name)
       for name in ("set_num_threads", "get_num_threads")},
}


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562) and keep it as a module attribute."""
    try:
        module_name, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tensorcode' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's attributes and every public name, loaded or not."""
    return sorted(set(globals()) | set(__all__))


from .version import __version__  # noqa: E402 - after the lazy table, beside __all__

__all__ = [
    "Tape", "Expr", "Adjoints", "Network", "Run", "Backward", "Parameters", "Gradients", "Plan",
    *_FUNCTIONAL, "functional",
    "nn", "init", "checkpoint", "random", "optim", "training", "tools",
    "trace", "OutputRef", "InputRef", "set_num_threads", "get_num_threads",
    "TensorCodeError", "ShapeError", "DTypeError", "FeedError", "CompileError",
    "ArtifactError", "PatchError", "DistillationError", "TrainingError", "__version__",
]
