"""The one place that says what to install when the ``serve`` extra is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import TensorCodeError

INSTALL = "pip install 'tensorcode[serve]'"


def require(module: str) -> ModuleType:
    """Import ``module`` (starlette, uvicorn, httpx, prometheus_client) or raise a
    ``TensorCodeError`` naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise TensorCodeError(f"serving needs {module.split('.')[0]}, which is not installed "
                              f"here ({error}); install the serving extra: {INSTALL}") from None
