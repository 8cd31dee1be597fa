"""Drawing plots with matplotlib on the Agg canvas (no display needed): images of the
expected size, layers present on the axes, log scale and extents applied, atomic saves.
The test extra installs the plot extra (matplotlib)."""

from __future__ import annotations

import math
import os

import matplotlib  # noqa: F401  (the test extra installs the plot extra)
import numpy as np
import pytest

from tensorcode.plot import Cells, Line, Plot, PlotError, Points


def _curves() -> Plot:
    return (Plot().title("losses").x_label("step").y_label("loss").log_y()
            .layer(Line.y([10.0, 1.0, 0.1]).label("fast"))
            .layer(Line.y([10.0, 5.0, 2.5]).label("slow")))


def _surface() -> Plot:
    return (Plot().title("surface")
            .layer(Cells.matrix(3, np.arange(6.0)).extents((-1.5, 2.5), (-1.0, 1.5))
                   .label("value"))
            .layer(Points.xy([0.0, 1.0], [0.5, -0.5]).label("class +1"))
            .colorbar())


def test_png_has_the_default_size(tmp_path, read_png_size):
    path = _curves().save(tmp_path / "curves.png")
    assert path == tmp_path / "curves.png"
    assert read_png_size(path) == (800, 500)


def test_png_has_the_size_asked_for_with_a_colorbar_too(tmp_path, read_png_size):
    path = _surface().size(640, 320, dpi=80).save(tmp_path / "surface.png")
    assert read_png_size(path) == (640, 320)


def test_svg_by_suffix(tmp_path):
    path = _curves().save(tmp_path / "curves.SVG")
    text = path.read_text()
    assert "<svg" in text and "losses" in text


def test_unknown_suffix_is_refused_and_nothing_is_written(tmp_path):
    with pytest.raises(PlotError, match=r"must be one of \['.png', '.svg'\]"):
        _curves().save(tmp_path / "curves.jpg")
    assert list(tmp_path.iterdir()) == []


def test_save_creates_missing_directories_and_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "a" / "b" / "plot.png"
    _curves().save(target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["plot.png"]
    mode = target.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_a_plot_that_cannot_be_drawn_leaves_the_old_file_untouched(tmp_path):
    target = tmp_path / "plot.png"
    _curves().save(target)
    before = target.read_bytes()
    broken = Plot().layer(Line.y([1.0])).colorbar()  # a colorbar needs a Cells layer
    with pytest.raises(PlotError, match="a colorbar shows the scale of a Cells layer"):
        broken.save(target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]


def test_lines_are_drawn_with_their_data_labels_and_log_scale():
    figure = _curves().figure()
    (axes,) = figure.axes
    assert axes.get_yscale() == "log"
    assert axes.get_xscale() == "linear"
    assert len(axes.lines) == 2
    assert list(axes.lines[0].get_ydata()) == [10.0, 1.0, 0.1]
    assert list(axes.lines[1].get_xdata()) == [0.0, 1.0, 2.0]
    assert [text.get_text() for text in axes.get_legend().get_texts()] == ["fast", "slow"]
    assert axes.get_title() == "losses"
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("step", "loss")


def test_without_log_y_the_scale_stays_linear_and_unlabelled_layers_make_no_legend():
    (axes,) = Plot().layer(Line.function((-3, 3), math.sin)).figure().axes
    assert axes.get_yscale() == "linear"
    assert axes.get_legend() is None
    assert len(axes.lines[0].get_xdata()) == 200


def test_cells_are_drawn_over_their_extents_with_points_and_a_colorbar():
    figure = _surface().figure()
    axes, colorbar_axes = figure.axes
    (image,) = axes.images
    assert tuple(image.get_extent()) == (-1.5, 2.5, -1.0, 1.5)
    assert image.origin == "lower"
    np.testing.assert_array_equal(image.get_array(), [[0, 1, 2], [3, 4, 5]])
    (points,) = axes.collections
    np.testing.assert_array_equal(points.get_offsets(), [[0.0, 0.5], [1.0, -0.5]])
    assert colorbar_axes.get_ylabel() == "value"
    assert image.get_clim() == (0.0, 5.0)


def test_color_limits_and_colormap_reach_the_image():
    cells = Cells.matrix(2, [0.2, 0.4]).colormap("RdBu").color_limits(-1, 1)
    (image,) = Plot().layer(cells).figure().axes[0].images
    assert image.get_clim() == (-1.0, 1.0)
    assert image.get_cmap().name == "RdBu"


def test_unknown_colors_and_colormaps_are_named():
    with pytest.raises(PlotError, match="'not-a-color' is not a matplotlib color"):
        Plot().layer(Line.y([1.0]).color("not-a-color")).figure()
    with pytest.raises(PlotError, match="'no-such-map' is not a matplotlib colormap"):
        Plot().layer(Cells.matrix(1, [1.0]).colormap("no-such-map")).figure()


def test_nonfinite_values_are_drawn_as_gaps(tmp_path, read_png_size):
    plot = (Plot().log_y().layer(Line.y([1.0, math.nan, 0.0, 0.5]))
            .layer(Cells.matrix(2, [1.0, math.inf, 2.0, math.nan])))
    assert read_png_size(plot.save(tmp_path / "gaps.png")) == (800, 500)


def test_show_without_a_display_says_to_save_instead(monkeypatch):
    import matplotlib.pyplot as pyplot
    monkeypatch.setattr(pyplot, "get_backend", lambda: "agg")
    with pytest.raises(PlotError, match=r"no display .* plot.save\('plot.png'\)"):
        _curves().show()


def test_show_with_a_display_draws_through_pyplot(monkeypatch):
    import matplotlib.pyplot as pyplot
    shown = []
    monkeypatch.setattr(pyplot, "get_backend", lambda: "tkagg")
    monkeypatch.setattr(pyplot, "show", lambda: shown.append(
        [len(pyplot.figure(n).axes[0].lines) for n in pyplot.get_fignums()]))
    try:
        _curves().show()
    finally:
        pyplot.close("all")
    assert shown == [[2]]


def test_points_and_lines_share_one_colour_cycle_and_explicit_colours_are_kept():
    from matplotlib.colors import to_hex
    plot = (Plot().layer(Points.xy([0, 1], [0, 1])).layer(Line.y([1.0, 2.0]))
            .layer(Line.y([2.0, 3.0]).color("#123456")))
    (axes,) = plot.figure().axes
    (points,) = axes.collections
    first, second = axes.lines
    colors = [to_hex(points.get_facecolor()[0]), to_hex(first.get_color()),
              to_hex(second.get_color())]
    assert colors[0] != colors[1]
    assert colors[2] == "#123456"


def test_points_take_an_edge_colour_and_a_marker_shape():
    default, marked = Points.xy([0, 1], [0, 1]), Points.xy([0, 1], [1, 0]).color("gold")
    marked = marked.edge("black").marker("^")
    axes = Plot().layer(default).layer(marked).figure().axes[0]
    first, second = axes.collections
    np.testing.assert_allclose(first.get_edgecolors()[0][:3], 1.0)  # white unless told
    np.testing.assert_allclose(second.get_edgecolors()[0][:3], 0.0)
    assert len(first.get_paths()[0].vertices) != len(second.get_paths()[0].vertices)
    with pytest.raises(PlotError, match=r"Points\.marker: expected one of"):
        Points.xy([0], [0]).marker("star")
    with pytest.raises(PlotError, match="not a matplotlib color"):
        Plot().layer(Points.xy([0], [0]).edge("no-such-colour")).figure()
