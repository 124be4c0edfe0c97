"""summary.json across sessions (no MPI): every session's own figures are kept, a killed one is
described from the table, totals come from the table, and ``final`` survives later summaries."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evogan.search.campaign import MANIFEST, Campaign
from evogan.search.summary import best_rows, build_summary
from evogan.store import atomic_write


def _row(index: int, session: int, elapsed: float, status: str = "ok", **extra) -> dict:
    fitness = float(index) if status == "ok" else math.inf
    return {
        "id": f"c{index:02d}",
        "status": status,
        "fitness": fitness,
        "objectives": [fitness],
        "params": 10,
        "flops": 20,
        "genome": {"x": index},
        "elapsed_s": elapsed,
        "session": session,
        "wall_s": 2.0,
        "ranks": [0, 1],
        **extra,
    }


def _summary(campaign: Campaign, session: int, wall: float) -> dict:
    return build_summary(
        campaign.rows(),
        backend="ga",
        top=2,
        session=session,
        world_size=4,
        groups=2,
        target=4,
        wall_s=wall,
        busy_s=[0.5 * wall] * 4,
        counters={},
        stopped=False,
    )


def test_sessions_are_kept_and_totals_come_from_the_table(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path)
    started = [{"started": f"t{k}", "ranks": 4} for k in range(3)]
    atomic_write(tmp_path / MANIFEST, json.dumps({"backend": "ga", "sessions": started[:1]}))
    for row in (_row(0, 0, 5.0), _row(1, 0, 8.0, repaired=True)):
        campaign.append("island-000", row)
    campaign.write_summary(_summary(campaign, 0, 10.0))
    campaign.write_final({"verdict": "yes"})
    # session 1 was killed after one candidate (no summary); session 2 finishes the campaign
    campaign.append("island-000", _row(2, 1, 14.0))
    campaign.append("island-000", _row(3, 2, 20.0, status="invalid", wall_s=0.0, ranks=[]))
    campaign.append("island-001", _row(4, 2, 21.0, status="pruned"))
    atomic_write(tmp_path / MANIFEST, json.dumps({"backend": "ga", "sessions": started}))
    campaign.write_summary(_summary(campaign, 2, 6.0))

    summary = campaign.summary()
    assert summary["final"] == {"verdict": "yes"}  # set once, kept by later summaries
    sessions = summary["sessions"]
    assert [s["session"] for s in sessions] == [0, 1, 2]
    assert sessions[0]["session_wall_s"] == 10.0 and sessions[0]["busy_fraction"]["mean"] == 0.5
    assert sessions[0]["candidates_trained_this_session"] == 2
    assert sessions[1]["killed"] and sessions[1]["session_wall_s"] == 6.0  # 14 s - 8 s
    assert [s["candidates_in_table"] for s in sessions] == [2, 1, 1]
    totals = summary["totals"]
    assert totals["candidates_trained"] == 4 and totals["pruned"] == 1
    assert totals["invalid_genomes"] == {"found": 2, "repaired": 1, "rejected": 1}
    assert totals["wall_s"] == 22.0
    assert totals["candidates_per_hour"] == 3600 * 4 / 22.0
    assert totals["busy"] == (4 * 2.0 * 2) / (22.0 * 4)
    assert summary["candidates_per_hour"] == totals["candidates_per_hour"]  # what report shows
    assert summary["busy_fraction"]["mean"] == totals["busy"]


def test_ties_within_the_standard_error_are_ranked_by_cost() -> None:
    rows = [
        {"id": "big", "status": "ok", "fitness": 1.0, "score_sem": 0.2, "params": 900},
        {"id": "small", "status": "ok", "fitness": 1.1, "score_sem": 0.2, "params": 100},
        {"id": "far", "status": "ok", "fitness": 2.0, "score_sem": 0.1, "params": 10},
        {"id": "cut", "status": "pruned", "fitness": math.inf, "params": 1},
    ]
    assert [r["id"] for r in best_rows(rows, 3)] == ["small", "big", "far"]
    for row in rows:
        row["score_sem"] = None  # no error known: fitness alone
    assert [r["id"] for r in best_rows(rows, 3)] == ["big", "small", "far"]


@pytest.mark.slow
def test_totals_after_a_kill_and_resume_equal_an_uninterrupted_campaign(tmp_path: Path) -> None:
    """Real ``mpirun -n 2`` (two groups of one rank): the same 4 candidates (no migration, so
    the islands do not depend on timing) trained in one session, or killed after two and
    resumed, give the same totals; the resume keeps the finished candidates as they were and
    trains none twice; ``final`` written between the sessions is kept, and the report shows
    the totals."""
    from tests.test_search_campaign import _config, _resume, _rows, _search, kill_after_rows

    ga = {"population": 2, "offspring": 2, "invalid": "repair", "migration": {"migrants": 0}}
    config = _config(tmp_path, candidates=4, ga=ga, final={"top": 0}, ranks_per_group=1)
    whole = tmp_path / "whole"
    assert _search(tmp_path, config, "--run-dir", str(whole), ranks=2).returncode == 0
    killed = tmp_path / "killed"
    before = kill_after_rows(tmp_path, config, killed, 2, ranks=2)
    assert 2 <= before < 4, "the campaign must be killed part-way"
    assert not (killed / "summary.json").exists()
    finished = {r["id"]: r for r in _rows(killed)}
    Campaign(killed).write_final({"kept": True})
    result = _resume(tmp_path, killed, "--force", ranks=2)  # killed: no clean stop recorded
    assert result.returncode == 0, result.stderr[-3000:]
    ids = [r["id"] for r in _rows(killed)]
    assert len(ids) == len(set(ids)) == 4, "no candidate may be trained twice"
    for row in _rows(killed):
        assert row == finished[row["id"]] if row["id"] in finished else row["session"] == 1

    def genomes(path: Path) -> dict:
        return {r["id"]: r["genome"] for r in _rows(path)}

    assert genomes(killed) == genomes(whole)  # the same candidates
    one, two = Campaign(whole).summary(), Campaign(killed).summary()
    counts = ("candidates_trained", "status_counts", "invalid_genomes", "pruned")
    assert {k: two["totals"][k] for k in counts} == {k: one["totals"][k] for k in counts}
    assert two["final"] == {"kept": True}
    assert [s.get("killed", False) for s in two["sessions"]] == [True, False]
    assert sum(s["candidates_in_table"] for s in two["sessions"]) == 4
    assert two["sessions"][0]["candidates_in_table"] == before
    assert two["complete"] and two["candidates_trained_this_session"] == 4 - before
    assert two["candidates_per_hour"] == two["totals"]["candidates_per_hour"] > 0
    assert two["busy_fraction"]["mean"] == two["totals"]["busy"] > 0
