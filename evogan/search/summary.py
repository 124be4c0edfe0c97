"""What a campaign found: best candidates, Pareto front, counts, busy time, throughput."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from deap import base, tools

KEEP = (
    "id",
    "status",
    "fitness",
    "score_mean",
    "score_std",
    "member_scores",
    "params",
    "flops",
    "objectives",
    "genome",
    "elapsed_s",
    "session",
)


class _Front(base.Fitness):
    """Two minimised objectives for DEAP's ParetoFront."""

    weights = (-1.0, -1.0)


class _Point(list):
    def __init__(self, values: list[float]) -> None:
        super().__init__(values)
        self.fitness = _Front(tuple(values))


def trained(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of candidates that were trained (not refused before training)."""
    return [r for r in rows if r["status"] not in ("invalid", "memory")]


def best_rows(rows: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    ok = [r for r in rows if r["status"] == "ok" and math.isfinite(r["fitness"])]
    return [{k: r.get(k) for k in KEEP} for r in sorted(ok, key=lambda r: r["fitness"])[:top]]


def pareto_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The non-dominated ``ok`` candidates over their two objectives (DEAP's ParetoFront)."""
    ok = [r for r in rows if r["status"] == "ok" and len(r.get("objectives") or []) == 2]
    front = tools.ParetoFront(similar=lambda a, b: a.row_id == b.row_id)
    points = []
    for row in ok:
        point = _Point([float(v) for v in row["objectives"]])
        point.row_id = row["id"]
        points.append(point)
    front.update(points)
    ids = {p.row_id for p in front}
    chosen = [r for r in ok if r["id"] in ids]
    return [{k: r.get(k) for k in KEEP} for r in sorted(chosen, key=lambda r: r["objectives"])]


def build_summary(
    rows: list[dict[str, Any]],
    *,
    backend: str,
    top: int,
    session: int,
    world_size: int,
    groups: int,
    target: int,
    wall_s: float,
    busy_s: list[float],
    counters: dict[str, int],
    stopped: bool,
) -> dict[str, Any]:
    """The campaign's summary.json (rows: the whole table, all sessions)."""
    done = trained(rows)
    this_session = [r for r in done if r.get("session") == session]
    status = Counter(r["status"] for r in rows)
    fractions = [b / wall_s if wall_s > 0 else 0.0 for b in busy_s]
    return {
        "backend": backend,
        "complete": not stopped and len(done) >= target,
        "stopped_by_signal": stopped,
        "session": session,
        "world_size": world_size,
        "groups": groups,
        "candidates_target": target,
        "candidates_trained": len(done),
        "candidates_trained_this_session": len(this_session),
        "status_counts": dict(status),
        "invalid_genomes": {  # from the table, so every session counts
            "found": status.get("invalid", 0) + sum(1 for r in rows if r.get("repaired")),
            "repaired": sum(1 for r in rows if r.get("repaired")),
            "rejected": status.get("invalid", 0),
        },
        "counters": counters,
        "session_wall_s": wall_s,
        "campaign_elapsed_s": max((r.get("elapsed_s", 0.0) for r in rows), default=0.0),
        "busy_fraction": {
            "per_rank": fractions,
            "mean": sum(fractions) / len(fractions) if fractions else 0.0,
            "min": min(fractions, default=0.0),
        },
        "candidates_per_hour": 3600.0 * len(this_session) / wall_s if wall_s > 0 else 0.0,
        "best": best_rows(rows, top),
        "pareto_front": pareto_rows(rows),
    }
