"""Operations: parameter-owning callables that tracing records and the Trainer replays.

``Operation`` is the base; ``LinearOperation``, ``MlpOperation``, ``EmbeddingOperation``,
``TextEncoder`` and ``Classifier`` are ready to use. An operation owns its parameters and
is called on arrays (``LinearOperation(4, 2, seed=0)(x)``); a ``tc.nn`` module
(``tc.nn.Linear(tape, 4, 2)``) records parameters on a tape and is called on ``Expr``
values, and an operation builds one on each tape it expresses itself on. The dense
operations carry the ``Operation`` suffix so the two never share a name. (The op
*registry* of primitives is a third thing: ``tensorcode.compiler.core.registry``.) This
package was ``tensorcode.ops``, which still imports, with a ``DeprecationWarning``.
"""

from .base import Operation, canonical_json
from .layers import EmbeddingOperation, LinearOperation, MlpOperation
from .text import Classifier, TextEncoder

__all__ = ["Operation", "LinearOperation", "MlpOperation", "EmbeddingOperation", "TextEncoder",
           "Classifier", "canonical_json"]
