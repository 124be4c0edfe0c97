"""``features.png`` and ``profiles.png`` of ``evogan validate``, read from their matplotlib axes:
bins that resolve the reference under a poor model, ratio axes that follow their points and
mark those off them, log moment panels where a model is far off, and a depth axis whose
labels do not pile up past the last layer."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import StepPatch

from evogan.data.synthetic import generate_showers
from evogan.physics.ensemble import observables
from evogan.physics.features import FeatureTable, shower_features
from evogan.physics.inspect import energy_edges
from evogan.plots.gan import OUTSIDE_NOTE, features_figure, profiles_figure
from evogan.plots.scales import RATIO_MAX, ratio_limits

EVENTS = 200
POOR_SCALE = 25.0  # a generator whose energy scale is 25 times the reference's


@pytest.fixture(scope="module")
def tables() -> dict[str, FeatureTable]:
    energy = np.random.default_rng(0).uniform(10.0, 200.0, EVENTS)
    showers = {
        "reference": generate_showers(energy, np.random.default_rng(1)),
        "good": generate_showers(energy, np.random.default_rng(2)),
        "poor": POOR_SCALE * generate_showers(energy, np.random.default_rng(3)),
    }
    return {name: shower_features(cells, energy) for name, cells in showers.items()}


def _panels(fig: Figure, reference: FeatureTable) -> dict[str, tuple[Axes, Axes]]:
    """(histogram, ratio) axes of every scalar feature, in the order the figure draws them."""
    axes = fig.axes
    return {name: (axes[2 * k], axes[2 * k + 1]) for k, name in enumerate(reference.scalars)}


def _stairs(top: Axes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference and generated fractions per bin, and the bin edges, as drawn."""
    ref, gen = [p for p in top.patches if isinstance(p, StepPatch)]
    return ref.get_data().values, gen.get_data().values, ref.get_data().edges


def _triangles(ax: Axes, marker: str) -> int:
    return sum(len(line.get_xdata()) for line in ax.lines if line.get_marker() == marker)


@pytest.mark.parametrize("name", ["energy_ratio", "hits", "sparsity"])
def test_a_poor_model_leaves_the_reference_resolved(tables, name: str) -> None:
    reference, poor = tables["reference"], tables["poor"]
    top, _ = _panels(features_figure(reference, poor, headline="t"), reference)[name]
    ref, _, edges = _stairs(top)
    assert np.count_nonzero(ref) >= 10, f"{name}: the reference fills {np.count_nonzero(ref)} bins"
    low, high = np.percentile(reference.scalars[name], [0.5, 99.5])
    assert edges[0] <= low and edges[-1] >= high
    values = poor.scalars[name]
    off = np.mean(values < edges[0]) + np.mean(values > edges[-1])
    notes = [t.get_text() for t in top.texts]
    if off >= OUTSIDE_NOTE:  # the axis stays on the reference and says where the rest is
        assert any("gen off axis" in text for text in notes), notes
    else:  # near enough to share the axis: the generated bulk is on it
        gen_low, gen_high = np.percentile(values, [0.5, 99.5])
        assert edges[0] <= gen_low and edges[-1] >= gen_high and not notes
    if name == "energy_ratio":  # 25 times the reference's: off the axis, all of it
        assert off > 0.99 and "100% above" in notes[0]


def test_integer_features_get_one_bin_per_value() -> None:
    from evogan.plots.gan import _edges

    ref = np.random.default_rng(4).integers(3, 12, 500).astype(float)
    edges = _edges(ref, ref + 1, 40)
    assert np.allclose(np.diff(edges), 1.0) and np.allclose(edges % 1.0, 0.5)


