"""Figures of ``evogan validate``: generated showers against reference showers.

- ``features.png``: every high-level feature (and the cell spectrum) as a normalised histogram
  of generated vs reference with Poisson error bars, in bins that resolve the reference, and a
  ratio panel below each whose axis extends to its points (triangles on the edge for those off
  it);
- ``profiles.png``: mean energy per x slice, y slice (mm) and layer (with X0 on top), and the
  moments per energy bin, on a log axis where the two curves together span more than a factor
  3 (a model far off then leaves the reference readable, not flat at zero); for an ensemble,
  the band is the members' standard deviation (SAGIPS equations 7-8). A cylinder has no x
  and y slices: its radial (mm) and angular (degrees) profiles take their place.

The selection score and its independent-sample floor are printed on both figures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # object API: Agg rendering, no pyplot state

from evogan.detectors import detector_for
from evogan.physics.features import (
    HIT_THRESHOLD,
    PROFILE_UNITS,
    PROFILES,
    UNITS,
    FeatureTable,
)
from evogan.plots import save_figure
from evogan.plots.scales import (
    LOG_ENERGY_SPAN,
    mark_off_scale,
    off_scale_handle,
    plain_log_axis,
    ratio_limits,
    spans_factor,
    x0_axis,
)

REF = {"color": "black", "label": "reference"}
GEN = {"color": "tab:red"}
DPI = 90  # the validation figures are wide: 1,500 px at this resolution
HIST_BINS = 40  # at most; fewer for small sets (1.5 sqrt(n))
REF_MARGIN = 0.25
"""Bins reach this share of the reference's bulk beyond it on each side."""
UNION_SPAN = 3.0
"""Bins cover the generated bulk too while both together span at most this many times the
reference's bulk; a model further off leaves the reference resolved and is counted as off
the axis."""
OUTSIDE_NOTE = 0.02
"""A panel names the share of generated events off its axis from this share on."""
MOMENTS = (
    ("energy_ratio", "E_total / E_primary"),
    ("centre_z_x0", "depth centre (X0)"),
    ("width_z_x0", "depth width (X0)"),
    ("width_x_mm", "x width (mm)"),
)

PAD_MM = detector_for("clic-ecal").geometry.cell_mm
"""Pad pitch of the x and y profiles, which only the CLIC ECAL's Cartesian tables hold."""


def hits_label(threshold: float) -> str:
    """ "cells > 3e-4 GeV": what the ``hits`` feature counts (the lowest spectrum edge)."""
    return f"cells > {threshold:.0e} GeV".replace("e-0", "e-")


def summary_line(score: float, floor: dict | None) -> str:
    """ "score S (floor F +- s)": the number to read first on every figure."""
    text = f"score {score:.3f}"
    if floor:
        text += f"  (floor {floor['score']:.3f} +- {floor['spread']:.3f}, lower is better)"
    return text


def plot_features(
    reference: FeatureTable,
    generated: FeatureTable,
    png: str | Path,
    *,
    headline: str,
    label: str = "generated",
) -> Path:
    """Write :func:`features_figure` to ``png`` (its margins are fixed: no tight box)."""
    fig = features_figure(reference, generated, headline=headline, label=label)
    return save_figure(fig, Path(png), dpi=DPI, tight=False)


