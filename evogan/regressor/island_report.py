"""What a regressor island run reports: each island's report, gathered on rank 0, turned into
the summary's island fields; the run's metrics files of several islands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evogan.engine import EvolutionResult, Hybrid
from evogan.islands.island import Island
from evogan.store import METRICS, RunDir, atomic_write, read_metrics, to_json

ISLANDS = "islands"
PER_ISLAND = (
    "island",
    "best_fitness",
    "generations",
    "evaluations",
    "train_seconds",
    "wall_seconds",
    "immigrants_used",
    "immigrant_wins",
)


def island_metrics(run: RunDir, island: int, islands: int) -> Path:
    """Where an island's metrics go: the run's own file when it is the only island."""
    if islands == 1:
        return run.file(METRICS)
    return run.path / ISLANDS / f"island-{island:04d}" / METRICS


def island_report(
    island: Island, result: EvolutionResult, counts: dict[str, int]
) -> dict[str, Any]:
    """One island's numbers for the summary (sent to rank 0)."""
    strategy, lineage = island.strategy, island.elite_lineage
    return {
        "island": island.settings.index,
        "best": result.best.detach().cpu().numpy(),
        "best_fitness": result.best_fitness,
        "elite_fitness": result.elite_fitness,
        "generations": result.generations,
        "evaluations": result.evaluations,
        "train_seconds": result.train_seconds,
        "eval_seconds": result.eval_seconds,
        "wall_seconds": result.wall_seconds,
        "loop_seconds": result.loop_seconds,
        "epochs": result.epochs,
        "migration": counts,
        "migrant_bytes": island.codec.bytes.summary(),
        "immigrants_used": island.immigrants_used,
        "immigrant_wins": island.immigrant_wins,
        "island_seconds": island.island_seconds,
        "island_cpu_seconds_share": island.island_cpu_seconds
        / max(strategy.train_cpu_seconds, 1e-12),
        "elite_lineage_bytes": None if lineage is None else len(lineage.to_bytes()),
        "elite_lineage_mutations": None if lineage is None else len(lineage),
        "gradient_steps": strategy.gradient_steps if isinstance(strategy, Hybrid) else None,
        "discarded_refinements": (
            strategy.discarded_refinements if isinstance(strategy, Hybrid) else None
        ),
    }


def best_report(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The island with the best (finite) fitness; ties go to the lower island."""
    return min(reports, key=lambda r: (_finite(r["best_fitness"]), r["island"]))


def _total(reports: list[dict[str, Any]], key: str) -> float:
    return sum(r[key] for r in reports)


def _migration_total(reports: list[dict[str, Any]], key: str) -> int:
    return sum(r["migration"].get(key, 0) for r in reports)


def time_fields(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary's evaluation time and its share of the steps and of the loop."""
    return {
        "eval_seconds": max(r["eval_seconds"] for r in reports),
        "eval_share": _total(reports, "eval_seconds")
        / max(_total(reports, "train_seconds"), 1e-12),
        "eval_share_of_loop": _total(reports, "eval_seconds")
        / max(_total(reports, "loop_seconds"), 1e-12),
    }


def migration_fields(reports: list[dict[str, Any]], params: int) -> dict[str, Any]:
    """The summary's fields about migration, immigrants and island overhead."""
    return {
        "migrations_sent": _migration_total(reports, "messages_sent"),
        "migrations_received": _migration_total(reports, "messages_received"),
        "migrants_sent": _migration_total(reports, "migrants_sent"),
        "migrants_received": _migration_total(reports, "migrants_received"),
        "migrations_late": _migration_total(reports, "late"),
        "immigrants_used": _total(reports, "immigrants_used"),
        "immigrant_wins": _total(reports, "immigrant_wins"),
        "island_seconds": max(r["island_seconds"] for r in reports),
        "island_seconds_share": max(
            r["island_seconds"] / max(r["train_seconds"], 1e-12) for r in reports
        ),
        "island_cpu_seconds_share": max(r["island_cpu_seconds_share"] for r in reports),
        "bytes_per_migrant": _bytes_per_migrant(reports, params),
        "per_island": [
            {key: r[key] for key in PER_ISLAND} for r in sorted(reports, key=lambda r: r["island"])
        ],
    }


def _finite(value: float | None) -> float:
    return float("inf") if value is None or not np.isfinite(value) else float(value)


def _bytes_per_migrant(reports: list[dict[str, Any]], size: int) -> dict[str, Any]:
    """Mean bytes per migrant as raw weights and as actually sent (lineage deltas), and the
    whole lineage of the islands' final elites (what a migrant would cost with no delta)."""
    migrants = [r["migrant_bytes"] for r in reports if r["migrant_bytes"]["migrants"]]
    count = sum(m["migrants"] for m in migrants)
    whole = [r["elite_lineage_bytes"] for r in reports if r["elite_lineage_bytes"] is not None]
    return {
        "weights": 4 * size,
        "lineage": sum(whole) / len(whole) if whole else None,
        "sent": sum(m["sent"] * m["migrants"] for m in migrants) / count if count else None,
        "migrants": count,
    }


def write_global_epochs(run: RunDir, reports: list[dict[str, Any]]) -> None:
    """The run's metrics.jsonl for several islands: per epoch, the record of the island with
    the best reference fitness (its ``island`` field says which)."""
    lines = []
    epochs = max(len(r["epochs"]) for r in reports)
    for index in range(epochs):
        rows = [
            {**r["epochs"][index], "island": r["island"]}
            for r in reports
            if index < len(r["epochs"])
        ]
        lines.append(min(rows, key=lambda row: _finite(row.get("reference_fitness"))))
    run.write_text(METRICS, "".join(to_json(line) + "\n" for line in lines))


def truncate_metrics(path: Path, generation: int, epoch: int) -> None:
    """Drop the records written after the checkpoint a resumed island restarts from
    (generations from ``generation`` on, epochs from ``epoch`` on)."""
    if not path.is_file():
        return
    kept = [
        record
        for record in read_metrics(path)
        if (record.get("kind") == "epoch" and record["epoch"] < epoch)
        or (record.get("kind") == "generation" and record["generation"] < generation)
    ]
    atomic_write(path, "".join(to_json(record) + "\n" for record in kept))
