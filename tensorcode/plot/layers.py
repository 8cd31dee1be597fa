"""The layers a plot composes: ``Line``, ``Points`` and ``Cells``.

Each layer is an immutable value holding plain floats: its data is checked and copied
when the layer is built, so a bad value is reported at the line that made it (not deep
inside a renderer later), and changing the caller's list or array afterwards does not
change the plot. Every refinement (``.label``, ``.color``, ``.extents``, ...) returns a
new layer, like the guide's builders.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from .errors import PlotError

#: how many points ``Line.function`` samples its range at, unless told otherwise
FUNCTION_SAMPLES = 200


def describe_value(value: Any) -> str:
    """A value's repr cut to 60 characters, for error messages."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _floats(values: Any, where: str, what: str = "values") -> tuple[float, ...]:
    """``values`` as a tuple of floats, or a ``PlotError`` saying what was wrong.

    Non-finite entries are kept: matplotlib draws them as gaps, which is what a diverged
    loss curve should look like.
    """
    if isinstance(values, (str, bytes)):
        raise PlotError(f"{where}: {what} must be a flat sequence of numbers, "
                        f"got the string {describe_value(values)}")
    try:
        array = np.asarray(list(values) if not hasattr(values, "__array__") else values,
                           dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise PlotError(f"{where}: {what} must be a flat sequence of numbers, "
                        f"got {describe_value(values)} ({error})") from None
    if array.ndim != 1:
        raise PlotError(f"{where}: {what} must be one-dimensional, got shape "
                        f"{tuple(array.shape)}; flatten it or pass one row")
    if array.size == 0:
        raise PlotError(f"{where}: {what} is empty; there is nothing to draw")
    return tuple(float(v) for v in array)


def _pair(pair: Any, where: str, what: str) -> tuple[float, float]:
    """A ``(low, high)`` span of two distinct finite numbers; a ``range`` counts too."""
    if isinstance(pair, range):
        pair = (pair.start, pair.stop)
    try:
        low, high = pair
        low, high = float(low), float(high)
    except (TypeError, ValueError):
        raise PlotError(f"{where}: {what} must be a pair (low, high) of numbers, "
                        f"got {describe_value(pair)}") from None
    if not (math.isfinite(low) and math.isfinite(high)):
        raise PlotError(f"{where}: {what} must be finite, got ({low}, {high})")
    if low == high:
        raise PlotError(f"{where}: {what} is empty: both ends are {low}; "
                        "give two different numbers")
    return low, high


def checked_text(value: Any, where: str) -> str:
    """``value`` when it is a string, else ``PlotError`` naming ``where``."""
    if not isinstance(value, str):
        raise PlotError(f"{where}: expected a string, got {describe_value(value)}")
    return value


def _extras(layer: Any) -> str:
    parts = []
    if layer.label_text is not None:
        parts.append(f"label={layer.label_text!r}")
    if getattr(layer, "color_name", None) is not None:
        parts.append(f"color={layer.color_name!r}")
    return "".join(f", {part}" for part in parts)


def _same_length(xs: tuple, ys: tuple, where: str) -> None:
    if len(xs) != len(ys):
        raise PlotError(f"{where}: xs has {len(xs)} values but ys has {len(ys)}; "
                        "give one y per x")


@dataclasses.dataclass(frozen=True, repr=False)
class Line:
    """A polyline through ``(xs[i], ys[i])``; build it with ``Line.y``, ``Line.xy`` or
    ``Line.function``."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]
    label_text: str | None = None
    color_name: str | None = None

    @classmethod
    def y(cls, values: Iterable[float]) -> Line:
        """``values`` against their index 0, 1, 2, ... (a loss per step, say)."""
        ys = _floats(values, "Line.y")
        return cls(tuple(float(i) for i in range(len(ys))), ys)

    @classmethod
    def xy(cls, xs: Iterable[float], ys: Iterable[float]) -> Line:
        """``ys`` against ``xs``, in the order given (the line is not sorted)."""
        xs_, ys_ = _floats(xs, "Line.xy", "xs"), _floats(ys, "Line.xy", "ys")
        _same_length(xs_, ys_, "Line.xy")
        return cls(xs_, ys_)

    @classmethod
    def function(cls, span: Sequence[float] | range, f: Callable[[float], float],
                 samples: int = FUNCTION_SAMPLES) -> Line:
        """``f`` sampled at ``samples`` evenly spaced points of ``span = (start, stop)``,
        both ends included. ``f`` is called once per point with a Python float, so
        ``math.sin`` and ``numpy.sin`` both work; it is evaluated now, not at render."""
        start, stop = _pair(span, "Line.function", "the range")
        if not isinstance(samples, int) or isinstance(samples, bool) or samples < 2:
            raise PlotError(f"Line.function: samples must be an integer of at least 2, "
                            f"got {describe_value(samples)}")
        if not callable(f):
            raise PlotError(f"Line.function: f must be callable, got {describe_value(f)}")
        xs = tuple(float(x) for x in np.linspace(start, stop, samples))
        ys = []
        for x in xs:
            try:
                ys.append(float(f(x)))
            except Exception as error:  # the caller's function: say where it failed
                raise PlotError(f"Line.function: f({x!r}) failed: {error}") from error
        return cls(xs, tuple(ys))

    def label(self, text: str) -> Line:
        """The name this line has in the legend."""
        return dataclasses.replace(self, label_text=checked_text(text, "Line.label"))

    def color(self, color: str) -> Line:
        """Any matplotlib color (``"tab:red"``, ``"#336699"``); checked at render."""
        return dataclasses.replace(self, color_name=checked_text(color, "Line.color"))

    def __repr__(self) -> str:  # the summary, not every float
        return f"Line({len(self.xs)} points{_extras(self)})"


@dataclasses.dataclass(frozen=True, repr=False)
class Points:
    """Unconnected markers at ``(xs[i], ys[i])``: samples, classes of a data set."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]
    label_text: str | None = None
    color_name: str | None = None
    edge_name: str = "white"
    marker_name: str = "o"

    #: marker shapes (matplotlib's codes): circle, triangle up and down, square, diamond
    MARKERS: ClassVar[tuple[str, ...]] = ("o", "^", "v", "s", "D")

    @classmethod
    def xy(cls, xs: Iterable[float], ys: Iterable[float]) -> Points:
        """Points at ``(xs[i], ys[i])``; the two must have the same length."""
        xs_, ys_ = _floats(xs, "Points.xy", "xs"), _floats(ys, "Points.xy", "ys")
        _same_length(xs_, ys_, "Points.xy")
        return cls(xs_, ys_)

    def label(self, text: str) -> Points:
        """The name these points have in the legend."""
        return dataclasses.replace(self, label_text=checked_text(text, "Points.label"))

    def color(self, color: str) -> Points:
        """Any matplotlib color; checked at render."""
        return dataclasses.replace(self, color_name=checked_text(color, "Points.color"))

    def edge(self, color: str) -> Points:
        """The colour of each marker's outline (white unless told); any matplotlib color,
        checked at render. A dark edge keeps light markers visible on light cells."""
        return dataclasses.replace(self, edge_name=checked_text(color, "Points.edge"))

    def marker(self, shape: str) -> Points:
        """The marker's shape, one of ``MARKERS`` (``"o"`` unless told): a second cue
        beside colour, so classes stay apart for every reader and in grayscale."""
        if shape not in self.MARKERS:
            raise PlotError(f"Points.marker: expected one of {list(self.MARKERS)}, got "
                            f"{describe_value(shape)}")
        return dataclasses.replace(self, marker_name=shape)

    def __repr__(self) -> str:
        return f"Points({len(self.xs)} points{_extras(self)})"


@dataclasses.dataclass(frozen=True, repr=False)
class Cells:
    """A grid of values drawn as coloured cells: a learned surface, a heat map.

    Row 0 is the bottom row (smallest y), matching a grid of cell centres built row by
    row upwards, as the guide builds its surfaces. Without ``extents`` the cells span
    ``(0, columns)`` by ``(0, rows)``.
    """

    columns: int
    values: tuple[tuple[float, ...], ...]
    x_span: tuple[float, float] | None = None
    y_span: tuple[float, float] | None = None
    label_text: str | None = None
    colormap_name: str = "viridis"
    limits: tuple[float, float] | None = None

    @property
    def rows(self) -> int:
        """The number of rows in the grid."""
        return len(self.values)

    @classmethod
    def matrix(cls, columns: int, values: Any) -> Cells:
        """``values`` as a grid ``columns`` wide: either flat, row after row (its length
        a multiple of ``columns``), or already two-dimensional, ``rows x columns``."""
        if not isinstance(columns, int) or isinstance(columns, bool) or columns < 1:
            raise PlotError(f"Cells.matrix: columns must be a positive integer, "
                            f"got {describe_value(columns)}")
        try:
            array = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise PlotError(f"Cells.matrix: values must be numbers, flat or as equal-length "
                            f"rows, got {describe_value(values)} ({error})") from None
        if array.ndim == 1:
            if array.size == 0 or array.size % columns:
                raise PlotError(f"Cells.matrix: {array.size} values do not fill whole rows "
                                f"of {columns} columns; give rows x columns values")
            array = array.reshape(-1, columns)
        elif array.ndim == 2:
            if array.shape[1] != columns or array.shape[0] == 0:
                raise PlotError(f"Cells.matrix: values have shape {tuple(array.shape)} "
                                f"but columns is {columns}; give rows x {columns} values")
        else:
            raise PlotError(f"Cells.matrix: values must be flat or two-dimensional, got "
                            f"shape {tuple(array.shape)}")
        return cls(columns, tuple(tuple(float(v) for v in row) for row in array))

    def extents(self, x: Sequence[float], y: Sequence[float]) -> Cells:
        """The region the grid covers: ``x = (x0, x1)`` left to right, ``y = (y0, y1)``
        bottom to top, in data coordinates (so points drawn over it line up)."""
        return dataclasses.replace(self, x_span=_pair(x, "Cells.extents", "x"),
                                   y_span=_pair(y, "Cells.extents", "y"))

    def label(self, text: str) -> Cells:
        """The caption of the colorbar (cells have no legend entry)."""
        return dataclasses.replace(self, label_text=checked_text(text, "Cells.label"))

    def colormap(self, name: str) -> Cells:
        """A matplotlib colormap name (``"RdBu"``, ``"magma"``); checked at render."""
        return dataclasses.replace(self, colormap_name=checked_text(name, "Cells.colormap"))

    def color_limits(self, low: float, high: float) -> Cells:
        """The values mapped to the ends of the colormap; a symmetric pair puts zero
        (a decision boundary) at the middle colour."""
        return dataclasses.replace(self, limits=_pair((low, high), "Cells.color_limits",
                                                       "the limits"))

    @property
    def extent(self) -> tuple[float, float, float, float]:
        """``(x0, x1, y0, y1)`` as drawn."""
        x0, x1 = self.x_span or (0.0, float(self.columns))
        y0, y1 = self.y_span or (0.0, float(self.rows))
        return x0, x1, y0, y1

    def __repr__(self) -> str:
        return (f"Cells({self.rows}x{self.columns}, extent={self.extent}, "
                f"colormap={self.colormap_name!r}{_extras(self)})")


Layer = Line | Points | Cells

__all__ = ["Line", "Points", "Cells", "Layer", "FUNCTION_SAMPLES"]
