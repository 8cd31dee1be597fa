"""Errors of the plotting layer.

Both are ``TensorCodeError`` subclasses so a caller that already catches the library's
complaints in one place catches these too.
"""

from __future__ import annotations

from ..errors import TensorCodeError

#: the command that installs what drawing needs
INSTALL_HINT = "pip install 'tensorcode[plot]'"


class PlotError(TensorCodeError):
    """A plot or layer was given input it cannot draw (names the builder and the value),
    or a plot could not be shown or written."""


class MissingExtraError(PlotError):
    """Drawing needs matplotlib, TensorCode's optional ``plot`` extra, and it is not
    installed. Building plots never needs it; rendering, saving and showing do."""

    def __init__(self, cause: BaseException | None = None) -> None:
        detail = f" ({cause})" if cause is not None else ""
        super().__init__(
            "drawing a plot needs matplotlib, which TensorCode treats as the optional "
            f"'plot' extra and which could not be imported{detail}; install it with: "
            f"{INSTALL_HINT}")


__all__ = ["PlotError", "MissingExtraError", "INSTALL_HINT"]
