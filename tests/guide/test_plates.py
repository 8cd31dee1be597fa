"""The guide's plates, drawn from synthetic results shaped like each example's data
(so these tests train nothing), plus one real example run in quick mode and drawn.
Rendering needs the plot extra, which the test extra installs."""

from __future__ import annotations

import math
import struct

import matplotlib
import numpy as np
import pytest

from tensorcode.guide import GUIDE, GuideResult, load
from tensorcode.guide.plates import (
    LOSS_CURVES,
    PLATES,
    TEXT_ONLY,
    draw,
    draw_loss,
    has_plate,
    plates,
    save_plates,
)
from tensorcode.plot import Plot, PlotError


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def _losses(steps: int, rate: float) -> list[float]:
    return [10.0 * math.exp(-rate * step) for step in range(steps)]


def _surface(rows: int, columns: int, x_span, y_span) -> list[list[float]]:
    xs = np.linspace(*x_span, columns)
    ys = np.linspace(*y_span, rows)
    return np.tanh(np.outer(ys, np.ones(columns)) - np.outer(np.ones(rows), xs)).tolist()


def synthetic(name: str) -> GuideResult:
    """A result of the guide example ``name`` with made-up data of the real keys."""
    if name in ("learning_rates", "two_optimizers"):
        labels = (["lr 0.005", "lr 0.02", "lr 0.05"] if name == "learning_rates"
                  else ["sgd, lr 0.003", "adam, lr 0.005"])
        data = {"curves": {label: _losses(50, 0.05 * (i + 1)) for i, label in enumerate(labels)}}
    elif name == "xor":
        data = {"surface": _surface(12, 24, (0, 1), (0, 1)), "columns": 24, "rows": 12,
                "extents": [[0.0, 1.0], [0.0, 1.0]]}
    elif name == "noisy_sine":
        samples = np.linspace(-3, 3, 96)
        grid = np.linspace(-3, 3, 96)
        data = {"samples_x": samples.tolist(),
                "samples_y": (np.sin(samples) + 0.1 * np.cos(7 * samples)).tolist(),
                "grid": grid.tolist(), "fit": np.sin(grid).tolist(),
                "losses": _losses(100, 0.03)}
    elif name == "two_moons":
        angle = np.linspace(0, math.pi, 100)
        data = {"surface": _surface(16, 48, (-1.5, 2.5), (-1.0, 1.5)), "columns": 48,
                "rows": 16, "extents": [[-1.5, 2.5], [-1.0, 1.5]],
                "class_pos": [np.cos(angle).tolist(), np.sin(angle).tolist()],
                "class_neg": [(1 - np.cos(angle)).tolist(), (0.5 - np.sin(angle)).tolist()],
                "losses": _losses(200, 0.02)}
    else:
        data = {}
    return GuideResult(name, f"the {name} example", ["a line"], data=data)


def test_every_guide_example_is_either_drawn_or_text_only():
    assert sorted(list(PLATES) + list(TEXT_ONLY)) == sorted(GUIDE)
    assert all(has_plate(name) for name in PLATES)
    assert not any(has_plate(name) for name in TEXT_ONLY)


@pytest.mark.parametrize("name, title, lines", [
    ("learning_rates", "one spec, three learning rates", 3),
    ("two_optimizers", "two optimizers, one recorded gradient", 2),
])
def test_loss_curve_plates_draw_one_log_scale_line_per_curve(name, title, lines):
    result = synthetic(name)
    (axes,) = draw(result).figure().axes
    assert axes.get_title() == title
    assert axes.get_yscale() == "log"
    assert axes.get_xlabel() == "step"
    assert len(axes.lines) == lines
    curves = result.data["curves"]
    for line, (label, losses) in zip(axes.lines, curves.items()):
        assert line.get_label() == label
        assert list(line.get_ydata()) == pytest.approx(losses)
    assert axes.get_ylabel() == ("loss" if name == "learning_rates" else "sum of squared errors")


def test_xor_plate_is_the_surface_over_the_unit_square_with_a_colorbar():
    result = synthetic("xor")
    figure = draw(result).figure()
    axes, colorbar = figure.axes
    (image,) = axes.images
    assert axes.get_title() == "the learned xor surface"
    assert tuple(image.get_extent()) == (0.0, 1.0, 0.0, 1.0)
    assert image.get_array().shape == (12, 24)
    np.testing.assert_allclose(image.get_array(), result.data["surface"])
    assert colorbar.get_ylabel() == "network output"


def test_noisy_sine_plate_has_samples_sin_x_and_the_fit():
    result = synthetic("noisy_sine")
    (axes,) = draw(result).figure().axes
    assert axes.get_title() == "a tanh mlp fit to noisy sin x"
    (samples,) = axes.collections
    assert samples.get_offsets().shape == (96, 2)
    sine, fit = axes.lines
    assert (sine.get_label(), fit.get_label()) == ("sin x", "fit")
    assert sine.get_xdata()[0] == -3.0 and sine.get_xdata()[-1] == 3.0
    np.testing.assert_allclose(sine.get_ydata(), np.sin(sine.get_xdata()))
    np.testing.assert_allclose(fit.get_ydata(), result.data["fit"])
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["samples", "sin x", "fit"]


