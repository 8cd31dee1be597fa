"""The layer and plot builders: validation, immutability and what they hold. None of
this needs matplotlib, so these tests run whether or not the plot extra is installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensorcode.errors import TensorCodeError
from tensorcode.plot import Cells, Line, Plot, PlotError, Points


def test_line_y_places_values_at_their_index():
    line = Line.y([3.0, 2.0, 1.5])
    assert line.xs == (0.0, 1.0, 2.0)
    assert line.ys == (3.0, 2.0, 1.5)


def test_line_xy_keeps_pairs_in_the_order_given():
    line = Line.xy(np.array([2.0, 0.0, 1.0]), [4, 0, 1])
    assert line.xs == (2.0, 0.0, 1.0)
    assert line.ys == (4.0, 0.0, 1.0)


def test_line_copies_its_data_so_later_changes_to_the_source_do_not_leak():
    values = [1.0, 2.0]
    array = np.array([5.0, 6.0])
    line, other = Line.y(values), Line.y(array)
    values.append(3.0)
    array[0] = 99.0
    assert line.ys == (1.0, 2.0)
    assert other.ys == (5.0, 6.0)


def test_line_function_samples_both_ends_of_the_range():
    line = Line.function((-3.0, 3.0), math.sin)
    assert len(line.xs) == 200
    assert line.xs[0] == -3.0 and line.xs[-1] == 3.0
    assert line.ys[0] == pytest.approx(math.sin(-3.0))
    assert line.ys[100] == pytest.approx(math.sin(line.xs[100]))


def test_line_function_accepts_numpy_functions_ranges_and_a_sample_count():
    line = Line.function(range(0, 2), np.exp, samples=3)
    assert line.xs == (0.0, 1.0, 2.0)
    assert line.ys == pytest.approx((1.0, math.e, math.e ** 2))


def test_line_function_names_the_point_where_the_function_failed():
    with pytest.raises(PlotError, match=r"f\(0\.0\) failed: math domain error"):
        Line.function((0.0, 1.0), math.log, samples=2)


@pytest.mark.parametrize("bad, message", [
    ((1.0, 1.0), "both ends are 1.0"),
    ((0.0, math.inf), "must be finite"),
    ("ab", "pair"),
    ((1.0,), "pair"),
])
def test_line_function_rejects_bad_ranges(bad, message):
    with pytest.raises(PlotError, match=message):
        Line.function(bad, math.sin)


def test_line_function_rejects_too_few_samples_and_non_callables():
    with pytest.raises(PlotError, match="samples must be an integer of at least 2"):
        Line.function((0, 1), math.sin, samples=1)
    with pytest.raises(PlotError, match="f must be callable"):
        Line.function((0, 1), 3.0)


@pytest.mark.parametrize("bad, message", [
    ([], "empty"),
    ("123", "the string"),
    ([[1.0, 2.0], [3.0, 4.0]], r"one-dimensional, got shape \(2, 2\)"),
    (["a", "b"], "numbers"),
    (5, "numbers"),
])
def test_line_y_rejects_what_is_not_a_flat_list_of_numbers(bad, message):
    with pytest.raises(PlotError, match=message) as caught:
        Line.y(bad)
    assert "Line.y" in str(caught.value)
    assert isinstance(caught.value, TensorCodeError)


def test_xy_builders_need_one_y_per_x():
    with pytest.raises(PlotError, match="xs has 3 values but ys has 2"):
        Line.xy([1, 2, 3], [1, 2])
    with pytest.raises(PlotError, match=r"Points\.xy: xs has 1 values but ys has 2"):
        Points.xy([1], [1, 2])


def test_label_and_color_return_new_layers_and_leave_the_original_alone():
    line = Line.y([1.0, 2.0])
    labelled = line.label("loss").color("tab:red")
    assert line.label_text is None and line.color_name is None
    assert labelled.label_text == "loss" and labelled.color_name == "tab:red"
    assert labelled.ys == line.ys
    points = Points.xy([0], [1]).label("samples")
    assert points.label_text == "samples"
    with pytest.raises(PlotError, match=r"Line\.label: expected a string"):
        line.label(3)


def test_cells_matrix_takes_flat_values_row_after_row():
    cells = Cells.matrix(3, range(6))
    assert cells.rows == 2 and cells.columns == 3
    assert cells.values == ((0.0, 1.0, 2.0), (3.0, 4.0, 5.0))
    assert cells.extent == (0.0, 3.0, 0.0, 2.0)


def test_cells_matrix_takes_rows_of_columns():
    cells = Cells.matrix(2, [[1, 2], [3, 4], [5, 6]])
    assert cells.rows == 3
    assert cells.values[2] == (5.0, 6.0)


@pytest.mark.parametrize("columns, values, message", [
    (4, range(6), "6 values do not fill whole rows of 4 columns"),
    (3, [[1, 2], [3, 4]], r"shape \(2, 2\) but columns is 3"),
    (0, [1.0], "columns must be a positive integer"),
    (2, [[[1.0, 2.0]]], "flat or two-dimensional"),
    (2, [[1.0], [2.0, 3.0]], "equal-length rows"),
])
def test_cells_matrix_rejects_values_that_do_not_make_a_grid(columns, values, message):
    with pytest.raises(PlotError, match=message):
        Cells.matrix(columns, values)


def test_cells_extents_and_limits():
    cells = Cells.matrix(2, [1, 2, 3, 4]).extents((-1.5, 2.5), (-1.0, 1.5))
    assert cells.extent == (-1.5, 2.5, -1.0, 1.5)
    assert cells.color_limits(-1, 1).limits == (-1.0, 1.0)
    with pytest.raises(PlotError, match=r"Cells\.extents: y is empty"):
        cells.extents((0, 1), (2, 2))


def test_plot_builders_return_new_plots():
    base = Plot()
    decorated = base.title("t").x_label("x").y_label("y").log_y().colorbar()
    layered = decorated.layer(Line.y([1.0]))
    assert base == Plot()
    assert base.layers == () and decorated.layers == ()
    assert len(layered.layers) == 1
    assert (decorated.title_text, decorated.x_label_text, decorated.y_label_text) == ("t", "x", "y")
    assert decorated.logarithmic_y and decorated.with_colorbar
    assert not base.logarithmic_y and not base.with_colorbar


def test_plot_layer_rejects_what_is_not_a_layer():
    with pytest.raises(PlotError, match="expected a Line, Points or Cells layer"):
        Plot().layer([1, 2, 3])


def test_plot_size_is_checked():
    assert Plot().size(640, 480).pixels == (640, 480)
    with pytest.raises(PlotError, match="width must be an integer"):
        Plot().size(0, 480)
    with pytest.raises(PlotError, match="dpi must be an integer"):
        Plot().size(640, 480, dpi=2.5)
    with pytest.raises(PlotError, match=r"Plot\.title: expected a string"):
        Plot().title(None)


def test_reprs_summarise_instead_of_listing_every_value():
    plot = (Plot().title("t").log_y()
            .layer(Line.function((0, 1), math.sin, samples=5000).label("sin x"))
            .layer(Cells.matrix(3, range(6))))
    text = repr(plot)
    assert "Line(5000 points, label='sin x')" in text
    assert "Cells(2x3" in text and "log_y" in text
    assert len(text) < 300
