"""Deprecated: the former name of ``tensorcode.integrations.torch`` (removed in release
0.2.0, the next minor release). Importing it warns; every name resolves to the new
module's object."""

import warnings

from ..integrations.torch import *  # noqa: F403  (the public names: integrations.torch.__all__)
from ..integrations.torch import __all__  # noqa: F401

warnings.warn("tensorcode.interop.torch is deprecated (removed in 0.2.0): import "
              "tensorcode.integrations.torch instead", DeprecationWarning, stacklevel=2)
