"""Figures comparing regressor runs (GA, hybrid, RMSprop), after Figure 3 of the GA study."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from evogan.plots import save_figure
from evogan.store import METRICS, RunDir, read_metrics

COLOURS = {"ga": "tab:red", "rmsprop": "tab:blue", "hybrid": "tab:green"}


@dataclass
class RunRecord:
    """What the figures need from one run directory."""

    label: str
    method: str
    summary: dict[str, Any]
    epochs: list[dict[str, Any]]
    islands: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> RunRecord:
        run = RunDir.open(path)
        summary = run.summary()
        islands = {
            int(folder.name.removeprefix("island-")): read_metrics(folder / METRICS, "epoch")
            for folder in sorted((run.path / "islands").glob("island-*"))
            if (folder / METRICS).is_file()
        }
        return cls(run.name, summary.get("method", "?"), summary, run.metrics("epoch"), islands)


def _colour(record: RunRecord, index: int) -> str:
    return COLOURS.get(record.method, f"C{index + 3}")


def _label(record: RunRecord) -> str:
    return record.method if record.label == record.method else f"{record.method} ({record.label})"


def plot_test_loss(records: list[RunRecord], path: Path) -> Path:
    """Test MAPE of each run against epoch and against training time."""
    fig = Figure(figsize=(11, 4.2))
    by_epoch, by_time = fig.subplots(1, 2)
    for index, record in enumerate(records):
        points = [r for r in record.epochs if r.get("test_mape") is not None]
        epochs = [r["epoch"] + 1 for r in points]
        seconds = [r["train_seconds"] for r in points]
        loss = [100 * r["test_mape"] for r in points]
        style = {"color": _colour(record, index), "label": _label(record), "marker": "o", "ms": 3}
        by_epoch.plot(epochs, loss, **style)
        by_time.plot(seconds, loss, **style)
    for axis, xlabel in ((by_epoch, "epoch"), (by_time, "training time [s]")):
        axis.set_xlabel(xlabel)
        axis.set_ylabel("test loss: relative error [%]")
        axis.set_yscale("log")
        axis.grid(True, which="both", alpha=0.3)
        axis.axhline(10, color="grey", ls="--", lw=0.8)
        axis.axhline(5, color="grey", ls=":", lw=0.8)
    by_epoch.legend(fontsize=8)
    fig.suptitle("Test loss (MAPE) of the energy regressor")
    return save_figure(fig, path)


def plot_island_curves(records: list[RunRecord], path: Path) -> Path | None:
    """Test MAPE per island against epoch, one panel per island-model run (None if no run
    had more than one island)."""
    runs = [record for record in records if len(record.islands) > 1]
    if not runs:
        return None
    fig = Figure(figsize=(5.5 * len(runs), 4.2))
    axes = fig.subplots(1, len(runs), squeeze=False)[0]
    for axis, record in zip(axes, runs, strict=True):
        for island, epochs in sorted(record.islands.items()):
            points = [r for r in epochs if r.get("test_mape") is not None]
            axis.plot(
                [r["epoch"] + 1 for r in points],
                [100 * r["test_mape"] for r in points],
                lw=1,
                alpha=0.8,
                label=f"island {island}",
            )
        best = [r for r in record.epochs if r.get("test_mape") is not None]
        axis.plot(
            [r["epoch"] + 1 for r in best],
            [100 * r["test_mape"] for r in best],
            color="black",
            lw=2,
            ls="--",
            label="best island per epoch",
        )
        axis.set_title(f"{_label(record)}: {len(record.islands)} islands")
        axis.set_xlabel("epoch")
        axis.set_ylabel("test loss: relative error [%]")
        axis.set_yscale("log")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7, ncol=2 if len(record.islands) > 8 else 1)
    return save_figure(fig, path)


def _offsets(records: list[RunRecord], index: int, bins: list[dict[str, Any]]) -> list[float]:
    """Small horizontal shifts so the runs' markers in one energy bin do not hide each other."""
    count = max(len(records), 1)
    return [(index - (count - 1) / 2) * (b["high"] - b["low"]) * 0.6 / count for b in bins]