@pytest.mark.parametrize("name", sorted(LOSS_CURVES))
def test_compiled_training_examples_have_a_log_scale_loss_curve(name):
    result = synthetic(name)
    (axes,) = draw_loss(result).figure().axes
    assert axes.get_yscale() == "log"
    (line,) = axes.lines
    assert list(line.get_ydata()) == pytest.approx(result.data["losses"])
    assert "compiled training" in axes.get_title()


def test_two_moons_plate_has_the_surface_both_classes_and_a_colorbar():
    result = synthetic("two_moons")
    figure = draw(result).figure()
    axes, _colorbar = figure.axes
    (image,) = axes.images
    assert tuple(image.get_extent()) == (-1.5, 2.5, -1.0, 1.5)
    assert image.get_array().shape == (16, 48)
    assert image.get_clim() == (-1.0, 1.0)
    positive, negative = axes.collections
    np.testing.assert_allclose(positive.get_offsets()[:, 0], result.data["class_pos"][0])
    np.testing.assert_allclose(negative.get_offsets()[:, 1], result.data["class_neg"][1])
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["class +1", "class -1"]
    assert axes.get_title() == "the learned decision surface"


def test_two_moons_class_markers_stand_out_on_every_colour_of_the_surface():
    """Each class's fill is far from every colour of the RdBu surface (so neither
    disappears on a saturated end or on the white boundary), outlined in black, and the
    two classes differ in shape as well as colour."""

    figure = draw(synthetic("two_moons")).figure()
    axes, _colorbar = figure.axes
    surface = matplotlib.colormaps["RdBu"](np.linspace(0.0, 1.0, 256))[:, :3]
    positive, negative = axes.collections
    for points in (positive, negative):
        fill = points.get_facecolors()[0][:3]
        assert np.min(np.linalg.norm(surface - fill, axis=1)) > 0.45
        np.testing.assert_allclose(points.get_edgecolors()[0][:3], 0.0)
    shapes = [len(points.get_paths()[0].vertices) for points in (positive, negative)]
    assert shapes[0] != shapes[1]  # a circle and a triangle
    assert np.linalg.norm(positive.get_facecolors()[0][:3]
                          - negative.get_facecolors()[0][:3]) > 0.45


@pytest.mark.parametrize("name", sorted(PLATES))
def test_every_plate_renders_to_a_png_of_the_expected_size(name, tmp_path):
    paths = save_plates(synthetic(name), tmp_path / "plates")
    expected = [f"{name}.png"] + ([f"{name}_loss.png"] if name in LOSS_CURVES else [])
    assert [p.name for p in paths] == expected
    assert all(png_size(path) == (800, 500) for path in paths)


def test_save_plates_writes_svg_when_asked(tmp_path):
    (path,) = save_plates(synthetic("xor"), tmp_path, suffix=".svg")
    assert path.name == "xor.svg" and "<svg" in path.read_text()


@pytest.mark.parametrize("name", TEXT_ONLY)
def test_text_only_examples_have_no_plate(name, tmp_path):
    result = synthetic(name)
    with pytest.raises(PlotError, match=f"{name!r} is told in text and has no plate"):
        draw(result)
    assert plates(result) == []
    assert save_plates(result, tmp_path / "plates") == []
    assert not (tmp_path / "plates").exists()


def test_missing_or_malformed_data_is_named():
    with pytest.raises(PlotError, match="'xor': its data has no 'surface'"):
        draw(GuideResult("xor", "t", [], data={"columns": 2, "rows": 1}))
    broken = synthetic("two_moons")
    broken.data["rows"] = 15
    with pytest.raises(PlotError, match="the surface has 16 rows but data\\['rows'\\] says 15"):
        draw(broken)
    ragged = synthetic("noisy_sine")
    ragged.data["fit"] = ragged.data["fit"][:-1]
    with pytest.raises(PlotError, match=r"'noisy_sine': Line\.xy: xs has 96 values but ys has 95"):
        draw(ragged)
    with pytest.raises(PlotError, match="has no separate loss-curve plate"):
        draw_loss(synthetic("xor"))
    with pytest.raises(PlotError, match="not a guide example"):
        draw(GuideResult("nonsense", "t", []))
    with pytest.raises(PlotError, match="expected the GuideResult"):
        draw({"name": "xor"})


def test_bad_data_writes_no_plate_at_all(tmp_path):
    broken = synthetic("noisy_sine")
    del broken.data["losses"]  # the main plate is fine, its loss curve is not
    with pytest.raises(PlotError, match="no 'losses'"):
        save_plates(broken, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", sorted(PLATES))
def test_a_real_guide_example_in_quick_mode_draws_its_plates(name, tmp_path):
    result = load(name).run(quick=True)
    assert isinstance(draw(result), Plot)
    paths = save_plates(result, tmp_path)
    assert len(paths) == (2 if name in LOSS_CURVES else 1)
    assert all(png_size(path) == (800, 500) for path in paths)
    axes = draw(result).figure().axes[0]
    if "curves" in result.data:
        assert len(axes.lines) == len(result.data["curves"]) >= 2
        assert axes.get_yscale() == "log"
    if "surface" in result.data:
        assert axes.images[0].get_array().shape == (result.data["rows"], result.data["columns"])
        assert list(axes.images[0].get_extent()) == [v for span in result.data["extents"]
                                                      for v in span]
    if name == "noisy_sine":
        assert len(axes.collections[0].get_offsets()) == len(result.data["samples_x"])
        np.testing.assert_allclose(axes.lines[1].get_ydata(), result.data["fit"])
