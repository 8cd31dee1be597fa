"""Neural building blocks (``tc.nn``) and initializers (``tc.init``)."""

from . import init
from .modules import ACTIVATIONS, Embedding, LayerNorm, Linear, Mlp, Module

__all__ = ["init", "Module", "Linear", "Mlp", "Embedding", "LayerNorm", "ACTIVATIONS"]
