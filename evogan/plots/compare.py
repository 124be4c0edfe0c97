"""Figures comparing regressor runs (GA, hybrid, RMSprop), after Figure 3 of the GA study, and
their energy response with the calorimeter resolution fit. Colours are per run, not per method,
so two GA runs never look alike; every title names the detector and the projection the runs'
images come from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from evogan.detectors import detector_for
from evogan.errors import ConfigError
from evogan.physics.resolution import ResolutionFit, fit_resolution, format_pm
from evogan.plots import save_figure
from evogan.plots.runs import run_colours
from evogan.plots.scales import readable_log_ticks, reference_lines
from evogan.store import METRICS, RunDir, read_metrics


@dataclass
class RunRecord:
    """What the figures need from one run directory."""

    label: str
    method: str
    summary: dict[str, Any]
    epochs: list[dict[str, Any]]
    islands: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    image: str = ""  # the detector (described) and the axis its showers are summed over

    @classmethod
    def load(cls, path: str | Path, label: str | None = None) -> RunRecord:
        """``label``: the run's name in legends and tables (default: its directory's name)."""
        run = RunDir.open(path)
        summary = run.summary()
        islands = {
            int(folder.name.removeprefix("island-")): read_metrics(folder / METRICS, "epoch")
            for folder in sorted((run.path / "islands").glob("island-*"))
            if (folder / METRICS).is_file()
        }
        method = summary.get("method", "?")
        image = _image(summary, run.path / "config.yaml")
        return cls(label or run.name, method, summary, run.metrics("epoch"), islands, image)

    @property
    def response(self) -> list[dict[str, Any]]:
        """Energy bins with a response and resolution and their errors (empty for summaries
        written before evogan reported them)."""
        keys = ("ratio", "ratio_err", "resolution", "resolution_err", "relative_error_err")
        bins = self.summary.get("energy_response") or []
        return [b for b in bins if all(isinstance(b.get(k), (int, float)) for k in keys)]

    def resolution_fit(self) -> ResolutionFit | None:
        bins = self.response
        return fit_resolution(
            np.array([b["true_mean"] for b in bins]),
            np.array([b["resolution"] for b in bins]),
            np.array([b["resolution_err"] for b in bins]),
        )


def _image(summary: dict[str, Any], config: Path) -> str:
    """``DETECTOR, summed over AXIS`` from the summary; for a run written before summaries
    named it, from its config (then a Cartesian detector summed over y, or the axis set)."""
    detector, axis = summary.get("detector"), summary.get("projection_axis")
    if not detector:
        data = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("data") or {}
        name = data.get("detector", "clic-ecal")
        try:
            detector = detector_for(name).describe()
        except ConfigError:
            detector = str(name)
        axis = data.get("projection_axis", "y")
    return f"{detector}, summed over {axis}"


def images_caption(records: list[RunRecord]) -> str:
    """The detector and projection of the runs, for a title: one, or each with its runs."""
    images = dict.fromkeys(record.image for record in records)
    if len(images) == 1:
        return next(iter(images))
    return "; ".join(
        f"{image} ({', '.join(r.label for r in records if r.image == image)})" for image in images
    )


def _label(record: RunRecord) -> str:
    return record.method if record.label == record.method else f"{record.method} ({record.label})"


def percent_log_axis(axis: Axes) -> None:
    """A log test-loss axis labelled at 1, 1.2, 1.5, 2, 3 and 5 of every decade in plain numbers:
    runs that end between 1% and 2% (the shipped GA ends near 1.2%) get labels there, not only at
    powers of ten."""
    axis.set_ylabel("test loss: relative error [%]")
    axis.set_yscale("log")
    axis.yaxis.set_major_locator(LogLocator(subs=(1.0, 1.2, 1.5, 2.0, 3.0, 5.0)))
    axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.yaxis.set_minor_formatter(NullFormatter())
    axis.grid(True, which="both", alpha=0.3)


def target_lines(records: list[RunRecord]) -> list[tuple[float, str, str]]:
    """The test-MAPE targets the runs' summaries time (``seconds_to_mape_10``: 10%), as
    :func:`~evogan.plots.scales.reference_lines` levels, highest first."""
    prefix = "seconds_to_mape_"
    found = {
        float(k.removeprefix(prefix)) for r in records for k in r.summary if k.startswith(prefix)
    }
    styles = ("--", ":", "-.")
    return [
        (value, f"target {value:g}% (test_target_mape)", styles[index % len(styles)])
        for index, value in enumerate(sorted(found, reverse=True))
    ]


def plot_test_loss(records: list[RunRecord], path: Path) -> Path:
    """Write :func:`loss_figure` to ``path``."""
    return save_figure(loss_figure(records), path)


def loss_figure(records: list[RunRecord]) -> Figure:
    """Test MAPE of each run against epoch and against training time; the targets of the
    runs' configs are lines in the legend that leave the range to the curves."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    by_epoch, by_time = fig.subplots(1, 2)
    for record, colour in zip(records, run_colours(len(records)), strict=True):
        points = [r for r in record.epochs if r.get("test_mape") is not None]
        epochs = [r["epoch"] + 1 for r in points]
        seconds = [r["train_seconds"] for r in points]
        loss = [100 * r["test_mape"] for r in points]
        style = {"color": colour, "label": _label(record), "marker": "o", "ms": 3}
        by_epoch.plot(epochs, loss, **style)
        by_time.plot(seconds, loss, **style)
    lines = target_lines(records)
    for axis, xlabel in ((by_epoch, "epoch"), (by_time, "training time [s]")):
        axis.set_xlabel(xlabel)
        percent_log_axis(axis)
        reference_lines(axis, lines)
        readable_log_ticks(axis)
    by_epoch.xaxis.set_major_locator(MaxNLocator(integer=True))
    by_epoch.legend(fontsize=8)
    fig.suptitle(f"Test loss (MAPE) of the energy regressor\n{images_caption(records)}")
    return fig


