"""The guide's plates: each example's figure, drawn from the data its ``run`` returned.

``draw(result)`` gives the main plate of one ``GuideResult`` as a ``tensorcode.plot.Plot``;
``draw_loss(result)`` the loss curve of a compiled-training example (noisy sine, two
moons); ``save_plates(result, directory)`` writes every plate of a result and returns
the paths. Plates are built only from ``result.data`` (nothing is trained here), so a
result can be drawn again, or drawn from data saved elsewhere.

``spec_and_state`` and ``named_checkpoint`` are told in text and have no plate:
``draw`` raises ``PlotError`` for them (``has_plate`` says so beforehand) and
``save_plates`` writes nothing and returns an empty list, so a caller can hand it every
result of the guide.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Callable
from typing import Any

from ..plot import Cells, Line, Plot, PlotError, Points
from .result import GUIDE, GuideResult

#: guide examples told in text only: they have no plate
TEXT_ONLY: tuple[str, ...] = ("spec_and_state", "named_checkpoint")

#: the two classes of the two moons over the red-white-blue surface (+1 blue, -1 red):
#: colours outside the colormap (gold, spring green) with a black edge stand out on its
#: saturated ends and on the white boundary alike; the shapes differ too (circle,
#: triangle), so the classes stay apart without colour
_POSITIVE_COLOR = "#ffd700"
_NEGATIVE_COLOR = "#00ff7f"
_CLASS_EDGE = "black"
#: noisy samples recede behind the two curves drawn over them
_SAMPLES_COLOR = "tab:gray"


def _field(result: GuideResult, key: str) -> Any:
    if key not in result.data:
        raise PlotError(f"guide example {result.name!r}: its data has no {key!r} to draw "
                        f"(it has {sorted(result.data)}); pass the GuideResult its run() "
                        "returned")
    return result.data[key]


def _number(result: GuideResult, key: str) -> int:
    value = _field(result, key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlotError(f"guide example {result.name!r}: data[{key!r}] must be a positive "
                        f"integer, got {value!r}")
    return value


def _pair_of_lists(result: GuideResult, key: str) -> tuple[Any, Any]:
    value = _field(result, key)
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise PlotError(f"guide example {result.name!r}: data[{key!r}] must be [xs, ys]")
    return value[0], value[1]


def _curves(result: GuideResult, title: str, y_label: str) -> Plot:
    curves = _field(result, "curves")
    if not isinstance(curves, dict) or not curves:
        raise PlotError(f"guide example {result.name!r}: data['curves'] must map each "
                        "label to its loss per step, and it is empty or not a mapping")
    plot = Plot().title(title).x_label("step").y_label(y_label).log_y()
    for label, losses in curves.items():
        plot = plot.layer(Line.y(losses).label(str(label)))
    return plot


def _surface(result: GuideResult) -> Cells:
    columns, rows = _number(result, "columns"), _number(result, "rows")
    cells = Cells.matrix(columns, _field(result, "surface"))
    if cells.rows != rows:
        raise PlotError(f"guide example {result.name!r}: the surface has {cells.rows} rows "
                        f"but data['rows'] says {rows}")
    x_span, y_span = _pair_of_lists(result, "extents")
    return cells.extents(x_span, y_span)


def _learning_rates(result: GuideResult) -> Plot:
    return _curves(result, "one spec, three learning rates", "loss")


def _two_optimizers(result: GuideResult) -> Plot:
    return _curves(result, "two optimizers, one recorded gradient", "sum of squared errors")


def _xor(result: GuideResult) -> Plot:
    surface = (_surface(result).colormap("RdBu").color_limits(-1.0, 1.0)
               .label("network output"))
    return (Plot().layer(surface).colorbar().title("the learned xor surface")
            .x_label("first input").y_label("second input"))


def _noisy_sine(result: GuideResult) -> Plot:
    return (Plot()
            .layer(Points.xy(_field(result, "samples_x"), _field(result, "samples_y"))
                   .label("samples").color(_SAMPLES_COLOR))
            .layer(Line.function((-3.0, 3.0), math.sin).label("sin x"))
            .layer(Line.xy(_field(result, "grid"), _field(result, "fit")).label("fit"))
            .title("a tanh mlp fit to noisy sin x")
            .x_label("x"))


def _two_moons(result: GuideResult) -> Plot:
    surface = (_surface(result).colormap("RdBu").color_limits(-1.0, 1.0)
               .label("network output"))
    positive_x, positive_y = _pair_of_lists(result, "class_pos")
    negative_x, negative_y = _pair_of_lists(result, "class_neg")
    return (Plot()
            .layer(surface)
            .layer(Points.xy(positive_x, positive_y).label("class +1").color(_POSITIVE_COLOR)
                   .edge(_CLASS_EDGE).marker("o"))
            .layer(Points.xy(negative_x, negative_y).label("class -1").color(_NEGATIVE_COLOR)
                   .edge(_CLASS_EDGE).marker("^"))
            .colorbar()
            .title("the learned decision surface"))


#: example name -> the function drawing its main plate
PLATES: dict[str, Callable[[GuideResult], Plot]] = {
    "learning_rates": _learning_rates,
    "two_optimizers": _two_optimizers,
    "xor": _xor,
    "noisy_sine": _noisy_sine,
    "two_moons": _two_moons,
}

#: examples trained through a compiled plan, whose loss curve is a plate of its own
LOSS_CURVES: dict[str, str] = {
    "noisy_sine": "noisy sine: loss of compiled training",
    "two_moons": "two moons: loss of compiled training",
}


def has_plate(name: str) -> bool:
    """Whether the guide example ``name`` draws a plate (the text-only ones do not)."""
    return name in PLATES


def _check_name(result: GuideResult) -> None:
    if not isinstance(result, GuideResult):
        raise PlotError(f"expected the GuideResult a guide example's run() returns, got "
                        f"{type(result).__name__}")
    if result.name in TEXT_ONLY:
        raise PlotError(f"guide example {result.name!r} is told in text and has no plate; "
                        "check has_plate(name) first, or use save_plates, which writes "
                        "nothing for it")
    if result.name not in PLATES:
        raise PlotError(f"no plate for {result.name!r}: not a guide example "
                        f"(the guide's examples are {GUIDE})")


def _in_context(result: GuideResult, build: Callable[[GuideResult], Plot]) -> Plot:
    try:
        return build(result)
    except PlotError as error:
        if str(error).startswith(f"guide example {result.name!r}"):
            raise
        raise PlotError(f"guide example {result.name!r}: {error}") from error


def draw(result: GuideResult) -> Plot:
    """The main plate of ``result``; ``PlotError`` for a text-only example or data
    missing what the plate needs."""
    _check_name(result)
    return _in_context(result, PLATES[result.name])


def draw_loss(result: GuideResult) -> Plot:
    """The loss per step of a compiled-training example, on a log scale."""
    _check_name(result)
    if result.name not in LOSS_CURVES:
        raise PlotError(f"guide example {result.name!r} has no separate loss-curve plate; "
                        f"those that do are {sorted(LOSS_CURVES)}")

    def build(result: GuideResult) -> Plot:
        return (Plot().title(LOSS_CURVES[result.name]).x_label("step")
                .y_label("sum of squared errors").log_y()
                .layer(Line.y(_field(result, "losses")).label("training loss")))

    return _in_context(result, build)


def plates(result: GuideResult) -> list[tuple[str, Plot]]:
    """Every plate of ``result`` with the file stem it is saved under: the main plate as
    ``<name>``, a loss curve as ``<name>_loss``; empty for a text-only example."""
    if isinstance(result, GuideResult) and result.name in TEXT_ONLY:
        return []
    found = [(result.name, draw(result))]
    if result.name in LOSS_CURVES:
        found.append((f"{result.name}_loss", draw_loss(result)))
    return found


def save_plates(result: GuideResult, directory: str | pathlib.Path,
                suffix: str = ".png") -> list[pathlib.Path]:
    """Write every plate of ``result`` into ``directory`` (created if missing) as
    ``<stem><suffix>`` (``.png`` or ``.svg``); the paths written, in plate order.
    All plates are built before the first file is written, so bad data writes none."""
    built = plates(result)
    directory = pathlib.Path(directory)
    return [plot.save(directory / f"{stem}{suffix}") for stem, plot in built]


__all__ = ["draw", "draw_loss", "plates", "save_plates", "has_plate", "PLATES",
           "LOSS_CURVES", "TEXT_ONLY"]