def test_ratio_axes_follow_their_points_and_mark_those_off_them(tables) -> None:
    reference = tables["reference"]
    for model in ("good", "poor"):
        fig = features_figure(reference, tables[model], headline="t")
        for name, (top, bottom) in _panels(fig, reference).items():
            ref, gen, _ = _stairs(top)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(ref > 0, gen / ref, np.where(gen > 0, np.inf, np.nan))
            low, high = bottom.get_ylim()
            assert low == 0.0 and 2.0 <= high <= RATIO_MAX, (model, name, low, high)
            (points,) = bottom.containers  # every ratio on the axis is drawn with its error
            drawn = np.asarray(points.lines[0].get_ydata())
            assert ((drawn >= low) & (drawn <= high)).all(), (model, name)
            assert len(drawn) == np.sum(ratio <= high), (model, name)  # all but those marked
            assert _triangles(bottom, "^") == np.sum(ratio > high), (model, name)
        if model == "good":  # a model like the reference keeps a ratio axis near 1
            highs = [bottom.get_ylim()[1] for _, bottom in _panels(fig, reference).values()]
            assert np.median(highs) == 2.0, highs
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("off its axis" in text for text in legend), legend


def test_ratio_limits() -> None:
    assert ratio_limits(np.array([0.0, 0.95, 1.05])) == (0.0, 2.0)
    assert ratio_limits(np.array([0.2, 1.0, 9.0])) == (0.0, RATIO_MAX)
    assert ratio_limits(np.array([1.0, 2.6]))[1] == pytest.approx(1.08 * 2.6)
    # an empty reference bin (inf) or a tail bin known to worse than 50% leaves the axis alone
    assert ratio_limits(np.array([0.9, np.inf, np.nan])) == (0.0, 2.0)
    assert ratio_limits(np.array([0.9, 1.1, 3.0]), np.array([0.05, 0.05, 2.0])) == (0.0, 2.0)
    assert ratio_limits(np.array([0.9, 3.0]), np.array([0.05, 0.3]))[1] > 3.0


def _profiles(tables, model: str) -> Figure:
    reference = tables["reference"]
    edges = energy_edges(float(reference.energy.min()), float(reference.energy.max()))
    return profiles_figure(
        observables(reference, edges),
        observables(tables[model], edges),
        energy_edges=edges,
        headline="t",
    )


def _axis(fig: Figure, ylabel: str) -> Axes:
    return next(ax for ax in fig.axes if ax.get_ylabel() == ylabel)


def test_moment_panels_go_log_only_where_the_model_is_far_off(tables) -> None:
    poor, good = _profiles(tables, "poor"), _profiles(tables, "good")
    ratio = _axis(poor, "E_total / E_primary")
    assert ratio.get_yscale() == "log"
    low, high = ratio.get_ylim()
    drawn = next(c for c in ratio.containers if c.get_label() == "reference")
    ref_y = np.asarray(drawn.lines[0].get_ydata())
    # the reference's ~0.02 sits well inside the axis, not flattened against its bottom
    assert low < ref_y.min() and np.log(ref_y.min() / low) / np.log(high / low) > 0.02
    labels = [t.get_text() for t in ratio.get_yticklabels()]
    assert "0.02" in labels, labels
    assert _axis(good, "E_total / E_primary").get_yscale() == "linear"
    assert _axis(poor, "depth centre (X0)").get_yscale() == "linear"


@pytest.mark.slow
def test_depth_labels_past_the_last_layer_do_not_pile_up(tables) -> None:
    fig = _profiles(tables, "good")
    layer = next(ax for ax in fig.axes if ax.get_xlabel() == "layer")
    (depth,) = layer.child_axes
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    shown = [t for t in depth.xaxis.get_ticklabels() if t.get_visible() and t.get_text()]
    boxes = sorted((t.get_window_extent(renderer) for t in shown), key=lambda box: box.x0)
    assert len(boxes) >= 4
    for left, right in pairwise(boxes):  # apart by more than a label
        gap = 0.5 * (right.x0 + right.x1 - left.x0 - left.x1)
        assert gap > 1.5 * max(left.width, right.width), [t.get_text() for t in shown]
