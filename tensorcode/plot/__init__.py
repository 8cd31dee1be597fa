"""Plots of curves, points and surfaces: ``Plot``, ``Line``, ``Points``, ``Cells``.

Plots are immutable builders: every call returns a new value, so a plot is described
in one expression and can be refined without copying::

    from tensorcode.plot import Line, Plot

    Plot().title("loss").x_label("step").log_y().layer(Line.y(losses)).save("loss.png")

Describing a plot needs nothing beyond NumPy. Drawing it (``save``, ``show``,
``figure``) needs matplotlib, the optional ``plot`` extra
(``pip install 'tensorcode[plot]'``), imported only then; without it those calls raise
``MissingExtraError``, a ``TensorCodeError`` that says what to install.
"""

from __future__ import annotations

from .errors import INSTALL_HINT, MissingExtraError, PlotError
from .figure import Plot
from .layers import Cells, Line, Points

__all__ = ["Plot", "Line", "Points", "Cells", "PlotError", "MissingExtraError",
           "INSTALL_HINT"]
