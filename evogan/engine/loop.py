"""The generation loop, shared by every strategy.

:class:`Evolution` owns the loop (epochs of data batches, one generation per batch) and the
bookkeeping (DEAP statistics, logbook and hall of fame, timing, observers). A strategy
implements :meth:`Evolution.propose` and :meth:`Evolution.select`; variants override one hook:
:meth:`~Evolution.refine` (hybrid gradient steps), :meth:`~Evolution.after_generation` (island
migration), :meth:`~Evolution.on_epoch_end` (checkpoints).
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from deap import base, tools
from torch import Tensor

from evogan.engine.problem import GenerationContext, Problem
from evogan.engine.schedules import Constant, Schedule
from evogan.engine.seeding import torch_generator

Observer = Callable[[dict[str, Any]], None]


class FitnessMin(base.Fitness):
    """DEAP fitness of a minimisation problem (one objective)."""

    weights = (-1.0,)


class Individual:
    """A genome with a DEAP fitness, the unit the hall of fame keeps."""

    def __init__(self, genome: Tensor, fitness: float) -> None:
        self.genome = genome
        self.fitness = FitnessMin((fitness,))


@dataclass
class Streams:
    """Independent random streams: initial genomes, mutation, data order."""

    init: torch.Generator
    mutation: torch.Generator
    data: torch.Generator

    @classmethod
    def derive(cls, root: int, island: int = 0) -> Streams:
        """Streams of one island, derived from (root seed, island)."""
        return cls(*(torch_generator(root, "island", island, name) for name in cls._names()))

    @staticmethod
    def _names() -> tuple[str, ...]:
        return ("init", "mutation", "data")


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


def rank_safe(fitness: Tensor) -> Tensor:
    """Fitness as float64 on the CPU with NaN ranked last (+inf), so selection never crashes."""
    fitness = fitness.detach().to("cpu", torch.float64).reshape(-1)
    return torch.nan_to_num(fitness, nan=math.inf, posinf=math.inf, neginf=-math.inf)


def _statistics() -> tools.Statistics:
    """Plain-Python statistics: on a generation's handful of fitness values numpy's per-call
    overhead cost more than the whole rest of the bookkeeping."""
    stats = tools.Statistics()
    stats.register("best", min)
    stats.register("mean", statistics.fmean)
    stats.register("std", _population_std)
    stats.register("worst", max)
    return stats


def _population_std(values: list[float]) -> float:
    mean = statistics.fmean(values)
    return math.sqrt(statistics.fmean([(value - mean) ** 2 for value in values]))


def _same_genome(a: Individual, b: Individual) -> bool:
    return torch.equal(a.genome, b.genome)


class Evolution(ABC):
    """Base of every strategy: owns the epoch/generation loop and its records."""

    def __init__(
        self,
        problem: Problem,
        *,
        epochs: int,
        streams: Streams,
        rate: Schedule | None = None,
        power: Schedule | None = None,
        hall_of_fame: int = 1,
        observers: Iterable[Observer] = (),
        epoch_report: Callable[[Tensor], dict[str, Any]] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if epochs < 1:
            raise ValueError(f"epochs must be at least 1, got {epochs}")
        self.problem = problem
        self.epochs = epochs
        self.streams = streams
        self.rate = rate or Constant(0.1)
        self.power = power or Constant(0.1)
        self.observers = list(observers)
        self.epoch_report = epoch_report
        self.clock = clock
        self.elite: Tensor | None = None
        self.elite_fitness = math.inf
        self.start_epoch = 0
        self.start_batch = 0
        self.generation = 0
        self.evaluations = 0
        self.train_seconds = 0.0
        self.eval_seconds = 0.0
        self.loop_seconds = 0.0
        self.train_cpu_seconds = 0.0  # this process's CPU time in the steps (shared cores)
        self.logbook = tools.Logbook()
        self.logbook.header = ["generation", "epoch", "nevals", "best", "mean", "std", "worst"]
        self.stats = _statistics()
        self.hall_of_fame = tools.HallOfFame(hall_of_fame, similar=_same_genome)
        self.epoch_records: list[dict[str, Any]] = []
        self._started = 0.0

    # -- what a strategy implements ------------------------------------------------------
    @abstractmethod
    def propose(self, context: GenerationContext) -> Tensor:
        """The candidates (P, size) of this generation."""

    @abstractmethod
    def select(self, candidates: Tensor, fitness: Tensor, context: GenerationContext) -> None:
        """Update ``self.elite`` / ``self.elite_fitness`` from the evaluated candidates."""

    # -- hooks (no-ops by default) -------------------------------------------------------
    def on_start(self) -> None:
        """Before the first generation (resume from a checkpoint here)."""
        return None

    def refine(self, batch: Any, context: GenerationContext) -> None:
        """After selection, before the next generation (hybrid strategies train the elite)."""
        return None

    def after_generation(self, record: dict[str, Any]) -> None:
        """After each generation's bookkeeping (island models migrate here)."""
        return None

    def on_epoch_end(self, record: dict[str, Any]) -> None:
        """After each epoch's bookkeeping (checkpoints go here)."""
        return None

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> EvolutionResult:
        self._started = self.clock()
        self.on_start()
        for epoch in range(self.start_epoch, self.epochs):
            batches = self.problem.batches(epoch, self.streams.data)
            loop_start = self.clock()
            try:
                for batch in itertools.islice(batches, self.start_batch, None):  # resumed
                    self.step(batch, epoch)
            finally:
                self.loop_seconds += self.clock() - loop_start
            self.start_batch = 0
            self.end_epoch(epoch)
        return self.result()

    def step(self, batch: Any, epoch: int) -> dict[str, Any]:
        """One generation on one batch: propose, evaluate all candidates in one call, select."""
        start, cpu_start = self.clock(), time.process_time()
        context = GenerationContext(epoch, self.generation, self.rate(epoch), self.power(epoch))
        candidates = self.propose(context)
        eval_start = self.clock()
        fitness = rank_safe(self.problem.evaluate(candidates, batch))
        eval_seconds = self.clock() - eval_start
        if fitness.numel() != candidates.shape[0]:
            raise ValueError(
                f"evaluate must return one fitness per genome ({candidates.shape[0]}), "
                f"got {fitness.numel()}"
            )
        self.select(candidates, fitness, context)
        self.refine(batch, context)
        step_seconds = self.clock() - start
        self.train_cpu_seconds += time.process_time() - cpu_start
        self.evaluations += candidates.shape[0]
        self.train_seconds += step_seconds
        self.eval_seconds += eval_seconds
        record = self._generation_record(context, fitness, eval_seconds, step_seconds)
        self.generation += 1
        self.after_generation(record)
        self._notify(record)
        return record

    def end_epoch(self, epoch: int) -> dict[str, Any]:
        """Score the elite on the reference set, update the hall of fame, report."""
        if self.elite is None:
            raise ValueError(f"epoch {epoch} ran no generation: the problem yielded no batches")
        reference = self.problem.reference_fitness(self.elite.unsqueeze(0))
        score = self.elite_fitness if reference is None else float(rank_safe(reference)[0])
        self.hall_of_fame.update([Individual(self.elite.detach().clone(), score)])
        record = {
            "kind": "epoch",
            "epoch": epoch,
            "generation": self.generation,
            "evaluations": self.evaluations,
            "elite_fitness": self.elite_fitness,
            "reference_fitness": score,
            "hall_of_fame_fitness": self.hall_of_fame[0].fitness.values[0],
            "train_seconds": self.train_seconds,
            "wall_seconds": self.clock() - self._started,
        }
        if self.epoch_report is not None:
            record.update(self.epoch_report(self.elite))
        self.epoch_records.append(record)
        self.on_epoch_end(record)
        self._notify(record)
        return record

    def result(self) -> EvolutionResult:
        best = self.hall_of_fame[0]
        return EvolutionResult(
            best=best.genome,
            best_fitness=best.fitness.values[0],
            elite=self.elite,
            elite_fitness=self.elite_fitness,
            generations=self.generation,
            evaluations=self.evaluations,
            train_seconds=self.train_seconds,
            eval_seconds=self.eval_seconds,
            wall_seconds=self.clock() - self._started,
            loop_seconds=self.loop_seconds,
            logbook=self.logbook,
            hall_of_fame=self.hall_of_fame,
            epochs=list(self.epoch_records),
        )

    def _generation_record(
        self, context: GenerationContext, fitness: Tensor, eval_seconds: float, step_seconds: float
    ) -> dict[str, Any]:
        values = fitness.tolist()
        finite = [value for value in values if math.isfinite(value)]
        stats = self.stats.compile(finite) if finite else dict.fromkeys(self.stats.fields)
        self.logbook.record(
            generation=context.generation, epoch=context.epoch, nevals=len(values), **stats
        )
        return {
            "kind": "generation",
            "generation": context.generation,
            "epoch": context.epoch,
            **{key: None if value is None else float(value) for key, value in stats.items()},
            "elite_fitness": self.elite_fitness,
            "invalid": len(values) - len(finite),
            "nevals": len(values),
            "evaluations": self.evaluations,
            "eval_seconds": eval_seconds,
            "step_seconds": step_seconds,
            "evaluations_per_s": self.evaluations / max(self.train_seconds, 1e-12),
            "train_seconds": self.train_seconds,
            "wall_seconds": self.clock() - self._started,
            "rate": context.rate,
            "power": context.power,
        }

    def _notify(self, record: dict[str, Any]) -> None:
        for observer in self.observers:
            observer(record)
