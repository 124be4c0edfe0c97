"""Figures and a table comparing 3DGAN training runs: the losses of every head against the
optimiser step, and the validation score against the step when the run was scored while it
trained. Read from metrics.jsonl alone, so a run still training (or stopped) can be drawn."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from evogan.plots import save_figure
from evogan.plots.runs import run_colours
from evogan.store import CONFIG, SUMMARY, RunDir

TITLES = {  # panels in this order; terms not named here follow alphabetically
    "loss": "total loss",
    "real_fake": "real/fake head (binary cross-entropy)",
    "energy": "primary-energy head",
    "ecal_sum": "ECAL-sum head",
    "angle": "angle head",
    "real_loss": "discriminator: total on real showers",
    "fake_loss": "discriminator: total on generated showers",
}
ROLES = {"d": ("discriminator", "-"), "g": ("generator", "--")}
PANEL_COLUMNS = 4


@dataclass
class GanRunRecord:
    """What the figures need from one gan3d run directory."""

    label: str
    mode: str
    finished: bool
    epochs: list[dict[str, Any]]
    validations: list[dict[str, Any]]

    @classmethod
    def load(cls, path: str | Path, label: str | None = None) -> GanRunRecord:
        """``label``: the run's name in legends and tables (default: its directory's name)."""
        run = RunDir.open(path)
        config = yaml.safe_load(run.file(CONFIG).read_text(encoding="utf-8"))
        return cls(
            label or run.name,
            str((config.get("trainer") or {}).get("mode", "-")),
            run.file(SUMMARY).is_file(),
            run.metrics("epoch"),
            run.metrics("validation"),
        )

    def steps(self) -> list[int]:
        """Optimiser steps (per rank) at the end of each epoch record."""
        done, steps = 0, []
        for record in self.epochs:
            done = int(record["step"]) if "step" in record else done + int(record["steps"])
            steps.append(done)
        return steps

    def losses(self) -> dict[str, list[float]]:
        """Every ``d_*`` and ``g_*`` loss of the epoch records, by name."""
        names = [k for k in (self.epochs[0] if self.epochs else {}) if k[:2] in ("d_", "g_")]
        return {name: [_number(r.get(name)) for r in self.epochs] for name in names}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


def plot_gan_losses(records: list[GanRunRecord], path: Path) -> Path:
    """One panel per loss term (discriminator solid, generator dashed), one colour per run."""
    found = {name[2:] for record in records for name in record.losses()}
    components = [c for c in TITLES if c in found] + sorted(found - set(TITLES))
    rows = max(1, -(-len(components) // PANEL_COLUMNS))
    fig = Figure(figsize=(4.2 * PANEL_COLUMNS, 3.2 * rows + 0.8), layout="constrained")
    axes = fig.subplots(rows, PANEL_COLUMNS, squeeze=False).ravel()
    colours = run_colours(len(records))
    for axis, component in zip(axes, components, strict=False):
        positive = True
        for record, colour in zip(records, colours, strict=True):
            steps, losses = record.steps(), record.losses()
            for role, (_, style) in ROLES.items():
                values = losses.get(f"{role}_{component}")
                if values is None:
                    continue
                positive &= all(v > 0 for v in values if math.isfinite(v))
                axis.plot(steps, values, ls=style, marker="o", ms=3, color=colour)
        axis.set_title(TITLES.get(component, component.replace("_", " ")), fontsize=9)
        axis.set_xlabel("optimiser steps per rank")
        axis.set_ylabel("loss (epoch mean)")
        if positive:
            axis.set_yscale("log")
        axis.grid(True, which="both", alpha=0.3)
    for axis in axes[len(components) :]:
        axis.set_visible(False)
    handles = [
        axes[0].plot([], [], color=colour, lw=2, label=record.label)[0]
        for record, colour in zip(records, colours, strict=True)
    ]
    handles += [
        axes[0].plot([], [], color="grey", ls=style, label=who)[0] for who, style in ROLES.values()
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), fontsize=8)
    fig.suptitle("3DGAN training losses (mean over each epoch)")
    return save_figure(fig, path)


def plot_gan_validation(records: list[GanRunRecord], path: Path) -> Path | None:
    """Write :func:`gan_validation_figure` to ``path``; None when no run was scored during
    training."""
    fig = gan_validation_figure(records)
    return None if fig is None else save_figure(fig, path)


def gan_validation_figure(records: list[GanRunRecord]) -> Figure | None:
    """Validation score against the step with the floor's spread (the score's sampling noise at
    this sample size) as error bars, as in ``learning_curve.png``; the reference floor dashed
    (band: the same spread), best points starred; None when no run was scored during
    training."""
    colours = run_colours(len(records))
    scored = [(r, c) for r, c in zip(records, colours, strict=True) if r.validations]
    if not scored:
        return None
    fig = Figure(figsize=(7, 4.5))
    axis = fig.subplots()
    positive = True
    for record, colour in scored:
        steps = [int(r["step"]) for r in record.validations]
        scores = [_number(r.get("score")) for r in record.validations]
        positive &= all(v > 0 for v in scores if math.isfinite(v))
        spreads = [_number(r.get("floor_spread")) for r in record.validations]
        axis.errorbar(
            steps,
            scores,
            yerr=[v if math.isfinite(v) else 0.0 for v in spreads],
            marker="o",
            ms=4,
            capsize=3,
            color=colour,
            label=record.label,
        )
        best = [
            (s, v)
            for r, s, v in zip(record.validations, steps, scores, strict=True)
            if r.get("best")
        ]
        if best:
            axis.plot(*zip(*best, strict=True), ls="", marker="*", ms=13, mfc="none", color=colour)
        _draw_floor(axis, record.validations[-1], record.label, colour)
    axis.plot(
        [], [], ls="", marker="*", ms=13, mfc="none", color="grey", label="best so far (kept)"
    )
    axis.plot([], [], ls="", label="bars and bands: the floor's spread (the score's noise)")
    if positive:
        axis.set_yscale("log")
    axis.set_xlabel("optimiser steps per rank")
    axis.set_ylabel("validation score (lower is better)")
    axis.set_title("3DGAN validation score during training")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    return fig


def _draw_floor(axis: Axes, last: dict[str, Any], label: str, colour: Any) -> None:
    """The reference floor of the run's last record, dashed, with its spread as a band (the
    score's own noise at this sample size)."""
    floor, spread = _number(last.get("floor")), _number(last.get("floor_spread"))
    if not math.isfinite(floor):
        return
    axis.axhline(floor, color=colour, ls="--", lw=1, label=f"{label}: reference floor")
    if math.isfinite(spread) and spread > 0:
        axis.axhspan(floor - spread, floor + spread, color=colour, alpha=0.15, lw=0)


