"""What ``evogan report`` shows of search campaigns: one record per campaign directory, the
markdown tables of the best architectures and of the final test, and the plain data its
figures draw (:mod:`evogan.plots.search`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evogan.errors import EvoganError
from evogan.plots.runs import refuse, run_task
from evogan.plots.search import CampaignView
from evogan.search.campaign import CONFIG, Campaign
from evogan.search.significance import ALPHA, holm, mann_whitney_differ, verdict
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

    def view(self) -> CampaignView:
        """The plain rows and numbers the report's figures draw."""
        return CampaignView(
            self.label,
            self.rows,
            pareto_rows(self.rows),
            self.best_so_far(),
            self.summary.get("final"),
        )


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


def _finals(records: list[CampaignRecord]) -> list[tuple[CampaignRecord, dict[str, Any]]]:
    """The campaigns that have a final test, with it."""
    return [(r, r.summary["final"]) for r in records if r.summary.get("final")]


def final_table(records: list[CampaignRecord]) -> str:
    """Markdown: each campaign's final test (fresh seeds), "" when no campaign has one. Where
    the report holds several tested candidates (several backends' winners against the same
    baseline), their p-values are also Holm-adjusted over all of them: a search wins only when
    it does so after that correction."""
    finals = _finals(records)
    if not finals:
        return ""
    tested = [c for _, final in finals for c in final["candidates"]]
    across = iter(holm([c["p_value"] for c in tested]))  # in the order the rows come
    several = len(tested) > 1
    lines = [
        "",
        "## Final test: re-trained with fresh seeds at the campaign's budget",
        "",
        "| campaign | id | scores per seed | mean | s.e. | failed | better than baseline |"
        + (f" p, Holm over the {len(tested)} tests here |" if several else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if several else ""),
    ]
    for record, final in finals:
        for block in [*final["candidates"], final["baseline"]]:
            scores = ", ".join(f"{v:.3g}" for v in block["scores"])
            answer, adjusted = "(baseline)", "-"
            if "p_value" in block:
                p_holm = next(across)
                answer = verdict(block)
                adjusted = f"{'yes' if p_holm < ALPHA else 'no'} ({p_holm:.3g})"
            lines.append(
                f"| {record.label} | {block['id']} | {scores} | {block['mean']:.4f} | "
                f"{_number(block['sem'])} | {len(block['failed'])} | {answer} |"
                + (f" {adjusted} |" if several else "")
            )
        failures = [
            (b["id"], f) for b in [*final["candidates"], final["baseline"]] for f in b["failed"]
        ]
        for name, failure in failures:
            lines.append(f"\n{name}, seed {failure['seed']}: {failure['reason']} (scored worst)")
    lines.append(
        f"\nOne-sided Mann-Whitney U test, alpha {ALPHA}: a candidate is better when its scores "
        'lie below the baseline\'s; failed trainings score worst. "better than baseline" '
        "corrects for the candidates its campaign tested (Holm-Bonferroni)"
        + ("; the last column for every candidate tested in this report." if several else ".")
    )
    return "\n".join(lines) + "\n"


def winners_table(records: list[CampaignRecord]) -> str:
    """Markdown: the final-tested winners of several campaigns against each other (two-sided:
    neither is the reference), "" with fewer than two. Campaigns with the same seed re-train
    their baseline with the same fresh seeds, so its scores must agree; the table says whether
    they do, which checks that the final tests are comparable at all."""
    finals = _finals(records)
    if len(finals) < 2:
        return ""
    lines = [
        "",
        "## Winners against each other",
        "",
        "| campaign | id | campaign | id | mean difference | p (two-sided) |",
        "|---|---|---|---|---|---|",
    ]
    for index, (first, a) in enumerate(finals):
        for second, b in finals[index + 1 :]:
            x, y = a["candidates"][0], b["candidates"][0]
            test = mann_whitney_differ(x["scores"], y["scores"])
            lines.append(
                f"| {first.label} | {x['id']} | {second.label} | {y['id']} | "
                f"{x['mean'] - y['mean']:+.4f} | {test.p:.3g} |"
            )
    lines.append(
        "\nMann-Whitney U test on the final test's fresh seeds of each campaign's best: a small "
        "p says the winners differ; a large one says this many seeds cannot tell them apart, "
        "not that they are equal."
    )
    groups: dict[str, list[tuple[str, list[float]]]] = {}
    for record, final in finals:
        key = json.dumps(final.get("seeds"))
        groups.setdefault(key, []).append((record.label, final["baseline"]["scores"]))
    for seeds, members in groups.items():
        if len(members) < 2:
            continue
        names = ", ".join(label for label, _ in members)
        spread = max(
            abs(u - v) for _, scores in members for u, v in zip(scores, members[0][1], strict=True)
        )
        lines.append(
            f"\nThe baseline on the same fresh seeds {seeds} in {names}: "
            + ("the same scores." if spread == 0 else f"scores differ by up to {spread:.4g}.")
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
