"""Campaign table round trip, best and Pareto selection, and the report figures (no MPI)."""

from __future__ import annotations

import math
from pathlib import Path

from evogan.search.campaign import CONFIG, Campaign
from evogan.search.summary import best_rows, build_summary, pareto_rows
from evogan.store import atomic_write


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
