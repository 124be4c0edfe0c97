"""What the generation loop produces and hands around: DEAP individuals, results, the
selection its hooks see, and the loop state a checkpoint keeps."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import torch
from deap import base, tools
from torch import Tensor

from evogan.engine.problem import GenerationContext


class FitnessMin(base.Fitness):
    """DEAP fitness of a minimisation problem (one objective)."""

    weights = (-1.0,)


class Individual:
    """A genome with a DEAP fitness, the unit the hall of fame keeps."""

    def __init__(self, genome: Tensor, fitness: float) -> None:
        self.genome = genome
        self.fitness = FitnessMin((fitness,))


@dataclass
class EvolutionResult:
    """What a run produced; ``best`` is the hall of fame's first individual."""

    best: Tensor
    best_fitness: float
    elite: Tensor
    elite_fitness: float
    generations: int
    evaluations: int
    train_seconds: float
    eval_seconds: float
    wall_seconds: float
    loop_seconds: float
    """Wall time of the generation loop: steps plus batch fetching, bookkeeping and hooks
    (migration, checkpoints), without the per-epoch scoring."""
    logbook: tools.Logbook
    hall_of_fame: tools.HallOfFame
    epochs: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class InitialDraw:
    """The candidates are ``count`` initial genomes drawn with ``seeded(seed)``."""

    seed: int
    count: int


@dataclass(frozen=True)
class ChildDraw:
    """Row 0 is the elite, rows 1.. the ``count`` children of the mutation seed
    ``splitmix(key, generation)`` at ``rate`` and ``power``."""

    key: int
    generation: int
    count: int
    rate: float
    power: float


Draw = InitialDraw | ChildDraw


@dataclass(frozen=True)
class Selection:
    """What :attr:`Evolution.after_selection` hooks see: the evaluated candidates, their
    fitness, whether :meth:`Evolution.refine` changed the elite after selection (then the
    elite is no longer one of the candidates) and the row selected as the elite (not always
    the lowest minibatch fitness: noise-aware acceptance may keep the old elite)."""

    candidates: Tensor
    fitness: Tensor
    context: GenerationContext
    refined: bool
    kept: int


@dataclass
class LoopState:
    """Where a strategy's loop stands: everything a resumed run needs to continue exactly
    (:meth:`Evolution.state`, :meth:`Evolution.load_state`). ``streams`` are the init,
    mutation and data stream states and the data stream's state at the start of the current
    epoch, of which ``batch`` batches are done; ``strategy`` holds what a strategy adds (the
    step-size adaptation, the hybrid's optimiser)."""

    generation: int
    epoch: int
    batch: int
    streams: list[Tensor]
    elite: Tensor | None
    elite_fitness: float
    evaluations: int
    train_seconds: float
    eval_seconds: float
    train_cpu_seconds: float
    loop_seconds: float
    hall_of_fame: list[tuple[Tensor, float]]
    logbook: tools.Logbook
    epoch_records: list[dict[str, Any]]
    strategy: dict[str, Any] | None = None
    wall_seconds: float = 0.0


def rank_safe(fitness: Tensor) -> Tensor:
    """Fitness as float64 on the CPU with NaN ranked last (+inf), so selection never crashes."""
    fitness = fitness.detach().to("cpu", torch.float64).reshape(-1)
    return torch.nan_to_num(fitness, nan=math.inf, posinf=math.inf, neginf=-math.inf)


def fitness_statistics() -> tools.Statistics:
    """Plain-Python statistics: on a generation's handful of fitness values numpy's per-call
    overhead cost more than the whole rest of the bookkeeping."""
    stats = tools.Statistics()
    stats.register("best", min)
    stats.register("mean", statistics.fmean)
    stats.register("std", population_std)
    stats.register("worst", max)
    return stats


def population_std(values: list[float]) -> float:
    mean = statistics.fmean(values)
    return math.sqrt(statistics.fmean([(value - mean) ** 2 for value in values]))


def same_genome(a: Individual, b: Individual) -> bool:
    return torch.equal(a.genome, b.genome)
