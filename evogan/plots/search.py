"""Figures comparing search campaigns (GA vs TPE on the same budget), drawn from the plain
rows and numbers of each campaign that the search computes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from evogan.plots import save_figure
from evogan.plots.runs import run_colours
from evogan.plots.scales import mark_off_scale, off_scale_handle, upper_fence


@dataclass(frozen=True)
class CampaignView:
    """What the figures draw of one campaign."""

    label: str
    rows: list[dict[str, Any]]
    """Every candidate's table row (status, fitness, params, flops)."""
    front: list[dict[str, Any]]
    """The non-dominated rows over two objectives (empty for a campaign with one)."""
    best_so_far: tuple[list[int], list[float], list[float]]
    """Trained candidates, campaign seconds and best fitness after each trained candidate."""
    final: dict[str, Any] | None
    """The final test of the summary (None: none ran)."""


def plot_convergence(views: list[CampaignView], path: Path) -> Path:
    """Write :func:`convergence_figure` to ``path``."""
    return save_figure(convergence_figure(views), path)


def convergence_figure(views: list[CampaignView]) -> Figure:
    """Best fitness so far against evaluations and against campaign wall time (minutes: a
    campaign is an allocation's hours, or a workstation's hour)."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    by_count, by_time = fig.subplots(1, 2)
    values: list[float] = []
    for view, colour in zip(views, run_colours(len(views)), strict=True):
        counts, seconds, best = view.best_so_far
        values += best
        style = {"color": colour, "label": view.label, "drawstyle": "steps-post"}
        by_count.plot(counts, best, marker="o", ms=3, **style)
        by_time.plot([t / 60 for t in seconds], best, marker="o", ms=3, **style)
    by_count.set_xlabel("trained candidates")
    by_count.xaxis.set_major_locator(MaxNLocator(integer=True))
    by_time.set_xlabel("campaign wall time [min]")
    for axis in (by_count, by_time):
        _fitness_scale(axis, values)
        axis.set_ylabel("best fitness so far (lower is better)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    fig.suptitle("Architecture search: best validation fitness")
    return fig


def plot_pareto(views: list[CampaignView], path: Path, second: str) -> Path:
    """Write :func:`pareto_figure` to ``path``."""
    return save_figure(pareto_figure(views, second), path)


def pareto_figure(views: list[CampaignView], second: str) -> Figure:
    """Fitness against model size (weights or FLOPs): every candidate, fronts highlighted."""
    fig = Figure(figsize=(6.5, 4.5))
    axis = fig.subplots()
    key = "flops" if second == "flops" else "params"
    for view, colour in zip(views, run_colours(len(views)), strict=True):
        ok = [r for r in view.rows if r["status"] == "ok"]
        axis.scatter(
            [r[key] for r in ok],
            [r["fitness"] for r in ok],
            s=14,
            alpha=0.45,
            color=colour,
            label=f"{view.label}: candidates",
        )
        front = view.front or _front_by_size(ok, key)
        front = sorted(front, key=lambda r: r[key])
        axis.plot(
            [r[key] for r in front],
            [r["fitness"] for r in front],
            marker="D",
            ms=5,
            color=colour,
            drawstyle="steps-post",
            label=f"{view.label}: Pareto front",
        )
    axis.set_xscale("log")
    handles = _leave_out_worst(axis, views, key)
    axis.set_xlabel("forward FLOPs per shower" if key == "flops" else "trainable weights")
    axis.set_ylabel("fitness (lower is better)")
    axis.grid(alpha=0.3)
    axis.legend(handles=axis.get_legend_handles_labels()[0] + handles, fontsize=7)
    axis.set_title("Fitness against model size")
    return fig


def plot_final(views: list[CampaignView], path: Path) -> Path | None:
    """Write :func:`final_figure` to ``path`` (None: no campaign has a final test)."""
    fig = final_figure(views)
    return None if fig is None else save_figure(fig, path)


def final_figure(views: list[CampaignView]) -> Figure | None:
    """Each campaign's final test: every fresh-seed score of its tested candidates and of the
    baseline, their mean +- standard error and the test's p-value (Holm-adjusted too, where a
    campaign tested several)."""
    finals = [
        (r, r.final, colour)
        for r, colour in zip(views, run_colours(len(views)), strict=True)
        if r.final
    ]
    if not finals:
        return None
    columns = sum(len(final["candidates"]) + 1 for _, final, _ in finals)
    fig = Figure(figsize=(max(6.0, 2.2 * columns), 4.5), layout="constrained")
    axis = fig.subplots()
    ticks, names, values = [], [], []
    position = 0.0
    for view, final, colour in finals:
        for block in [*final["candidates"], final["baseline"]]:
            baseline = "p_value" not in block
            scores = block["scores"]
            spread = [
                position + 0.12 * (i / max(1, len(scores) - 1) - 0.5) for i in range(len(scores))
            ]
            axis.scatter(spread, scores, s=18, color="0.45" if baseline else colour, zorder=3)
            axis.errorbar(
                position + 0.22,
                block["mean"],
                yerr=block["sem"],
                fmt="D",
                ms=5,
                capsize=4,
                color="0.2" if baseline else colour,
                zorder=4,
            )
            ticks.append(position)
            test = "baseline"
            if not baseline:
                test = f"{block['id']}\np = {block['p_value']:.3g} vs baseline"
                if block.get("p_holm", block["p_value"]) != block["p_value"]:
                    test += f"\n(Holm {block['p_holm']:.3g})"
            names.append(f"{view.label}\n{test}")
            values += scores
            position += 1.0
        position += 0.5
    axis.set_xticks(ticks, names, fontsize=8)
    _fitness_scale(axis, values)
    axis.set_ylabel("score per fresh seed (lower is better)")
    axis.grid(alpha=0.3, axis="y")
    seeds = sorted({final["retrain_seeds"] for _, final, _ in finals})
    adjusted = any(
        c.get("p_holm", c["p_value"]) != c["p_value"] for _, f, _ in finals for c in f["candidates"]
    )
    axis.set_title(
        f"Final test: best candidates and baseline re-trained with {'/'.join(map(str, seeds))} "
        "fresh seeds each\ndots: one training each; diamonds: mean +- standard error\n"
        "p: one-sided Mann-Whitney U"
        + ("; Holm: adjusted over the campaign's tests" if adjusted else ""),
        fontsize=9,
    )
    return fig


def _fitness_scale(axis: Axes, values: list[float]) -> None:
    """Log fitness axes only where the fitnesses span a decade; a narrow range reads better
    (and gets legible tick labels) on a linear axis."""
    finite = [v for v in values if math.isfinite(v)]
    if finite and min(finite) > 0 and max(finite) / min(finite) >= 10:
        axis.set_yscale("log")


def _leave_out_worst(axis: Axes, views: list[CampaignView], key: str) -> list[Line2D]:
    """A fitness range over the candidates inside Tukey's far fence
    (:func:`~evogan.plots.scales.upper_fence`), so one diverged candidate does not flatten
    the rest; the worse ones are triangles on the top edge, counted in a legend entry (the
    handles returned for it)."""
    rows = [(view, r) for view in views for r in view.rows if r["status"] == "ok"]
    fitness = [r["fitness"] for _, r in rows]
    fence = upper_fence(fitness)
    kept = [v for v in fitness if math.isfinite(v) and v <= fence]
    _fitness_scale(axis, kept)
    worse = [(view, r) for view, r in rows if not r["fitness"] <= fence]
    if not worse or not kept:
        return []
    low, high = min(kept), max(kept)
    if axis.get_yscale() == "log":
        pad = (high / low) ** 0.05
        low, high = low / pad, high * pad
    else:
        pad = 0.05 * (high - low) or 0.05 * abs(high) or 1.0
        low, high = low - pad, high + pad
    axis.set_ylim(low, high)
    for view, colour in zip(views, run_colours(len(views)), strict=True):
        mine = [r for v, r in worse if v is view]
        mark_off_scale(axis, [r[key] for r in mine], [math.inf] * len(mine), high, colour)
    largest = max(r["fitness"] for _, r in worse)
    label = f"{len(worse)} worse, above the axis (up to {largest:.3g})"
    return [off_scale_handle("grey", label)]


def _front_by_size(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Non-dominated rows over (size, fitness) for campaigns run with one objective."""
    front, best = [], math.inf
    for row in sorted(rows, key=lambda r: (r[key], r["fitness"])):
        if row["fitness"] < best:
            front.append(row)
            best = row["fitness"]
    return front
