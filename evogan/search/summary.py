"""What a campaign found: best candidates, Pareto front, counts, busy time, throughput.

A resumed campaign writes ``summary.json`` once per session; :func:`merge_sessions` keeps every
earlier session's own figures in ``sessions`` (a killed session, which wrote none, gets what
the table says about it) and computes ``totals`` over the whole campaign from the table, so no
session overwrites another. The top-level ``busy_fraction`` and ``candidates_per_hour`` are
those totals (what ``evogan report`` shows).
"""

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
    "score_sem",
    "member_seeds",
    "reproduce",
)
SESSION_KEYS = (
    "session",
    "world_size",
    "groups",
    "complete",
    "stopped_by_signal",
    "session_wall_s",
    "busy_fraction",
    "candidates_trained_this_session",
    "candidates_per_hour",
    "counters",
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


def ranked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows that compete for best: ``ok`` and trained to the whole budget."""
    return [r for r in rows if r["status"] == "ok" and not r.get("partial")]


def best_rows(rows: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """The ``top`` best trained candidates. Fitness first, but candidates that tie with the
    best remaining one within their combined standard error (sqrt(sem_a^2 + sem_b^2); no sem:
    0) are ranked by cost (params, then FLOPs): a difference within the noise is no reason to
    pick the bigger network. Pruned candidates are never ``ok``, so never ranked here, nor are
    ``partial`` rows (PBT segments before the last: part of the budget)."""
    left = sorted(
        (r for r in ranked(rows) if math.isfinite(r["fitness"])),
        key=lambda r: r["fitness"],
    )
    chosen = []
    while left and len(chosen) < top:
        lead = left[0]
        tied = [r for r in left if r["fitness"] - lead["fitness"] < _combined_sem(lead, r)]
        pick = min([lead, *tied], key=lambda r: (r.get("params", 0), r.get("flops", 0)))
        chosen.append(pick)
        left.remove(pick)
    return [{k: r.get(k) for k in KEEP} for r in chosen]


def _combined_sem(a: dict[str, Any], b: dict[str, Any]) -> float:
    sems = [r.get("score_sem") for r in (a, b)]
    values = [v if v is not None and math.isfinite(v) else 0.0 for v in sems]
    return math.sqrt(values[0] ** 2 + values[1] ** 2)


def pareto_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The non-dominated ``ok`` candidates over their two objectives (DEAP's ParetoFront)."""
    ok = [r for r in ranked(rows) if len(r.get("objectives") or []) == 2]
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


def merge_sessions(
    summary: dict[str, Any],
    earlier: dict[str, Any],
    rows: list[dict[str, Any]],
    started: list[dict[str, Any]],
) -> dict[str, Any]:
    """``summary`` (this session's) with every session kept and campaign ``totals``.

    ``earlier``: the summary.json so far (its ``sessions`` and ``final`` are kept); ``rows``:
    the whole table; ``started``: the manifest's sessions (start time, ranks), killed ones
    too."""
    own = {s["session"]: s for s in earlier.get("sessions", [])}
    own[summary["session"]] = {k: summary.get(k) for k in SESSION_KEYS}
    sessions = []
    count = max(len(started), max(own) + 1)
    for number in range(count):
        start = started[number] if number < len(started) else {}
        entry = own.get(number) or {"session": number, "killed": True}
        ranks = start.get("ranks", entry.get("world_size"))
        entry = {**entry, "started": start.get("started"), "ranks": ranks}
        entry["candidates_in_table"] = sum(1 for r in trained(rows) if r.get("session") == number)
        entry.setdefault("session_wall_s", _table_wall(rows, number))
        sessions.append(entry)
    merged = {**summary, "sessions": sessions, "totals": campaign_totals(rows, sessions)}
    merged["busy_fraction"] = {**summary["busy_fraction"], "mean": merged["totals"]["busy"]}
    merged["candidates_per_hour"] = merged["totals"]["candidates_per_hour"]
    if "final" in earlier:
        merged["final"] = earlier["final"]
    return merged


def campaign_totals(rows: list[dict[str, Any]], sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures of the whole campaign from the table: counts, and busy time as the rank-seconds
    spent on candidates over the rank-seconds of all sessions (a killed session counts up to
    its last finished candidate)."""
    done = trained(rows)
    status = Counter(r["status"] for r in rows)
    wall = sum(s.get("session_wall_s") or 0.0 for s in sessions)
    capacity = sum((s.get("session_wall_s") or 0.0) * (s.get("ranks") or 0) for s in sessions)
    busy = sum((r.get("wall_s") or 0.0) * len(r.get("ranks") or []) for r in done)
    repaired = sum(1 for r in rows if r.get("repaired"))
    return {
        "sessions": len(sessions),
        "candidates_trained": len(done),
        "status_counts": dict(status),
        "invalid_genomes": {
            "found": status.get("invalid", 0) + repaired,
            "repaired": repaired,
            "rejected": status.get("invalid", 0),
        },
        "pruned": status.get("pruned", 0),
        "wall_s": wall,
        "busy_rank_s": busy,
        "busy": busy / capacity if capacity > 0 else 0.0,
        "candidates_per_hour": 3600.0 * len(done) / wall if wall > 0 else 0.0,
    }


def _table_wall(rows: list[dict[str, Any]], number: int) -> float:
    """A session without a summary (killed): campaign time from its start to its last row."""
    before = [r.get("elapsed_s", 0.0) for r in rows if r.get("session", 0) < number]
    mine = [r.get("elapsed_s", 0.0) for r in rows if r.get("session") == number]
    return max(0.0, max(mine, default=0.0) - max(before, default=0.0)) if mine else 0.0
