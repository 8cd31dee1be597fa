"""Errors of the plotting layer.

``PlotError`` is a ``TensorCodeError`` subclass so a caller that already catches the
library's complaints in one place catches it too. Drawing without matplotlib raises the
package's one "extra is missing" error, ``tensorcode.errors.MissingExtraError`` (from
``tensorcode.extras.require``), re-exported here where plots are made.
"""

from __future__ import annotations

from ..errors import MissingExtraError, TensorCodeError
from ..extras import install_line

#: the command that installs what drawing needs
INSTALL_HINT = install_line("plot")


class PlotError(TensorCodeError):
    """A plot or layer was given input it cannot draw (names the builder and the value),
    or a plot could not be shown or written."""




__all__ = ["PlotError", "MissingExtraError", "INSTALL_HINT"]