def gan_table(records: list[GanRunRecord]) -> str:
    """Markdown: one line per GAN run (throughput, final losses, best validation score)."""
    lines = [
        "| run | mode | status | epochs | steps | ranks | samples/s | comm [%] | "
        "final D loss | final G loss | validations | best score | floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        last = record.epochs[-1] if record.epochs else {}
        steps = record.steps()
        rates = [_number(r.get("samples_per_s")) for r in record.epochs]
        shares = [_number(r.get("comm_share")) for r in record.epochs]
        scores = [_number(r.get("score")) for r in record.validations]
        floors = [_number(r.get("floor")) for r in record.validations]
        lines.append(
            f"| {record.label} | {record.mode} | "
            f"{'finished' if record.finished else 'not finished'} | "
            f"{last.get('epoch', 0)} | {steps[-1] if steps else 0} | {last.get('ranks', '-')} | "
            f"{_cell(_mean(rates), '.3g')} | {_cell(100 * _mean(shares), '.1f')} | "
            f"{_cell(_number(last.get('d_loss')), '.4g')} | "
            f"{_cell(_number(last.get('g_loss')), '.4g')} | {len(record.validations)} | "
            f"{_cell(min((v for v in scores if math.isfinite(v)), default=math.nan), '.4g')} | "
            f"{_cell(floors[-1] if floors else math.nan, '.4g')} |"
        )
    return "\n".join(lines) + "\n"


def _mean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _cell(value: float, spec: str) -> str:
    return format(value, spec) if math.isfinite(value) else "-"