def plot_island_curves(records: list[RunRecord], path: Path) -> Path | None:
    """Test MAPE per island against epoch, one panel per island-model run (None if no run
    had more than one island)."""
    runs = [record for record in records if len(record.islands) > 1]
    if not runs:
        return None
    fig = Figure(figsize=(5.5 * len(runs), 4.2), layout="constrained")
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
        axis.set_title(f"{_label(record)}: {len(record.islands)} islands\n{record.image}")
        axis.set_xlabel("epoch")
        percent_log_axis(axis)
        axis.legend(fontsize=7, ncol=2 if len(record.islands) > 8 else 1)
    return save_figure(fig, path)


def _log_x(records: list[RunRecord]) -> bool:
    """Log energy axes when the bins span a decade or more."""
    lows = [b["low"] for r in records for b in r.response if b["low"] > 0]
    highs = [b["high"] for r in records for b in r.response]
    return bool(lows) and max(highs) / min(lows) >= 10


def _shift(x: list[float], index: int, count: int, log: bool) -> list[float]:
    """Small horizontal offsets so runs' markers in one bin do not hide each other."""
    step = (index - (count - 1) / 2) * 0.012
    return [v * 10**step if log else v * (1 + step) for v in x]


def plot_energy_response(records: list[RunRecord], path: Path) -> Path:
    """Response predicted/true and resolution sigma(E)/E per bin of true energy (standard errors),
    with the fit a/sqrt(E) (+) b (+) c/E of each run."""
    fig = Figure(figsize=(7.5, 8))
    response, resolution = fig.subplots(2, 1, sharex=True, height_ratios=[1, 1.4])
    log = _log_x(records)
    for index, (record, colour) in enumerate(zip(records, run_colours(len(records)), strict=True)):
        bins = record.response
        if not bins:
            continue
        x = _shift([b["true_mean"] for b in bins], index, len(records), log)
        style = {"fmt": "o", "capsize": 3, "ms": 4, "color": colour}
        response.errorbar(
            x,
            [b["ratio"] for b in bins],
            yerr=[b["ratio_err"] for b in bins],
            label=_label(record),
            **style,
        )
        resolution.errorbar(
            x,
            [100 * b["resolution"] for b in bins],
            yerr=[100 * b["resolution_err"] for b in bins],
            **style,
        )
        _draw_fit(resolution, record, bins, colour)
    response.axhline(1.0, color="black", lw=0.8, ls="--")
    response.set_ylabel("response: predicted / true energy")
    response.set_title(
        f"Energy response per bin of true energy (test set)\n{images_caption(records)}"
    )
    resolution.set_ylabel(r"resolution $\sigma(E)/E$ [%]")
    resolution.set_xlabel("true energy E [GeV]")
    resolution.set_ylim(bottom=0)
    for panel in (response, resolution):
        if log:
            panel.set_xscale("log")
        panel.grid(True, which="both", alpha=0.3)
    response.legend(fontsize=8)
    resolution.legend(fontsize=7, loc="upper right")
    return save_figure(fig, path)


