"""``Plot``: an immutable description of one figure, layers plus decorations.

Building a plot never imports matplotlib, so a program can describe its figures without
the ``plot`` extra installed; only ``figure()``, ``save()`` and ``show()`` draw, and
they say what to install when matplotlib is missing.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

from .errors import PlotError
from .layers import Cells, Layer, Line, Points, checked_text, describe_value
from .render import draw_figure, save_plot, show_plot

#: the default image size in pixels (width, height) and its resolution
DEFAULT_SIZE = (800, 500)
DEFAULT_DPI = 100
_MAX_PIXELS = 10_000


@dataclasses.dataclass(frozen=True, repr=False)
class Plot:
    """One figure: layers drawn in the order added, over shared axes.

    Every method returns a new ``Plot``; the one it was called on is unchanged, so a
    base plot can be refined several ways::

        plot = Plot().title("loss").x_label("step").log_y()
        plot = plot.layer(Line.y(losses).label("sgd"))
        plot.save("loss.png")
    """

    layers: tuple[Layer, ...] = ()
    title_text: str | None = None
    x_label_text: str | None = None
    y_label_text: str | None = None
    logarithmic_y: bool = False
    with_colorbar: bool = False
    pixels: tuple[int, int] = DEFAULT_SIZE
    dpi: int = DEFAULT_DPI

    def title(self, text: str) -> Plot:
        """The plot with this title."""
        return dataclasses.replace(self, title_text=checked_text(text, "Plot.title"))

    def x_label(self, text: str) -> Plot:
        """The plot with this x-axis label."""
        return dataclasses.replace(self, x_label_text=checked_text(text, "Plot.x_label"))

    def y_label(self, text: str) -> Plot:
        """The plot with this y-axis label."""
        return dataclasses.replace(self, y_label_text=checked_text(text, "Plot.y_label"))

    def log_y(self) -> Plot:
        """A logarithmic y axis: a constant convergence rate becomes a straight line.
        Values at or below zero cannot be placed on it and are left out."""
        return dataclasses.replace(self, logarithmic_y=True)

    def colorbar(self) -> Plot:
        """A colour scale beside the axes for the (last) ``Cells`` layer; a plot without
        one is refused when drawn."""
        return dataclasses.replace(self, with_colorbar=True)

    def size(self, width: int, height: int, dpi: int = DEFAULT_DPI) -> Plot:
        """The image size in pixels (PNG) at ``dpi``; SVG keeps the same proportions."""
        for name, value, low in (("width", width, 16), ("height", height, 16), ("dpi", dpi, 10)):
            whole = isinstance(value, int) and not isinstance(value, bool)
            if not whole or not low <= value <= _MAX_PIXELS:
                raise PlotError(f"Plot.size: {name} must be an integer from {low} to "
                                f"{_MAX_PIXELS}, got {describe_value(value)}")
        return dataclasses.replace(self, pixels=(width, height), dpi=dpi)

    def layer(self, layer: Layer) -> Plot:
        """This plot with ``layer`` drawn over the ones before it."""
        if not isinstance(layer, (Line, Points, Cells)):
            raise PlotError(f"Plot.layer: expected a Line, Points or Cells layer, got "
                            f"{describe_value(layer)}; build one with Line.y(...), Points.xy(...) "
                            "or Cells.matrix(...)")
        return dataclasses.replace(self, layers=self.layers + (layer,))

    def __repr__(self) -> str:  # layers summarised, not every float
        settings = [f"{name}={value!r}" for name, value in (
            ("title", self.title_text), ("x_label", self.x_label_text),
            ("y_label", self.y_label_text)) if value is not None]
        settings += [flag for flag, on in (("log_y", self.logarithmic_y),
                                           ("colorbar", self.with_colorbar)) if on]
        settings.append(f"size={self.pixels[0]}x{self.pixels[1]}")
        layers = ", ".join(repr(layer) for layer in self.layers)
        return f"Plot({', '.join(settings)}, layers=[{layers}])"

    # drawing: .render imports matplotlib when called, never at module import

    def figure(self) -> Any:
        """A new matplotlib ``Figure`` with this plot drawn on it, attached to the Agg
        canvas (no display and no pyplot state involved): for callers who want to adjust
        it with matplotlib directly or read back what was drawn."""
        return draw_figure(self)

    def save(self, path: str | pathlib.Path) -> pathlib.Path:
        """Write the plot as PNG or SVG, chosen by the suffix of ``path``; the file is
        replaced atomically, so a reader never sees half an image. Missing parent
        directories are created. Returns the path written."""
        return save_plot(self, path)

    def show(self) -> None:
        """Open the plot in a window (or inline in a notebook) when a display exists;
        raises ``PlotError`` naming ``save`` when there is none."""
        show_plot(self)


__all__ = ["Plot", "DEFAULT_SIZE", "DEFAULT_DPI"]
