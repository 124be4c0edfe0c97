"""Axis ranges the figures share, so that one poor model or one diverged candidate does not
flatten everything else: ratio axes that extend to their points (those beyond marked on the
edge), a fitness range that leaves out far outliers (marked likewise), reference lines
that do not move the range the curves set, and the depth in X0 on a layer axis's top."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from evogan.detectors import Detector
from evogan.physics.features import depth_centres

RATIO_MAX = 4.0
"""The highest a ratio axis reaches: a point beyond it (or over an empty reference bin) is a
triangle on the axis's top edge."""
RATIO_PRECISION = 0.5
"""A ratio measured to better than this fraction of its value sets the range of its axis."""
RATIO_HIGH = 2.0
"""A ratio axis reaches at least this: 0-2 for a model near the reference, as is usual."""
FENCE = 3.0
"""Tukey's far-out fence, in interquartile ranges above the upper quartile: values beyond it
are left off a fitness axis (and marked on its edge)."""
LOG_ENERGY_SPAN = 100
"""Primary energies spanning more than this factor (CaloChallenge's 1 GeV-1 TeV, drawn
log-uniform) are drawn on a log axis, where their bins lie evenly."""
LOG_SPREAD = 3.0
"""Positive curves whose values span more than this factor get a log axis."""


def ratio_limits(ratios: np.ndarray, errors: np.ndarray | None = None) -> tuple[float, float]:
    """A ratio axis from 0 to RATIO_HIGH, or higher where a point measured to better than
    RATIO_PRECISION of its value (any finite one without ``errors``) needs it, with a margin,
    up to RATIO_MAX. A point above the axis, a tail bin of a few events or an empty reference
    bin (+inf) among them, is marked on its top edge (:func:`mark_off_scale`)."""
    ratios = np.asarray(ratios, dtype=np.float64)
    judged = np.isfinite(ratios)
    if errors is not None:
        with np.errstate(invalid="ignore"):
            judged &= np.asarray(errors, dtype=np.float64) <= RATIO_PRECISION * ratios
    highest = float(ratios[judged].max()) if judged.any() else 0.0
    return 0.0, float(np.clip(1.08 * highest, RATIO_HIGH, RATIO_MAX))


def mark_off_scale(ax: Axes, x: np.ndarray, y: np.ndarray, high: float, colour: str) -> None:
    """Hollow triangles on the top edge of ``ax`` at the ``x`` of every ``y`` above ``high``
    (+inf included). Call after the y limits are final."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    above = y > high
    if above.any():
        ax.plot(
            x[above],
            np.full(int(above.sum()), high),
            ls="",
            marker="^",
            ms=6,
            mfc="white",
            mec=colour,
            clip_on=False,
            zorder=5,
        )


def off_scale_handle(colour: str, label: str) -> Line2D:
    """A legend entry for the triangles of :func:`mark_off_scale`."""
    return Line2D([], [], ls="", marker="^", ms=6, mfc="white", mec=colour, label=label)


def upper_fence(values: Sequence[float]) -> float:
    """Tukey's far-out fence of the finite ``values`` (upper quartile + FENCE interquartile
    ranges); inf when there are fewer than four to judge by."""
    finite = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
    if finite.size < 4:
        return float("inf")
    q1, q3 = np.percentile(finite, [25, 75])
    return float(q3 + FENCE * (q3 - q1))


def spans_factor(values: Sequence[float], factor: float = LOG_SPREAD) -> bool:
    """True when the finite ``values`` are all positive and span more than ``factor``."""
    finite = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
    return bool(finite.size) and finite.min() > 0 and finite.max() / finite.min() > factor


def plain_log_axis(ax: Axes) -> None:
    """A log y axis labelled at 1, 2 and 5 of every decade in plain numbers (0.02, 0.05,
    0.1), so a value can be read off where the curves lie, not only at powers of ten."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def readable_log_ticks(ax: Axes) -> None:
    """More labelled ticks on a log y axis whose range (set by now) holds fewer than three:
    a curve between 55% and 115% gets 60, 70, 80, 90 and 100, not 100 alone."""
    low, high = ax.get_ylim()
    ticks = [t for t in ax.yaxis.get_major_locator().tick_values(low, high) if low <= t <= high]
    if len(ticks) < 3:
        dense = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
        ax.yaxis.set_major_locator(LogLocator(subs=dense))


def reference_lines(ax: Axes, levels: Sequence[tuple[float, str, str]]) -> None:
    """Horizontal lines (value, label, line style) that leave the y range where the curves
    put it; a line outside the range keeps its legend entry, which says where it is."""
    ax.autoscale_view()
    low, high = ax.get_ylim()
    for value, label, style in levels:
        where = " (above the axis)" if value > high else " (below the axis)" if value < low else ""
        ax.axhline(value, color="grey", ls=style, lw=0.9, label=label + where)
    ax.set_ylim(low, high)


def x0_axis(ax: Axes, layers: int, detector: Detector | None = None) -> None:
    """Depth in X0 on the top axis of a layer axis (the CLIC layers are not equally thick);
    beyond the first and last layer the depth continues at their thickness, so ticks past
    the last layer are not piled onto it. Nothing for showers without the detector's layers."""
    depths, unit = depth_centres(layers, detector)
    if unit != "x0" or layers < 2:
        return
    index = np.arange(layers, dtype=np.float64)
    ax.secondary_xaxis(
        "top", functions=(_extended(index, depths), _extended(depths, index))
    ).set_xlabel("depth (X0)")


def _extended(xs: np.ndarray, ys: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Linear interpolation through (xs, ys), continued linearly past both ends."""
    first = (ys[1] - ys[0]) / (xs[1] - xs[0])
    last = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])

    def mapped(value: np.ndarray) -> np.ndarray:
        value = np.asarray(value, dtype=np.float64)
        inside = np.interp(value, xs, ys)
        inside = np.where(value < xs[0], ys[0] + (value - xs[0]) * first, inside)
        return np.where(value > xs[-1], ys[-1] + (value - xs[-1]) * last, inside)

    return mapped