def features_figure(
    reference: FeatureTable, generated: FeatureTable, *, headline: str, label: str = "generated"
) -> Figure:
    """Histogram + ratio panel for every scalar feature and the cell spectrum."""
    names = [n for n in reference.scalars if n in generated.scalars]
    panels = len(names) + 1
    cols = 4
    rows = -(-panels // cols)
    fig = Figure(figsize=(4.2 * cols, 3.6 * rows))  # fixed spacing: 26 axes, no layout solver
    outer = fig.add_gridspec(
        rows,
        cols,
        left=0.05,
        right=0.99,
        bottom=0.06,
        top=1 - 0.45 / (3.6 * rows),
        wspace=0.28,
        hspace=0.32,
    )
    bins = int(np.clip(1.5 * np.sqrt(len(reference)), 10, HIST_BINS))
    for k in range(panels):
        cell = outer[divmod(k, cols)].subgridspec(2, 1, height_ratios=[3, 1], hspace=0.06)
        top, bottom = fig.add_subplot(cell[0]), fig.add_subplot(cell[1])
        if k < len(names):
            name = names[k]
            ref, gen = reference.scalars[name], generated.scalars[name][~generated.bad]
            edges = _edges(ref, gen, bins)
            ref_h, gen_h = np.histogram(ref, edges)[0], np.histogram(gen, edges)[0]
            unit = hits_label(10 ** reference.spectrum_edges[0]) if name == "hits" else None
            xlabel = f"{name} ({unit or UNITS.get(name, '')})"
            ylabel = "fraction of events"
            _outside_note(top, gen, edges)
        else:
            edges = reference.spectrum_edges
            ref_h, gen_h = reference.spectrum.sum(axis=0), generated.spectrum.sum(axis=0)
            xlabel, ylabel = "log10(cell energy / GeV)", f"fraction of {hits_label(10 ** edges[0])}"
        _hist_pair(top, bottom, edges, ref_h, gen_h, label)
        top.set_ylabel(ylabel)
        bottom.set_xlabel(xlabel)
    first = fig.axes[0]
    handles = first.get_legend_handles_labels()[0]
    marker = off_scale_handle(GEN["color"], "gen / ref off its axis, or reference bin empty")
    first.legend(handles=[*handles, marker], frameon=False, fontsize=8)
    fig.suptitle(headline)
    return fig


def _edges(ref: np.ndarray, gen: np.ndarray, bins: int) -> np.ndarray:
    """Bins that resolve the reference: its bulk (0.5-99.5 percentiles), widened to take in the
    generated bulk where both together span at most UNION_SPAN times the reference's, else
    the reference's bulk with a margin of REF_MARGIN on each side (a poor model's events
    beyond are counted on the panel, not allowed to squeeze the reference into one bin). An
    integer feature (hits) spanning fewer values than bins gets one bin per integer."""
    low, high = np.percentile(ref, [0.5, 99.5])
    span = high - low if high > low else max(0.05 * abs(high), 0.5)
    gen_low, gen_high = np.percentile(gen, [0.5, 99.5]) if len(gen) else (low, high)
    if max(high, gen_high) - min(low, gen_low) <= UNION_SPAN * span:
        low, high = min(low, gen_low), max(high, gen_high)
    else:
        low, high = low - REF_MARGIN * span, high + REF_MARGIN * span
    if high <= low:  # one value in both sets
        low, high = low - 0.5 * span, high + 0.5 * span
    if np.array_equal(ref, np.round(ref)) and high - low < bins:
        return np.arange(np.floor(low) - 0.5, np.ceil(high) + 1.0)
    return np.linspace(low, high, bins + 1)


def _outside_note(ax: Axes, gen: np.ndarray, edges: np.ndarray) -> None:
    """Where the generated events the axis leaves out lie, when they are a visible share."""
    if not len(gen):
        return
    below, above = np.mean(gen < edges[0]), np.mean(gen > edges[-1])
    if below + above < OUTSIDE_NOTE:
        return
    sides = [f"{share:.0%} {side}" for share, side in ((below, "below"), (above, "above"))]
    ax.text(
        0.98,
        0.97,
        "gen off axis:\n" + ", ".join(side for side in sides if not side.startswith("0%")),
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize=7,
        color=GEN["color"],
        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
    )


def _hist_pair(
    top: Axes, bottom: Axes, edges: np.ndarray, ref_h: np.ndarray, gen_h: np.ndarray, label: str
) -> None:
    """Normalised histograms with Poisson errors over their ratio, on an axis from 0 to 2 or to
    the highest ratio measured to 50%, at most 4 (:func:`~evogan.plots.scales.ratio_limits`);
    a ratio above it, or a generated count over an empty reference bin, is a triangle on the
    top edge."""
    centres = 0.5 * (edges[:-1] + edges[1:])
    for counts, style, name in ((ref_h, REF, "reference"), (gen_h, GEN, label)):
        total = max(counts.sum(), 1)
        top.stairs(counts / total, edges, color=style["color"], lw=1.3, label=name)
        top.errorbar(
            centres,
            counts / total,
            np.sqrt(counts) / total,
            fmt="none",
            ecolor=style["color"],
            elinewidth=0.8,
        )
    filled = np.concatenate([ref_h, gen_h])
    filled = filled[filled > 0]
    if filled.size and filled.max() / filled.min() > 100:
        top.set_yscale("log")
    ref_n, gen_n = ref_h / max(ref_h.sum(), 1), gen_h / max(gen_h.sum(), 1)
    ok = ref_h > 0
    ratio = np.where(ok, gen_n / np.where(ok, ref_n, 1.0), np.where(gen_h > 0, np.inf, np.nan))
    with np.errstate(divide="ignore", invalid="ignore"):
        err = ratio * np.sqrt(1.0 / np.maximum(gen_h, 1) + 1.0 / np.where(ok, ref_h, 1))
    low, high = ratio_limits(ratio, err)
    shown = ok & (ratio <= high)
    bottom.errorbar(
        centres[shown], ratio[shown], err[shown], fmt="o", ms=2.5, color=GEN["color"], lw=0.8
    )
    bottom.axhline(1.0, color="black", lw=0.8)
    bottom.set_ylim(low, high)
    mark_off_scale(bottom, centres, ratio, high, GEN["color"])
    bottom.set_ylabel("gen / ref")
    top.tick_params(labelbottom=False)
    for ax in (top, bottom):
        ax.set_xlim(edges[0], edges[-1])
        ax.grid(alpha=0.3)


def plot_profiles(
    reference: dict[str, np.ndarray],
    generated: dict[str, np.ndarray],
    png: str | Path,
    *,
    energy_edges: np.ndarray,
    headline: str,
    label: str = "generated",
    generated_std: dict[str, np.ndarray] | None = None,
    transverse: dict | None = None,
    hit_threshold: float = HIT_THRESHOLD,
) -> Path:
    """Write :func:`profiles_figure` to ``png``."""
    fig = profiles_figure(
        reference,
        generated,
        energy_edges=energy_edges,
        headline=headline,
        label=label,
        generated_std=generated_std,
        transverse=transverse,
        hit_threshold=hit_threshold,
    )
    return save_figure(fig, Path(png), dpi=DPI)


def profiles_figure(
    reference: dict[str, np.ndarray],
    generated: dict[str, np.ndarray],
    *,
    energy_edges: np.ndarray,
    headline: str,
    label: str = "generated",
    generated_std: dict[str, np.ndarray] | None = None,
    transverse: dict | None = None,
    hit_threshold: float = HIT_THRESHOLD,
) -> Figure:
    """Mean profiles along x, y (mm) and depth, and moments per energy bin.

    ``reference``/``generated``: the observables of :func:`evogan.physics.ensemble.observables`
    plus ``<name>_error`` entries (standard errors) where known. ``transverse``: for a
    cylinder (observables without x and y profiles), the
    :class:`~evogan.physics.profiles.ProfileSums` results of the ``reference`` and of one
    ``generated`` set, named ``label``, drawn where the x and y profiles go.
    ``hit_threshold``: the cell energy (GeV) above which the reference's table counts hits."""
    fig = Figure(figsize=(17, 8), layout="constrained")
    axes = fig.subplots(2, 4)
    cylinder = "profile_x" not in reference
    if cylinder and transverse is not None:
        _transverse(axes[0, 0], axes[0, 1], transverse)
    elif cylinder:
        for ax in axes[0, :2]:
            ax.set_visible(False)
    for ax, axis in zip(axes[0, :3], PROFILES, strict=True):
        key = f"profile_{axis}"
        if key not in reference:
            continue
        size = len(reference[key])
        if axis == "z":
            x, xlabel = np.arange(size), "layer"
        else:
            x, xlabel = (np.arange(size) - 0.5 * (size - 1)) * PAD_MM, PROFILE_UNITS[axis]
        _curves(ax, x, key, reference, generated, generated_std, label, log=True)
        _decorate(ax, xlabel, "energy fraction per slice (unit area)", log=True)
        if axis == "z" and "profile_x" in reference:
            x0_axis(ax, size)
    centres = 0.5 * (energy_edges[:-1] + energy_edges[1:])
    moments = [*MOMENTS, ("hits", hits_label(hit_threshold))]
    for ax, (name, ylabel) in zip([axes[0, 3], *axes[1]], moments, strict=True):
        values = np.concatenate([np.ravel(reference[name]), np.ravel(generated[name])])
        log = spans_factor(values)  # a model far off leaves the reference visible, not flat
        _curves(ax, centres, name, reference, generated, generated_std, label, log=log)
        _decorate(ax, "primary energy (GeV)", ylabel, log=False)
        if log:
            plain_log_axis(ax)
    if energy_edges[0] > 0 and energy_edges[-1] / energy_edges[0] > LOG_ENERGY_SPAN:
        for ax in [axes[0, 3], *axes[1]]:
            ax.set_xscale("log")
    axes[0, 2 if cylinder else 0].legend(frameon=False, fontsize=8)
    fig.suptitle(headline)
    return fig


def _curves(
    ax: Axes,
    x: np.ndarray,
    key: str,
    ref: dict,
    gen: dict,
    std: dict | None,
    label: str,
    *,
    log: bool = False,
) -> None:
    """Reference and generated values with standard errors; on a log axis an error bar and
    band stop above zero instead of stretching the axis down by decades."""
    for values, style, name in ((ref, REF, "reference"), (gen, GEN, label)):
        y = np.asarray(values[key], dtype=np.float64)
        err = values.get(f"{key}_error")
        if err is not None:
            err = np.asarray(err, dtype=np.float64)
            err = np.vstack([np.minimum(err, 0.9 * y) if log else err, err])
        ax.errorbar(
            x, y, err, color=style["color"], marker="o", ms=3, lw=1.1, capsize=2, label=name
        )
    if std is not None:
        y = np.asarray(gen[key], dtype=np.float64)
        low = np.maximum(y - std[key], 0.1 * y) if log else y - std[key]
        ax.fill_between(
            x, low, y + std[key], color="tab:red", alpha=0.25, lw=0, label="ensemble std"
        )


def _transverse(radial: Axes, angular: Axes, transverse: dict) -> None:
    """A cylinder's radial profile (energy per mm of radius) and angular profile (energy per
    angular bin, with the even share of a shower along the axis dotted), each at unit area."""
    ref, gen, label = transverse["reference"], transverse["generated"], transverse["label"]
    edges = ref["r_edges_mm"]
    width = np.diff(edges)
    shapes = [_unit_area(d, "radial", width) for d in (ref, gen)]
    _curves(radial, 0.5 * (edges[:-1] + edges[1:]), "radial", *shapes, None, label, log=True)
    layer = int(ref["radial_layer"])
    where = "all layers" if layer < 0 else f"layer {layer}"
    _decorate(radial, f"radius r (mm), {where}", "energy fraction per mm (unit area)", log=True)
    radial.legend(frameon=False, fontsize=8)
    if "angular_mean" not in ref:
        angular.set_visible(False)
        return
    degrees = ref["alpha_edges_deg"]
    bins = len(degrees) - 1
    shapes = [_unit_area(d, "angular", np.ones(bins)) for d in (ref, gen)]
    centres = 0.5 * (degrees[:-1] + degrees[1:])
    _curves(angular, centres, "angular", *shapes, None, label)
    even = angular.axhline(1 / bins, ls=":", color="gray", label="an even share per bin")
    angular.legend(handles=[even], frameon=False, fontsize=8)
    _decorate(
        angular, "angle alpha (deg), all layers", "energy fraction per angular bin", log=False
    )


def _unit_area(data: dict, key: str, width: np.ndarray) -> dict[str, np.ndarray]:
    """``data``'s ``<key>_mean`` and ``<key>_error`` scaled so the profile integrates to 1."""
    area = float((data[f"{key}_mean"] * width).sum()) or 1.0
    return {key: data[f"{key}_mean"] / area, f"{key}_error": data[f"{key}_error"] / area}


def _decorate(ax: Axes, xlabel: str, ylabel: str, *, log: bool) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
