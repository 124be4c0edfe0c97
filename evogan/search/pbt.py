"""Population Based Training: segments, the exploit/explore rule, lineage and worker trials.

A PBT campaign trains one *worker* per rank group (not to be confused with the ensemble members
of the fitness) for ``budget.amount`` in segments of ``pbt.interval``; every segment is one
table row (``wWWsSSS``) trained from the checkpoint of the segment before it. After each
segment :func:`exploit_explore` decides, the same way on every group leader: the worst
``quantile`` of the workers, and every worker whose segment failed, copy a worker drawn from
the best ``quantile`` of those that trained fine (its weights through the campaign's weight
inheritance, and its hyper-parameters), then perturb the hyper-parameters (:func:`perturb`).
The runtime is :mod:`evogan.search.pbt_backend`.

:func:`lineage` lists who copied whom for summary.json; :class:`WorkerMirror` writes one
Optuna trial per worker into the campaign's journal, its segment scores as intermediate values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evogan.config.search import PbtConfig, SearchConfig
from evogan.search.journal import JournalMirror, frozen_trial
from evogan.search.rungs import rung_key
from evogan.search.space import Genome, Space, clip_value, draw_value


def worker_id(worker: int) -> str:
    return f"w{worker:02d}"


def segment_id(worker: int, segment: int) -> str:
    """The table id of one worker's segment, ``w01s002``."""
    return f"{worker_id(worker)}s{segment:03d}"


def segment_count(config: SearchConfig) -> int:
    """Segments of each worker: ``budget.amount / pbt.interval`` (whole, checked by config)."""
    return round(config.budget.amount / config.pbt.interval)


def segment_end(config: SearchConfig, segment: int) -> float:
    """The budget a worker's weights have trained at the end of ``segment``."""
    return (segment + 1) * config.pbt.interval


def quantile_count(population: int, quantile: float) -> int:
    """Workers in each tail: ``ceil(population x quantile)``, at most half (as Ray Tune)."""
    return min(math.ceil(population * quantile - 1e-9), population // 2)


@dataclass(frozen=True)
class Exploit:
    """Worker ``worker`` continues from worker ``source``'s weights with ``genome``."""

    worker: int
    source: int
    genome: Genome
    perturbation: dict[str, Any]  # gene -> factor, or "resample"


def perturb(
    genome: Genome, space: Space, settings: PbtConfig, rng: np.random.Generator
) -> tuple[Genome, dict[str, Any]]:
    """Explore: each gene of ``settings.perturb`` (default all) is redrawn with
    ``resample_probability``, else multiplied by a factor drawn from ``factors`` and clipped to
    its bounds (an integer gene the product leaves unchanged moves one step; a categorical gene
    moves to the next choice up for a factor above 1, down below 1)."""
    genes = {gene.name: gene for gene in space.genes}
    names = settings.perturb or list(genes)
    child, moves = dict(genome), {}
    for name in names:
        gene = genes[name]
        if rng.random() < settings.resample_probability:
            child[name], moves[name] = draw_value(gene, rng), "resample"
            continue
        factor = float(settings.factors[int(rng.integers(len(settings.factors)))])
        child[name], moves[name] = _scaled(gene, genome[name], factor), factor
    return child, moves


def _scaled(gene: Any, value: Any, factor: float) -> Any:
    direction = (factor > 1) - (factor < 1)
    if gene.type == "categorical":
        index = next(i for i, c in enumerate(gene.choices) if c == value)
        return gene.choices[min(max(index + direction, 0), len(gene.choices) - 1)]
    new = clip_value(gene, value * factor)
    if gene.type == "int" and new == value:
        new = clip_value(gene, value + direction * (gene.step or 1))
    return new


def exploit_explore(
    fitness: list[float],
    genomes: list[Genome],
    space: Space,
    settings: PbtConfig,
    rng: np.random.Generator,
) -> dict[int, Exploit] | None:
    """The workers that copy another after a segment, by worker (lower fitness is better; a
    non-finite fitness is a failed segment). The worst ``quantile`` and every failed worker copy
    a worker drawn at random from the best ``quantile`` of the finite ones and perturb its
    genome. None when no worker trained fine (nothing to copy)."""
    population = len(fitness)
    finite = [w for w in range(population) if math.isfinite(fitness[w])]
    if not finite:
        return None
    tail = quantile_count(population, settings.quantile)
    order = sorted(range(population), key=lambda w: (_worst(fitness[w]), w))
    top = [w for w in order[:tail] if w in finite]
    bottom = set(order[population - tail :]) | (set(range(population)) - set(finite))
    exploits = {}
    for worker in sorted(bottom - set(top)):
        source = top[int(rng.integers(len(top)))]
        genome, moves = perturb(genomes[source], space, settings, rng)
        exploits[worker] = Exploit(worker, source, genome, moves)
    return exploits


def _worst(value: float) -> float:
    return value if math.isfinite(value) else math.inf


def lineage(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Who copied whom, by worker: at which segment, from which row, with what perturbation."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in sorted((r for r in rows if "worker" in r), key=lambda r: (r["worker"], r["id"])):
        entries = found.setdefault(worker_id(row["worker"]), [])
        if row.get("exploit"):
            entries.append({"segment": row["segment"], **row["exploit"]})
    return found


def pbt_summary(config: SearchConfig, rows: list[dict[str, Any]], groups: int) -> dict[str, Any]:
    """summary.json's ``pbt``: the population, segments and lineage."""
    return {
        "workers": groups,
        "segments": segment_count(config),
        "interval": config.pbt.interval,
        "budget_kind": config.budget.kind,
        "lineage": lineage(rows),
    }


def worker_trial(rows: list[dict[str, Any]], space: Space, objectives: int) -> Any:
    """One finished Optuna trial for a worker (``rows``: its segments in order): state, values
    and parameters of its last segment, every segment's score at the budget its weights had
    trained as intermediate values, its lineage and hyper-parameter schedule as attributes."""
    last = rows[-1]
    curve: dict[str, float] = {}
    for row in rows:
        curve.update(row.get("intermediate") or {})
    attrs = {
        "candidate": worker_id(last["worker"]),
        "segments": [r["id"] for r in rows],
        "lineage": lineage(rows)[worker_id(last["worker"])],
        "schedule": [r["genome"] for r in rows],
    }
    return frozen_trial(last, space, objectives, intermediate=curve, attrs=attrs)


class WorkerMirror(JournalMirror):
    """Adds one trial per PBT worker to the journal once its last segment is in the table."""

    def __init__(self, path: Path, space: Space, objectives: int, segments: int) -> None:
        super().__init__(path, space, objectives)
        self.segments = segments
        self.workers: dict[int, dict[int, dict[str, Any]]] = {}

    def trials(self, rows: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        for row in rows:
            if "worker" in row:
                self.workers.setdefault(row["worker"], {})[row["segment"]] = row
        ready = []
        for worker, segments in sorted(self.workers.items()):
            key = worker_id(worker)
            if key not in self.known and len(segments) == self.segments:
                ordered = [segments[s] for s in sorted(segments)]
                ready.append((key, worker_trial(ordered, self.space, self.objectives)))
        return ready


def score_point(config: SearchConfig, segment: int, row: dict[str, Any]) -> dict[str, float]:
    """A segment row's ``intermediate``: its mean score at the budget its weights trained."""
    if row["status"] != "ok":
        return {}
    return {rung_key(segment_end(config, segment)): row["score_mean"]}
