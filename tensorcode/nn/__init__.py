"""Neural building blocks (``tc.nn``) and initializers (``tc.init``)."""

from ..compiler.trace.draws import dropout
from . import init
from .modules import ACTIVATIONS, Dropout, Embedding, LayerNorm, Linear, Mlp, Module

__all__ = ["init", "Module", "Linear", "Mlp", "Embedding", "LayerNorm", "ACTIVATIONS",
           "Dropout", "dropout"]
