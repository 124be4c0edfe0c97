"""The CaloChallenge's kind of figures for any detector (``calochallenge.png`` of ``evogan
validate --out``), and the per-layer energy and radial profile of one sample (``evogan data
inspect``).

Each comparison panel has the reference in black and the generated set in red above a ratio
panel (generated / reference); for the centres of energy, whose means sit near 0 where a ratio
means nothing, the lower panel is the difference in mm. Error bars are statistical only: the
standard error of the mean for the per-layer and radial profiles, sqrt(n) for histogram counts;
a ratio's or difference's error combines both samples' in quadrature.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # object API: Agg rendering, no pyplot state

from evogan.plots import save_figure

REF = {"color": "black", "label": "reference"}
GEN = {"color": "tab:red"}
HIST_BINS = 40
ERRORS = (
    "error bars: statistical only (standard error of the mean for profiles, sqrt(n) for "
    "histogram counts); ratio and difference errors combine both samples in quadrature"
)
PROFILE_PANELS = (  # key, title, y label, lower panel: ratio or difference
    ("EC_x", "centre of energy x per layer", "mean EC x (mm)", "difference"),
    ("EC_y", "centre of energy y per layer", "mean EC y (mm)", "difference"),
    ("width_x", "width x per layer", "mean width x (mm)", "ratio"),
    ("width_y", "width y per layer", "mean width y (mm)", "ratio"),
)


def plot_calochallenge(
    reference: dict[str, np.ndarray],
    generated: dict[str, np.ndarray],
    png: str | Path,
    *,
    title: str,
    label: str = "generated",
) -> Path:
    """Eight panels, each over a ratio (or difference) panel: mean energy per layer, E_tot/E_inc,
    centres of energy and widths per layer in x and y, the voxel-energy spectrum and the radial
    profile. ``reference`` and ``generated`` are :func:`evogan.physics.calochallenge.figure_data`
    dicts."""
    fig = Figure(figsize=(19, 9.5), layout="constrained")
    outer = fig.add_gridspec(2, 4)
    cells = [outer[i // 4, i % 4].subgridspec(2, 1, height_ratios=(3, 1), hspace=0.0)
             for i in range(8)]  # fmt: skip
    pairs = [(fig.add_subplot(c[0]), fig.add_subplot(c[1])) for c in cells]
    for top, bottom in pairs:
        bottom.sharex(top)
        top.tick_params(labelbottom=False)
    gen = {**GEN, "label": label}
    layers = np.arange(len(reference["layer_mean"]))
    _profile(pairs[0], layers, reference, generated, "layer", gen, "ratio")
    pairs[0][0].set(title="mean energy per layer", ylabel="mean energy (GeV)", yscale="log")
    pairs[0][1].set_xlabel("layer")
    _histogram(pairs[1], reference["Etot_Einc"], generated["Etot_Einc"], gen, log=False)
    pairs[1][0].set(title="E_tot / E_inc", ylabel="fraction of showers")
    pairs[1][1].set_xlabel("E_tot / E_inc")
    for pair, (key, heading, ylabel, lower) in zip(pairs[2:6], PROFILE_PANELS, strict=True):
        _profile(pair, reference[f"{key}_layers"], reference, generated, key, gen, lower)
        pair[0].set(title=heading, ylabel=ylabel)
        pair[1].set_xlabel("layer")
    _histogram(pairs[6], reference["voxel_energies"], generated["voxel_energies"], gen, log=True)
    pairs[6][0].set(title="voxel-energy spectrum", ylabel="fraction of voxels", yscale="log")
    pairs[6][1].set_xlabel("voxel energy (GeV)")
    radius = 0.5 * (reference["r_edges_mm"][:-1] + reference["r_edges_mm"][1:])
    _profile(pairs[7], radius, reference, generated, "radial", gen, "ratio")
    pairs[7][0].set(title="radial profile (all layers)", ylabel="energy per mm (GeV/mm)")
    pairs[7][0].set_yscale("log")
    pairs[7][1].set_xlabel("radius r (mm)")
    pairs[0][0].legend(fontsize=9)
    fig.suptitle(f"{title}\n{ERRORS}", fontsize=11)
    return save_figure(fig, Path(png))


def _profile(
    pair: tuple[Axes, Axes],
    x: np.ndarray,
    reference: dict,
    generated: dict,
    key: str,
    gen: dict,
    lower: str,
) -> None:
    """Means with their standard errors, and their ratio or difference below."""
    ref_y, ref_e = _drawn(reference, key)
    gen_y, gen_e = _drawn(generated, key)
    top, bottom = pair
    top.errorbar(x, ref_y, yerr=ref_e, fmt="o", ms=3, capsize=2, **REF)
    top.errorbar(x, gen_y, yerr=gen_e, fmt="s", ms=3, capsize=2, mfc="none", **gen)
    if lower == "difference":
        bottom.errorbar(x, gen_y - ref_y, yerr=np.hypot(gen_e, ref_e), fmt="o", ms=3,
                        color=gen["color"])  # fmt: skip
        bottom.axhline(0.0, color="grey", lw=0.8)
        bottom.set_ylabel("gen - ref (mm)")
        return
    _ratio(bottom, x, gen_y, gen_e, ref_y, ref_e, gen["color"])


def _drawn(data: dict, key: str) -> tuple[np.ndarray, np.ndarray]:
    """Means and errors of ``key``; an energy profile's empty bins (0) are left out (NaN), as a
    log axis cannot show them."""
    mean, error = np.asarray(data[f"{key}_mean"], float), np.asarray(data[f"{key}_error"], float)
    if key in ("layer", "radial"):
        mean = np.where(mean > 0, mean, np.nan)
    return mean, error


def _histogram(
    pair: tuple[Axes, Axes], ref: np.ndarray, gen: np.ndarray, style: dict, log: bool
) -> None:
    """Normalised histograms in bins spanning the reference (log-spaced with ``log``), sqrt(n)
    error bars, and their ratio below."""
    ref, gen = np.asarray(ref, float), np.asarray(gen, float)
    ref, gen = ref[np.isfinite(ref)], gen[np.isfinite(gen)]
    top, bottom = pair
    if ref.size < 2:
        top.text(0.5, 0.5, "no reference values", ha="center", transform=top.transAxes)
        return
    low, high = np.quantile(ref, [0.0005, 0.9995]) if ref.size > 2000 else (ref.min(), ref.max())
    if log:
        low = max(low, high * 1e-9)
        edges = np.geomspace(low, high * 1.0001, HIST_BINS + 1)
        top.set_xscale("log")
    else:
        span = max(high - low, abs(high) * 1e-6, 1e-12)
        edges = np.linspace(low - 0.05 * span, high + 0.05 * span, HIST_BINS + 1)
    centres = np.sqrt(edges[:-1] * edges[1:]) if log else 0.5 * (edges[:-1] + edges[1:])
    values = {}
    for data, kwargs, marker in ((ref, REF, "o"), (gen, style, "s")):
        counts = np.histogram(data, edges)[0].astype(float)
        total = max(data.size, 1)
        values[marker] = (counts / total, np.sqrt(counts) / total)
        top.step(edges, np.r_[counts, counts[-1]] / total, where="post", color=kwargs["color"],
                 label=kwargs["label"])  # fmt: skip
        top.errorbar(centres, counts / total, yerr=np.sqrt(counts) / total, fmt="none",
                     color=kwargs["color"], capsize=1.5)  # fmt: skip
    (ref_y, ref_e), (gen_y, gen_e) = values["o"], values["s"]
    _ratio(bottom, centres, gen_y, gen_e, ref_y, ref_e, style["color"])


def _ratio(ax: Axes, x, gen_y, gen_e, ref_y, ref_e, colour: str) -> None:
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(ref_y > 0, gen_y / ref_y, np.nan)
        error = ratio * np.hypot(
            np.where(gen_y > 0, gen_e / gen_y, 0.0), np.where(ref_y > 0, ref_e / ref_y, 0.0)
        )
    ax.errorbar(x, ratio, yerr=error, fmt="o", ms=3, color=colour)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylim(0.5, 1.5)
    ax.set_ylabel("gen / ref")


def plot_detector_profiles(data: dict[str, np.ndarray], png: str | Path, *, title: str) -> Path:
    """Mean energy per layer and the radial profile of one sample (the dict of
    :func:`evogan.physics.profiles.layer_profiles`), with standard errors of the mean: the
    shape of showers in a detector at a glance."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    layers = np.arange(len(data["layer_mean"]))
    layer_mean, layer_error = _drawn(data, "layer")
    radial_mean, radial_error = _drawn(data, "radial")
    left.errorbar(layers, layer_mean, yerr=layer_error, fmt="o-", ms=3, capsize=2)
    left.set(xlabel="layer", ylabel="mean energy per shower (GeV)", yscale="log",
             title="longitudinal: energy per layer")  # fmt: skip
    radius = 0.5 * (data["r_edges_mm"][:-1] + data["r_edges_mm"][1:])
    right.errorbar(radius, radial_mean, yerr=radial_error, fmt="o-", ms=3, capsize=2)
    right.set(
        xlabel="radius r from the cylinder axis or grid centre (mm)",
        ylabel="energy per mm (GeV/mm)",
        yscale="log",
        title="radial profile, "
        + (
            "all layers"
            if int(data.get("radial_layer", -1)) < 0
            else f"layer {data['radial_layer']}"
        ),
    )
    fig.suptitle(f"{title}\nerror bars: standard error of the mean", fontsize=11)
    return save_figure(fig, Path(png))
