"""Campaign table round trip, best and Pareto selection, and the report figures (no MPI)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from evogan.search.campaign import CONFIG, Campaign
from evogan.search.evaluation import Evaluation
from evogan.search.summary import best_rows, build_summary, pareto_rows
from evogan.store import atomic_write
from evogan.store.metrics import to_json

ROW_KEYS = [
    "status",
    "fitness",
    "reason",
    "seeds",
    "member_scores",
    "score_mean",
    "score_std",
    "score_sem",
    "member_seeds",
    "reproduce",
    "params",
    "flops",
    "train_s",
    "eval_s",
    "inherited",
    "intermediate",
    "rung",
]
"""The record's keys in campaign tables on disk: a resume reads tables of earlier versions."""

PRUNED_LINE = (
    '{"id": "c00007", "status": "pruned", "fitness": null, "reason": "pruned at rung 0", '
    '"seeds": [11, 12], "member_scores": [], "score_mean": null, "score_std": null, '
    '"score_sem": null, "member_seeds": [11, 12], "reproduce": "evogan report c --reproduce '
    'c00007:0", "params": 1200, "flops": 34000, "train_s": 3.5, "eval_s": 0.0, "inherited": 1, '
    '"intermediate": {"2": 4.25, "6": null}, "rung": 0, "objectives": [null], "session": 0}'
)
"""A table line as the table writer wrote it: non-finite numbers as null."""


def _row(index: int, fitness: float, params: int, status: str = "ok") -> dict:
    return {
        "id": f"c{index:02d}",
        "status": status,
        "fitness": fitness,
        "score_mean": fitness,
        "score_std": 0.0,
        "member_scores": [fitness],
        "params": params,
        "flops": 2 * params,
        "objectives": [fitness, float(params)] if status == "ok" else [math.inf, math.inf],
        "genome": {"x": index},
        "elapsed_s": float(index),
        "session": 0,
    }


ROWS = [
    _row(0, 5.0, 100),
    _row(1, 3.0, 400),
    _row(2, 4.0, 50),
    _row(3, 6.0, 500),  # dominated by c00 and c01
    _row(4, math.inf, 10, status="nan"),
    _row(5, math.inf, 10, status="invalid"),
]


def test_table_round_trip_keeps_worst_fitness_and_skips_torn_lines(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path)
    for row in ROWS[:3]:
        campaign.append("island-000", row)
    for row in ROWS[3:]:
        campaign.append("island-001", row)
    with open(campaign.table_file("island-001"), "a") as stream:
        stream.write('{"id": "torn", "stat')  # a kill in the middle of a line
    rows = campaign.rows()
    assert [r["id"] for r in rows] == [r["id"] for r in ROWS]
    assert math.isinf(rows[4]["fitness"]) and rows[4]["objectives"] == [math.inf, math.inf]
    assert campaign.elapsed_offset() == 5.0


def test_best_and_pareto_front() -> None:
    assert [r["id"] for r in best_rows(ROWS, 2)] == ["c01", "c02"]
    front = {r["id"] for r in pareto_rows(ROWS)}
    assert front == {"c01", "c02"}  # c00 (5.0, 100) is dominated by c02 (4.0, 50)
    summary = build_summary(
        ROWS,
        backend="ga",
        top=3,
        session=0,
        world_size=4,
        groups=2,
        target=5,
        wall_s=10.0,
        busy_s=[9.0, 9.5, 10.0, 8.0],
        counters={},
        stopped=False,
    )
    assert summary["candidates_trained"] == 5 and summary["complete"]
    assert summary["status_counts"] == {"ok": 4, "nan": 1, "invalid": 1}
    assert summary["invalid_genomes"]["rejected"] == 1
    assert summary["busy_fraction"]["min"] == 0.8
    assert summary["candidates_per_hour"] == 3600 * 5 / 10.0


def test_report_writes_table_and_figures(tmp_path: Path, capsys) -> None:
    """Two campaigns of one directory name (two seeds' ``search``) are named by their folders."""
    from evogan.cli import main

    campaigns = []
    for name, rows in (("ga", ROWS), ("tpe", ROWS[1:])):
        campaign = Campaign(tmp_path / f"{name}-seed" / "search")
        for row in rows:
            campaign.append("study", row)
        text = "backend: ga\n" if name == "ga" else "backend: optuna\noptuna: {sampler: tpe}\n"
        atomic_write(campaign.path / CONFIG, "task: search\n" + text)
        campaigns.append(str(campaign.path))
    out = tmp_path / "report"
    assert main(["report", *campaigns, "--out", str(out)]) == 0
    table = (out / "report.md").read_text()
    assert "| ga (ga-seed/search) | 1 | c01 | 3.0000" in table and "tpe (tpe-seed/search)" in table
    capsys.readouterr()
    assert main(["report", campaigns[0], campaigns[0], "--out", str(tmp_path / "never")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"evogan: error: {campaigns[0]} is given twice; give each directory once"
    )
    for name in ("convergence.png", "pareto.png"):
        assert (out / name).stat().st_size > 10_000


def test_an_evaluation_writes_the_table_keys_and_reads_a_written_line_back() -> None:
    """The row keys are the record's fields, in the order of the tables on disk; a line read
    back from JSON is the same record (null: the worst fitness, an unmeasured score), and
    written again it is the same line."""
    record = Evaluation("nan", math.inf, "diverged", member_scores=[2.0, math.nan], rung=None)
    assert list(record.as_row()) == ROW_KEYS
    again = Evaluation.from_row(json.loads(to_json(record.as_row())))
    assert again.fitness == math.inf and math.isnan(again.member_scores[1])
    assert to_json(again.as_row()) == to_json(record.as_row())
    line = json.loads(PRUNED_LINE)
    pruned = Evaluation.from_row(line)
    assert pruned.fitness == math.inf and math.isnan(pruned.score_mean)
    assert pruned.intermediate["2"] == 4.25 and math.isnan(pruned.intermediate["6"])
    assert to_json(pruned.as_row()) == to_json({key: line[key] for key in ROW_KEYS})


def test_an_evaluation_reads_a_row_of_an_older_table_with_defaults() -> None:
    """Keys a table of an earlier evogan lacks take their defaults; other keys are no field."""
    old = {"id": "c00001", "status": "ok", "fitness": 3.0, "score_mean": 3.0, "session": 0}
    record = Evaluation.from_row(old)
    assert record.fitness == 3.0 and record.member_seeds == [] and math.isnan(record.score_sem)
