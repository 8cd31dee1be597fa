"""Drawing a ``Plot`` with matplotlib: the only module of the package that imports it.

Figures are made with ``matplotlib.figure.Figure`` on the Agg canvas, not through
pyplot, so saving works without a display, leaves no global figure state behind, and
does not depend on which backend the environment selected. Only ``show`` goes through
pyplot, because showing is what pyplot's backends are for.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, Protocol

import numpy as np

from ..extras import require
from ..files import atomic_write
from .errors import PlotError
from .layers import Cells, Layer, Line, Points

#: file suffix -> matplotlib format name
FORMATS = {".png": "png", ".svg": "svg"}

#: what needed matplotlib, in the missing-extra message
PURPOSE = "drawing a plot"
#: matplotlib backends that draw to files only; ``show`` refuses them
_FILE_ONLY_BACKENDS = {"agg", "cairo", "pdf", "pgf", "ps", "svg", "template"}


def require_matplotlib() -> Any:
    """The ``matplotlib`` module, or ``MissingExtraError`` saying what to install.

    Any import failure counts, not only an absent package: a matplotlib whose own
    dependencies are broken cannot draw either, and the cause is kept in the message.
    """
    module = require("matplotlib", PURPOSE)
    require("matplotlib.figure", PURPOSE)
    require("matplotlib.backends.backend_agg", PURPOSE)
    return module


class Drawable(Protocol):
    """What drawing reads of a plot (``figure.Plot`` is one; its ``figure``, ``save`` and
    ``show`` call this module, so this module names the fields instead of the class)."""

    @property
    def layers(self) -> tuple[Layer, ...]: ...
    @property
    def title_text(self) -> str | None: ...
    @property
    def x_label_text(self) -> str | None: ...
    @property
    def y_label_text(self) -> str | None: ...
    @property
    def logarithmic_y(self) -> bool: ...
    @property
    def with_colorbar(self) -> bool: ...
    @property
    def pixels(self) -> tuple[int, int]: ...
    @property
    def dpi(self) -> int: ...


def draw_figure(plot: Drawable) -> Any:
    """A new Agg-backed ``Figure`` with ``plot`` drawn on it."""
    matplotlib = require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width, height = plot.pixels
    figure = Figure(figsize=(width / plot.dpi, height / plot.dpi), dpi=plot.dpi,
                    layout="constrained")
    FigureCanvasAgg(figure)
    draw_on(figure, plot, matplotlib)
    return figure


def draw_on(figure: Any, plot: Drawable, matplotlib: Any | None = None) -> Any:
    """Draw ``plot`` on a fresh axes of ``figure`` (any matplotlib figure); the axes."""
    matplotlib = matplotlib or require_matplotlib()
    axes = figure.add_subplot()
    last: tuple[Any, Cells] | None = None  # the last Cells layer's image and the layer
    # one colour cycle over lines and points alike (matplotlib keeps one for each,
    # which would give the first points and the first line the same colour)
    uncolored = 0
    for layer in plot.layers:
        color = None
        if isinstance(layer, (Line, Points)):
            color = _color(layer.color_name, matplotlib)
            if color is None:
                color, uncolored = f"C{uncolored % 10}", uncolored + 1
        if isinstance(layer, Cells):
            last = (_draw_cells(axes, layer, matplotlib), layer)
        elif isinstance(layer, Points):
            axes.scatter(layer.xs, layer.ys, s=22, label=layer.label_text, color=color,
                         edgecolors=_color(layer.edge_name, matplotlib),
                         marker=layer.marker_name, linewidths=0.7, zorder=3)
        elif isinstance(layer, Line):
            axes.plot(layer.xs, layer.ys, label=layer.label_text, color=color,
                      linewidth=1.6, zorder=2)
    if plot.logarithmic_y:
        axes.set_yscale("log", nonpositive="mask")
    if plot.with_colorbar:
        if last is None:
            raise PlotError("Plot.colorbar: a colorbar shows the scale of a Cells layer, "
                            "and this plot has none; add one with "
                            ".layer(Cells.matrix(...)) or drop .colorbar()")
        figure.colorbar(last[0], ax=axes, label=last[1].label_text or "")
    if last is None:
        axes.grid(True, alpha=0.3, which="major")
    if plot.title_text is not None:
        axes.set_title(plot.title_text)
    if plot.x_label_text is not None:
        axes.set_xlabel(plot.x_label_text)
    if plot.y_label_text is not None:
        axes.set_ylabel(plot.y_label_text)
    if any(isinstance(layer, (Line, Points)) and layer.label_text for layer in plot.layers):
        axes.legend(loc="best", framealpha=0.85)
    return axes


def _color(name: str | None, matplotlib: Any) -> str | None:
    if name is not None and not matplotlib.colors.is_color_like(name):
        raise PlotError(f"color {name!r} is not a matplotlib color; use a name like "
                        "'tab:blue' or a hex code like '#336699'")
    return name


def _draw_cells(axes: Any, cells: Cells, matplotlib: Any) -> Any:
    try:
        colormap = matplotlib.colormaps[cells.colormap_name]
    except KeyError:
        raise PlotError(f"Cells.colormap: {cells.colormap_name!r} is not a matplotlib "
                        "colormap; try 'viridis', 'magma' or 'RdBu'") from None
    values = np.ma.masked_invalid(np.asarray(cells.values, dtype=np.float64))
    low, high = cells.limits or (None, None)
    return axes.imshow(values, origin="lower", extent=cells.extent, aspect="auto",
                       interpolation="nearest", cmap=colormap, vmin=low, vmax=high,
                       zorder=1)


def _format_of(path: pathlib.Path) -> str:
    file_format = FORMATS.get(path.suffix.lower())
    if file_format is None:
        raise PlotError(f"cannot save a plot as {path.name!r}: the suffix chooses the "
                        f"format and must be one of {sorted(FORMATS)}")
    return file_format


def save_plot(plot: Drawable, path: str | os.PathLike) -> pathlib.Path:
    """Write ``plot`` to ``path`` (format by suffix); see ``write_figure``."""
    path = pathlib.Path(path)
    _format_of(path)
    figure = draw_figure(plot)  # before touching the disk: a bad plot writes nothing
    return write_figure(figure, path, plot.dpi)


def write_figure(figure: Any, path: str | os.PathLike, dpi: int = 100) -> pathlib.Path:
    """Write a matplotlib ``figure`` as PNG or SVG (by suffix) with ``atomic_write``, so
    ``path`` holds either the old file or the new one, never half an image. Missing
    parent directories are created."""
    path = pathlib.Path(path)
    file_format = _format_of(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PlotError(f"cannot create the directory for {path}: {error}") from error
    atomic_write(path, lambda stream: figure.savefig(stream, format=file_format, dpi=dpi))
    return path


def show_plot(plot: Drawable) -> None:
    """Show ``plot`` through pyplot's backend, if that backend can display anything."""
    require_matplotlib()
    pyplot = require("matplotlib.pyplot", PURPOSE)
    backend = str(pyplot.get_backend()).lower()
    if backend in _FILE_ONLY_BACKENDS:
        raise PlotError(f"there is no display to show the plot on (matplotlib's backend "
                        f"is {backend!r}, which only writes files); write it with "
                        "plot.save('plot.png') instead, or set MPLBACKEND to an "
                        "interactive backend")
    width, height = plot.pixels
    figure = pyplot.figure(figsize=(width / plot.dpi, height / plot.dpi), dpi=plot.dpi,
                           layout="constrained")
    try:
        draw_on(figure, plot)
    except BaseException:
        pyplot.close(figure)
        raise
    pyplot.show()


__all__ = ["require_matplotlib", "draw_figure", "draw_on", "save_plot", "write_figure",
           "show_plot", "FORMATS"]
