"""``learning_curve.png`` of a GAN training run: losses and the validation score against the
training step and against wall time, drawn from the run's ``metrics.jsonl``.

Losses are the per-epoch means over steps and ranks (``epoch`` records); the score is the
physics selection score of the generator on held-out showers (``validation`` records, lower is
better) with the reference's own floor (two independent halves of the reference) as a dashed
line; the floor's spread over its splits, the score's sampling noise at this sample size, is the
grey band and the error bars. The generator kept as ``best_model.h5`` is circled; the number
above each score is how many of the learning targets (:mod:`evogan.physics.targets`, four
quantities per energy bin) were within tolerance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure  # object API: Agg rendering, no pyplot state

from evogan.plots import save_figure

LOSSES = (("d_loss", "discriminator"), ("g_loss", "generator"))
AXES = (("step", "training step (global)"), ("wall_seconds", "wall time (s)"))


def plot_learning_curve(records: list[dict[str, Any]], png: str | Path, title: str = "") -> Path:
    """Two rows (losses, score) by two columns (vs step, vs wall seconds)."""
    epochs = [r for r in records if r.get("kind") == "epoch" and "step" in r]
    scores = [r for r in records if r.get("kind") == "validation"]
    fig = Figure(figsize=(11, 7), layout="constrained")
    grid = fig.subplots(2, 2, sharex="col")
    for column, (key, label) in enumerate(AXES):
        _losses(grid[0][column], epochs, key)
        _scores(grid[1][column], scores, key)
        grid[1][column].set_xlabel(label)
    fig.suptitle(title or "GAN training")
    return save_figure(fig, png)


def _losses(ax: Axes, epochs: list[dict[str, Any]], key: str) -> None:
    plotted = False
    for name, label in LOSSES:
        points = [(r[key], r[name]) for r in epochs if r.get(name) is not None and key in r]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=f"{label} ({name})")
            plotted = True
    positive = plotted and all(
        r.get(name) is None or r[name] > 0 for r in epochs for name, _ in LOSSES
    )
    if plotted:
        ax.set_yscale("log" if positive else "linear")
        ax.legend(fontsize=8)
    elif epochs:  # every epoch's losses were NaN or infinite, which metrics.jsonl records as null
        ax.text(0.5, 0.5, "no finite loss in any epoch", ha="center", transform=ax.transAxes)
    ax.set_ylabel("loss, mean over an epoch" + (" (log)" if positive else ""))
    ax.grid(alpha=0.3)


def _scores(ax: Axes, scores: list[dict[str, Any]], key: str) -> None:
    ax.set_ylabel("validation score (lower is better)")
    ax.grid(alpha=0.3)
    if not scores:
        ax.text(0.5, 0.5, "no validation during training", ha="center", transform=ax.transAxes)
        return
    xs, ys = [r[key] for r in scores], [r["score"] for r in scores]
    spread = scores[-1].get("floor_spread")
    ax.errorbar(
        xs,
        ys,
        yerr=spread,
        marker="s",
        capsize=3,
        color="tab:red",
        label="generator on held-out showers" + (" (bars: floor spread)" if spread else ""),
    )
    _target_counts(ax, scores, key)
    best = min(range(len(ys)), key=ys.__getitem__)
    ax.plot([xs[best]], [ys[best]], "o", ms=14, mfc="none", color="black", label="best_model.h5")
    floor = scores[-1].get("floor")
    if floor is not None:
        ax.axhline(floor, ls="--", color="gray", label=f"reference floor {floor:.3g}")
        if spread:
            ax.axhspan(floor - spread, floor + spread, color="gray", alpha=0.2)
    ax.legend(fontsize=8)


def _target_counts(ax: Axes, scores: list[dict[str, Any]], key: str) -> None:
    """Each score's learning targets within tolerance, ``k/n``, above its marker."""
    counted = [r for r in scores if r.get("targets")]
    for r in counted:
        text = f"{r['targets']['within']}/{r['targets']['cells']}"
        ax.annotate(
            text,
            (r[key], r["score"]),
            xytext=(0, 9),
            textcoords="offset points",
            ha="center",
            fontsize=7,
            color="tab:red",
        )
    if counted:
        ax.margins(y=0.15)  # room for the labels above the highest score
        ax.plot([], [], ls="", label="k/n: learning targets within tolerance")