def plot_energy_response(records: list[RunRecord], path: Path) -> Path:
    """Mean predicted vs true energy per bin (error bars: std of the prediction in the bin),
    with the ratio predicted / true below."""
    fig = Figure(figsize=(6.5, 6.5))
    axis, ratio = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1.3])
    top = 0.0
    for index, record in enumerate(records):
        bins = record.summary.get("energy_response") or []
        x = [b["true_mean"] + s for b, s in zip(bins, _offsets(records, index, bins), strict=True)]
        style = {"fmt": "o", "capsize": 3, "ms": 4, "color": _colour(record, index)}
        axis.errorbar(
            x,
            [b["pred_mean"] for b in bins],
            yerr=[b["pred_std"] for b in bins],
            label=_label(record),
            **style,
        )
        ratio.errorbar(
            x,
            [b["pred_mean"] / b["true_mean"] for b in bins],
            yerr=[b["pred_std"] / b["true_mean"] for b in bins],
            **style,
        )
        top = max([top, *(b["high"] for b in bins)])
    axis.plot([0, top], [0, top], color="black", lw=0.8, ls="--", label="ideal")
    ratio.axhline(1.0, color="black", lw=0.8, ls="--")
    axis.set_ylabel("predicted energy [GeV]")
    axis.set_title("Estimated energy per energy bin (test set)")
    ratio.set_xlabel("true energy [GeV]")
    ratio.set_ylabel("predicted / true")
    for panel in (axis, ratio):
        panel.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    return save_figure(fig, path)


def plot_relative_error(records: list[RunRecord], path: Path) -> Path:
    """Relative error |pred - true| / true per energy bin, mean with its std as error bars."""
    fig = Figure(figsize=(7, 4.2))
    axis = fig.subplots()
    for index, record in enumerate(records):
        bins = record.summary.get("energy_response") or []
        shift = _offsets(records, index, bins)
        axis.errorbar(
            [b["true_mean"] + s for b, s in zip(bins, shift, strict=True)],
            [100 * b["relative_error"] for b in bins],
            yerr=[100 * b["relative_error_std"] for b in bins],
            fmt="o",
            capsize=3,
            color=_colour(record, index),
            label=_label(record),
        )
    axis.axhline(10, color="grey", ls="--", lw=0.8, label="10%")
    axis.set_xlabel("true energy [GeV]")
    axis.set_ylabel("relative error |pred - true| / true [%]")
    axis.set_ylim(bottom=0)
    axis.set_title("Relative error per energy bin (test set)")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    return save_figure(fig, path)


def summary_table(records: list[RunRecord]) -> str:
    """Markdown table of the runs' summaries (errors in percent)."""

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.2f}"

    def secs(value: float | None) -> str:
        return "not reached" if value is None else f"{value:.1f}"

    lines = [
        "| run | method | test MAPE [%] | worst bin [%] | best fitness [%] | epochs | "
        "generations | evaluations | train s | wall s | s to 10% | s to 5% |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        s = record.summary
        bins = s.get("energy_response") or []
        worst = max((b["relative_error"] for b in bins), default=None)
        lines.append(
            f"| {record.label} | {record.method} | {pct(s.get('test_mape'))} | {pct(worst)} | "
            f"{pct(s.get('best_fitness'))} | {s.get('epochs')} | {s.get('generations')} | "
            f"{s.get('evaluations')} | {s.get('train_seconds', 0):.1f} | "
            f"{s.get('wall_seconds', 0):.1f} | {secs(s.get('seconds_to_mape_10'))} | "
            f"{secs(s.get('seconds_to_mape_5'))} |"
        )
    return "\n".join(lines) + "\n"
