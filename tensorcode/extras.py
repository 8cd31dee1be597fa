"""Optional extras: the one place that imports a module an extra provides and, when it
is missing, says which extra to install.

``require(module)`` returns the imported module or raises ``MissingExtraError`` (a
``TensorCodeError`` and an ``ImportError``) naming the extra and the ``pip install``
line; ``installed(module)`` returns it or ``None``, for an accelerator whose absence
changes only the speed. ``EXTRAS`` maps each optional module to its extra in
``pyproject.toml``; a test searches the package for any other way of guarding an optional
import.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingExtraError

#: optional module (or dotted prefix) -> the extra of ``pyproject.toml`` that installs it;
#: the longest matching prefix wins (``ray.serve`` needs more than ``ray``)
EXTRAS: dict[str, str] = {
    "matplotlib": "plot",
    "starlette": "serve", "uvicorn": "serve", "httptools": "serve", "uvloop": "serve",
    "httpx": "serve", "prometheus_client": "serve", "anyio": "serve", "orjson": "serve",
    "msgspec": "serve",
    "ray": "distributed", "ray.serve": "distributed-serve",
    "torch": "torch",
    "ziglang": "aot",
}


def extra_of(module: str) -> str:
    """The extra that provides ``module`` (``KeyError`` for a module no extra provides:
    add it to ``EXTRAS`` and to ``pyproject.toml`` together)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        extra = EXTRAS.get(".".join(parts[:end]))
        if extra is not None:
            return extra
    raise KeyError(f"{module!r} is provided by no optional extra; add it to "
                   "tensorcode.extras.EXTRAS and to pyproject.toml")


def install_line(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'tensorcode[{extra}]'"


def require(module: str, purpose: str | None = None) -> ModuleType:
    """Import ``module``, an optional extra's, or raise ``MissingExtraError`` naming the
    extra. ``purpose`` says what needed it (``"drawing a plot"``); any import failure
    counts, not only an absent package (a package whose own dependencies are broken
    cannot serve either), and the cause is kept in the message."""
    extra = extra_of(module)
    try:
        return importlib.import_module(module)
    except ImportError as error:
        needs = f"{purpose} needs" if purpose else "this needs"
        raise MissingExtraError(
            f"{needs} {module}, which TensorCode treats as part of the optional "
            f"'{extra}' extra and which could not be imported here ({error}); install "
            f"it with: {install_line(extra)}", name=module, extra=extra) from error


def installed(module: str) -> ModuleType | None:
    """``module`` (an optional extra's) when it imports, else ``None``: for an
    accelerator whose absence changes only the speed, never a result (``orjson`` for
    reading JSON). Whatever a missing module would make fail uses ``require``."""
    extra_of(module)  # only an extra's module may be optional
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


__all__ = ["require", "installed", "extra_of", "install_line", "EXTRAS"]