def _draw_fit(axis: Axes, record: RunRecord, bins: list[dict[str, Any]], colour: Any) -> None:
    fit = record.resolution_fit()
    if fit is None:
        axis.plot([], [], color=colour, label=f"{record.label}: too few bins to fit")
        return
    energy = np.geomspace(min(b["low"] for b in bins), max(b["high"] for b in bins), 200)
    axis.plot(
        energy,
        100 * fit.curve(energy),
        color=colour,
        lw=1.2,
        label=f"{record.label}: {fit.label()}",
    )


def plot_relative_error(records: list[RunRecord], path: Path) -> Path:
    """Mean relative error |pred - true| / true per energy bin, with its standard error."""
    fig = Figure(figsize=(7, 4.2))
    axis = fig.subplots()
    log = _log_x(records)
    for index, (record, colour) in enumerate(zip(records, run_colours(len(records)), strict=True)):
        bins = record.response
        axis.errorbar(
            _shift([b["true_mean"] for b in bins], index, len(records), log),
            [100 * b["relative_error"] for b in bins],
            yerr=[100 * b["relative_error_err"] for b in bins],
            fmt="o",
            capsize=3,
            color=colour,
            label=_label(record),
        )
    axis.axhline(10, color="grey", ls="--", lw=0.8, label="10%")
    axis.set_xlabel("true energy E [GeV]")
    axis.set_ylabel("relative error |pred - true| / true [%]")
    axis.set_ylim(bottom=0)
    if log:
        axis.set_xscale("log")
    axis.set_title(f"Relative error per bin of true energy (test set)\n{images_caption(records)}")
    axis.grid(True, which="both", alpha=0.3)
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
        "generations or steps | evaluations | train s | wall s | s to 10% | s to 5% |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        s = record.summary
        worst = max((b["relative_error"] for b in record.response), default=None)
        lines.append(
            f"| {record.label} | {record.method} | {pct(s.get('test_mape'))} | {pct(worst)} | "
            f"{pct(s.get('best_fitness'))} | {s.get('epochs')} | {s.get('generations')} | "
            f"{s.get('evaluations')} | {s.get('train_seconds', 0):.1f} | "
            f"{s.get('wall_seconds', 0):.1f} | {secs(s.get('seconds_to_mape_10'))} | "
            f"{secs(s.get('seconds_to_mape_5'))} |"
        )
    return "\n".join(lines) + "\n"


def response_table(records: list[RunRecord]) -> str:
    """Markdown: the per-bin response and resolution of every run, then its resolution fit."""
    lines = [
        "| run | E [GeV] | events | mean E [GeV] | predicted / true | sigma(E)/E [%] |",
        "|---|---|---|---|---|---|",
    ]
    for record in records:
        for b in record.response:
            lines.append(
                f"| {_label(record)} | {b['low']:.3g}-{b['high']:.3g} | {b['count']} | "
                f"{b['true_mean']:.3g} | {format_pm(b['ratio'], b['ratio_err'])} | "
                f"{format_pm(b['resolution'], b['resolution_err'], 100)} |"
            )
    lines += ["", "| run | a [GeV^1/2] | b | c [GeV] | chi2 / ndf |", "|---|---|---|---|---|"]
    for record in records:
        fit = record.resolution_fit()
        if fit is None:
            lines.append(f"| {_label(record)} | - | - | - | too few bins |")
            continue
        lines.append(
            f"| {_label(record)} | {' | '.join(fit.terms())} | {fit.chi2:.1f} / {fit.ndf} |"
        )
    return "\n".join(lines) + "\n"
