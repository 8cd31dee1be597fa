"""Deprecated: the former name of ``tensorcode.operations`` (removed in release 0.2.0,
the next minor release). Importing it warns; every name still resolves to the new
package's object, and the dense operations keep their former names here: ``Linear`` is
``tensorcode.operations.LinearOperation``, ``Mlp`` is ``MlpOperation``, ``Embedding`` is
``EmbeddingOperation``."""

import warnings

from ..operations import *  # noqa: F403  (the public names: operations.__all__)
from ..operations import EmbeddingOperation as Embedding
from ..operations import LinearOperation as Linear
from ..operations import MlpOperation as Mlp
from ..operations import __all__ as _current

warnings.warn("tensorcode.ops is deprecated (removed in 0.2.0): import tensorcode.operations "
              "instead (ops.Linear, ops.Mlp and ops.Embedding are "
              "operations.LinearOperation, MlpOperation and EmbeddingOperation)",
              DeprecationWarning, stacklevel=2)

__all__ = [*_current, "Linear", "Mlp", "Embedding"]
