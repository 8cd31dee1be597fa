"""TensorCode: record small trainable programs, differentiate them into more IR, and
lower them to fast CPU executors.

The public surface is small: ``Tape`` records, ``Network`` runs, ``Parameters`` is the
caller's state; ``tc.nn``, ``tc.init``, ``tc.checkpoint`` and ``tc.random`` hold the
building blocks. Heavy imports (numba) stay lazy: ``import tensorcode`` never loads them.
"""

from __future__ import annotations

from . import nn
from .compiler.functions import (
    concat,
    cross_entropy,
    gelu,
    layer_norm,
    log_softmax,
    logsumexp,
    maximum,
    minimum,
    mse,
    one_hot,
    softmax,
    stop_gradient,
    where,
)
from .compiler.tape import Adjoints, Expr, Tape
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
from .nn import init
from .runtime import checkpoint, optim, random
from .runtime.experience import OutputRef, trace
from .runtime.network import Backward, Network, Run
from .runtime.parameters import Gradients, Parameters

__version__ = "0.1.0"

__all__ = [
    "Tape", "Expr", "Adjoints", "Network", "Run", "Backward", "Parameters", "Gradients",
    "where", "maximum", "minimum", "concat", "one_hot", "stop_gradient", "logsumexp",
    "log_softmax", "softmax", "cross_entropy", "layer_norm", "gelu", "mse",
    "nn", "init", "checkpoint", "random", "optim",
    "trace", "OutputRef",
    "TensorCodeError", "ShapeError", "DTypeError", "FeedError", "CompileError",
    "ArtifactError", "PatchError", "DistillationError", "TrainingError", "__version__",
]
