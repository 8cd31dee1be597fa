"""Operations: parameter-owning callables that tracing records and the Trainer replays.

``Operation`` is the base; ``Linear``, ``Mlp``, ``Embedding``, ``TextEncoder`` and
``Classifier`` are ready to use. (The op *registry* of primitives is a different thing:
``tensorcode.compiler.core.registry``.)
"""

from .base import Operation, canonical_json
from .layers import Embedding, Linear, Mlp
from .text import Classifier, TextEncoder

__all__ = ["Operation", "Linear", "Mlp", "Embedding", "TextEncoder", "Classifier",
           "canonical_json"]
