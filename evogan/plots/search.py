"""Figures and tables comparing search campaigns (GA vs TPE on the same budget)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from evogan.errors import EvoganError
from evogan.plots import save_figure
from evogan.plots.runs import refuse, run_colours, run_task
from evogan.search.campaign import CONFIG, Campaign
from evogan.search.significance import ALPHA, verdict
from evogan.search.summary import best_rows, pareto_rows, trained
from evogan.store.folders import require_directory


@dataclass
class CampaignRecord:
    """What the report needs from one campaign directory."""

    label: str
    path: Path
    rows: list[dict[str, Any]]
    summary: dict[str, Any]

    @classmethod
    def load(cls, path: str | Path, label: str | None = None) -> CampaignRecord:
        """``label``: the campaign's name in legends and tables (default: its directory's)."""
        campaign = Campaign(path)
        require_directory(campaign.path, "campaign directory")
        if not (campaign.path / CONFIG).is_file():
            raise EvoganError(
                f"{campaign.path} is not a search campaign (no {CONFIG}); pass directories "
                "written by `evogan search`"
            )
        task = run_task(campaign.path)
        refuse(campaign.path, task, "report", ("search",), "use evogan compare for training runs")
        config = yaml.safe_load((campaign.path / CONFIG).read_text())
        backend = config.get("backend", "?")
        method = (
            backend
            if backend in ("ga", "pbt")
            else config.get("optuna", {}).get("sampler", backend)
        )
        summary = campaign.summary()
        name = label or campaign.path.name
        return cls(f"{method} ({name})", campaign.path, campaign.rows(), summary)

    def best_so_far(self) -> tuple[list[int], list[float], list[float]]:
        """Evaluations, campaign seconds and best fitness after each trained candidate."""
        done = sorted(trained(self.rows), key=lambda r: r.get("elapsed_s", 0.0))
        counts, seconds, best = [], [], []
        current = math.inf
        for index, row in enumerate(done, start=1):
            if row["status"] == "ok":
                current = min(current, row["fitness"])
            if math.isfinite(current):
                counts.append(index)
                seconds.append(row.get("elapsed_s", 0.0))
                best.append(current)
        return counts, seconds, best


def plot_convergence(records: list[CampaignRecord], path: Path) -> Path:
    """Best fitness so far against evaluations and against campaign wall time."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    by_count, by_time = fig.subplots(1, 2)
    values: list[float] = []
    for record, colour in zip(records, run_colours(len(records)), strict=True):
        counts, seconds, best = record.best_so_far()
        values += best
        style = {"color": colour, "label": record.label, "drawstyle": "steps-post"}
        by_count.plot(counts, best, marker="o", ms=3, **style)
        by_time.plot(seconds, best, marker="o", ms=3, **style)
    by_count.set_xlabel("trained candidates")
    by_count.xaxis.set_major_locator(MaxNLocator(integer=True))
    by_time.set_xlabel("campaign wall time [s]")
    for axis in (by_count, by_time):
        _fitness_scale(axis, values)
        axis.set_ylabel("best fitness so far (lower is better)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    fig.suptitle("Architecture search: best validation fitness")
    return save_figure(fig, path)


def plot_pareto(records: list[CampaignRecord], path: Path, second: str) -> Path:
    """Fitness against model size (weights or FLOPs): every candidate, fronts highlighted."""
    fig = Figure(figsize=(6.5, 4.5))
    axis = fig.subplots()
    key = "flops" if second == "flops" else "params"
    for record, colour in zip(records, run_colours(len(records)), strict=True):
        ok = [r for r in record.rows if r["status"] == "ok"]
        axis.scatter(
            [r[key] for r in ok],
            [r["fitness"] for r in ok],
            s=14,
            alpha=0.45,
            color=colour,
            label=f"{record.label}: candidates",
        )
        front = pareto_rows(record.rows) or _front_by_size(ok, key)
        front = sorted(front, key=lambda r: r[key])
        axis.plot(
            [r[key] for r in front],
            [r["fitness"] for r in front],
            marker="D",
            ms=5,
            color=colour,
            drawstyle="steps-post",
            label=f"{record.label}: Pareto front",
        )
    axis.set_xscale("log")
    _fitness_scale(axis, [r["fitness"] for record in records for r in record.rows])
    axis.set_xlabel("forward FLOPs per shower" if key == "flops" else "trainable weights")
    axis.set_ylabel("fitness (lower is better)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    axis.set_title("Fitness against model size")
    return save_figure(fig, path)


def plot_final(records: list[CampaignRecord], path: Path) -> Path | None:
    """Each campaign's final test: every fresh-seed score of its tested candidates and of the
    baseline, their mean +- standard error and the test's p-value (None: no campaign has one)."""
    finals = [
        (r, r.summary["final"], colour)
        for r, colour in zip(records, run_colours(len(records)), strict=True)
        if r.summary.get("final")
    ]
    if not finals:
        return None
    columns = sum(len(final["candidates"]) + 1 for _, final, _ in finals)
    fig = Figure(figsize=(max(6.0, 2.2 * columns), 4.5), layout="constrained")
    axis = fig.subplots()
    ticks, names, values = [], [], []
    position = 0.0
    for record, final, colour in finals:
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
            test = (
                "baseline" if baseline else f"{block['id']}\np = {block['p_value']:.3g} vs baseline"
            )
            names.append(f"{record.label}\n{test}")
            values += scores
            position += 1.0
        position += 0.5
    axis.set_xticks(ticks, names, fontsize=8)
    _fitness_scale(axis, values)
    axis.set_ylabel("score per fresh seed (lower is better)")
    axis.grid(alpha=0.3, axis="y")
    seeds = sorted({final["retrain_seeds"] for _, final, _ in finals})
    axis.set_title(
        f"Final test: best candidates and baseline re-trained with {'/'.join(map(str, seeds))} "
        "fresh seeds each\ndots: one training each; diamonds: mean +- standard error; "
        "p: one-sided Mann-Whitney U",
        fontsize=9,
    )
    return save_figure(fig, path)


def _fitness_scale(axis: Axes, values: list[float]) -> None:
    """Log fitness axes only where the fitnesses span a decade; a narrow range reads better
    (and gets legible tick labels) on a linear axis."""
    finite = [v for v in values if math.isfinite(v)]
    if finite and min(finite) > 0 and max(finite) / min(finite) >= 10:
        axis.set_yscale("log")


def _front_by_size(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Non-dominated rows over (size, fitness) for campaigns run with one objective."""
    front, best = [], math.inf
    for row in sorted(rows, key=lambda r: (r[key], r["fitness"])):
        if row["fitness"] < best:
            front.append(row)
            best = row["fitness"]
    return front


def _short(value: Any) -> Any:
    """Floats to 4 significant digits so a genome fits on a table line."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short(v) for v in value]
    return value


def _number(value: float | None) -> str:
    """A table cell: 4 decimals, "-" for a missing value (one member has no standard error)."""
    return "-" if value is None or not math.isfinite(value) else f"{value:.4f}"


def final_table(records: list[CampaignRecord]) -> str:
    """Markdown: each campaign's final test (fresh seeds), "" when no campaign has one."""
    finals = [(r, r.summary["final"]) for r in records if r.summary.get("final")]
    if not finals:
        return ""
    lines = [
        "",
        "## Final test: re-trained with fresh seeds at the campaign's budget",
        "",
        "| campaign | id | scores per seed | mean | s.e. | failed | better than baseline |",
        "|---|---|---|---|---|---|---|",
    ]
    for record, final in finals:
        for block in [*final["candidates"], final["baseline"]]:
            scores = ", ".join(f"{v:.3g}" for v in block["scores"])
            answer = verdict(block) if "p_value" in block else "(baseline)"
            lines.append(
                f"| {record.label} | {block['id']} | {scores} | {block['mean']:.4f} | "
                f"{_number(block['sem'])} | {len(block['failed'])} | {answer} |"
            )
        failures = [
            (b["id"], f) for b in [*final["candidates"], final["baseline"]] for f in b["failed"]
        ]
        for name, failure in failures:
            lines.append(f"\n{name}, seed {failure['seed']}: {failure['reason']} (scored worst)")
    lines.append(
        f"\nOne-sided Mann-Whitney U test, alpha {ALPHA}: a candidate is better when its scores "
        "lie below the baseline's; failed trainings score worst."
    )
    return "\n".join(lines) + "\n"


def best_table(records: list[CampaignRecord], top: int) -> str:
    """Markdown: the best architectures of every campaign, then one line per campaign."""
    lines = [
        "| campaign | rank | id | fitness | score mean | score std | score s.e. | weights "
        "| genome |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    commands = []
    for record in records:
        full = {row["id"]: row for row in record.rows}
        for place, row in enumerate(best_rows(record.rows, top), start=1):
            genome = json.dumps(_short(row["genome"]), separators=(",", ":"))
            sem = full[row["id"]].get("score_sem")
            lines.append(
                f"| {record.label} | {place} | {row['id']} | {row['fitness']:.4f} | "
                f"{row['score_mean']:.4f} | {row['score_std']:.4f} | {_number(sem)} | "
                f"{row['params']} | `{genome}` |"
            )
            if full[row["id"]].get("reproduce"):
                seeds = full[row["id"]].get("member_seeds")
                commands.append(
                    f"- {row['id']} (member seeds {seeds}): `{full[row['id']]['reproduce']}`"
                )
    if commands:
        lines += ["", "Re-train and re-score member 0 of a candidate (`:M` for member M):", ""]
        lines += commands
    lines += [
        "",
        "| campaign | trained | failed | invalid (never trained) | busy | per hour |",
        "|---|---|---|---|---|---|",
    ]
    for record in records:
        done = trained(record.rows)
        failed = sum(1 for r in done if r["status"] != "ok")
        invalid = sum(1 for r in record.rows if r["status"] in ("invalid", "memory"))
        busy = record.summary.get("busy_fraction", {}).get("mean")
        rate = record.summary.get("candidates_per_hour")
        lines.append(
            f"| {record.label} | {len(done)} | {failed} | {invalid} | "
            f"{'-' if busy is None else f'{100 * busy:.1f}%'} | "
            f"{'-' if rate is None else f'{rate:.0f}'} |"
        )
    return "\n".join(lines) + "\n"
