"""The generation loop, shared by every strategy.

:class:`Evolution` owns the loop (epochs of data batches, one generation per batch) and the
bookkeeping (DEAP statistics, logbook and hall of fame, timing, observers). A strategy
implements :meth:`Evolution.propose` and :meth:`Evolution.select` (and may :meth:`~Evolution.
refine` the elite after selection). Whatever wraps a strategy (an island: immigrants,
lineages, migration, checkpoints) registers callables in its hook lists, as EvoTorch's
``SearchAlgorithm.step()`` runs its before/after step hooks: :attr:`~Evolution.before_step`,
:attr:`~Evolution.before_evaluation` (may replace the candidates), :attr:`~Evolution.
after_selection`, :attr:`~Evolution.after_step` and :attr:`~Evolution.after_epoch`.

:meth:`Evolution.step` may be driven by hand with one's own batches; :meth:`Evolution.result`
then reports the elite as the best when no epoch ended (the hall of fame is filled at epoch
ends only, where the elite is scored on the reference set).
"""

from __future__ import annotations

import itertools
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from deap import tools
from torch import Tensor

from evogan.engine.problem import GenerationContext, Problem
from evogan.engine.records import (
    Draw,
    EvolutionResult,
    Individual,
    LoopState,
    Selection,
    fitness_statistics,
    rank_safe,
    same_genome,
)
from evogan.engine.schedules import Constant, Schedule
from evogan.seeding import torch_generator

Observer = Callable[[dict[str, Any]], None]


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


class Evolution(ABC):
    """Base of every strategy: owns the epoch/generation loop, its records and hook lists."""

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
        self.before_step: list[Callable[[GenerationContext], None]] = []
        self.before_evaluation: list[Callable[[Tensor, GenerationContext], Tensor]] = []
        self.after_selection: list[Callable[[Selection], None]] = []
        self.after_step: list[Callable[[dict[str, Any]], None]] = []
        self.after_epoch: list[Callable[[dict[str, Any]], None]] = []
        self.elite: Tensor | None = None
        self.elite_fitness = math.inf
        self.last_draw: Draw | None = None
        """How the last candidates were made (seeds: lineages can name them); None where a
        strategy's candidates cannot be rebuilt from seeds."""
        self.start_epoch = 0
        self.start_batch = 0
        self.batch_in_epoch = 0
        self.generation = 0
        self.evaluations = 0
        self.train_seconds = 0.0
        self.eval_seconds = 0.0
        self.selection_eval_seconds = 0.0
        """Seconds :meth:`select` and :meth:`refine` spent evaluating (re-evaluations, the
        hybrid's check of its trained elite) in the current step: counted as evaluation, not
        as the loop's own overhead."""
        self.loop_seconds = 0.0
        self.train_cpu_seconds = 0.0  # this process's CPU time in the steps (shared cores)
        self.logbook = tools.Logbook()
        self.logbook.header = ["generation", "epoch", "nevals", "best", "mean", "std", "worst"]
        self.stats = fitness_statistics()
        self.hall_of_fame = tools.HallOfFame(hall_of_fame, similar=same_genome)
        self.epoch_records: list[dict[str, Any]] = []
        self._epoch_data_state = streams.data.get_state()
        self._started: float | None = None
        self._wall_before = 0.0  # wall seconds of the processes a resumed run ran in before
        self._stop = False

    # -- what a strategy implements ------------------------------------------------------
    @abstractmethod
    def propose(self, context: GenerationContext) -> Tensor:
        """The candidates (P, size) of this generation."""

    @abstractmethod
    def select(self, candidates: Tensor, fitness: Tensor, context: GenerationContext) -> int:
        """Update ``self.elite`` / ``self.elite_fitness`` from the evaluated candidates;
        returns the row of ``candidates`` that is the elite now."""

    def context(self, epoch: int) -> GenerationContext:
        """The next generation's context: the scheduled rate and power (an adaptive strategy
        scales them)."""
        return GenerationContext(epoch, self.generation, self.rate(epoch), self.power(epoch))

    def refine(self, batch: Any, context: GenerationContext) -> bool:
        """After selection (hybrid strategies train the elite); True when it changed the
        elite, which then is no longer one of the candidates."""
        del batch, context
        return False

    def strategy_state(self) -> dict[str, Any] | None:
        """What a strategy adds to :class:`LoopState` (None: nothing)."""
        return None

    def load_strategy_state(self, state: dict[str, Any]) -> None:
        """Take back :meth:`strategy_state` (after the elite was restored)."""
        del state

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> EvolutionResult:
        """All epochs (from where a restored state left off), or until :meth:`request_stop`."""
        for epoch in range(self.start_epoch, self.epochs):
            batches = self.problem.batches(epoch, self.streams.data)
            loop_start = self.clock()
            try:
                for batch in itertools.islice(batches, self.start_batch, None):  # resumed
                    self.step(batch, epoch)
                    if self._stop:
                        return self.result()
            finally:
                self.loop_seconds += self.clock() - loop_start
            self.start_batch = 0
            self.end_epoch(epoch)
        return self.result()

    def request_stop(self) -> None:
        """Leave :meth:`run` after the current step (a hook's way to end the run)."""
        self._stop = True

    @property
    def stop_requested(self) -> bool:
        return self._stop

    def step(self, batch: Any, epoch: int) -> dict[str, Any]:
        """One generation on one batch: propose, evaluate all candidates in one call, select."""
        start, cpu_start = self.clock(), time.process_time()
        if self._started is None:
            self._started = start
        context = self.context(epoch)
        for hook in self.before_step:
            hook(context)
        candidates = self.propose(context)
        for admit in self.before_evaluation:
            candidates = admit(candidates, context)
        eval_start = self.clock()
        fitness = rank_safe(self.problem.evaluate(candidates, batch))
        eval_seconds = self.clock() - eval_start
        if fitness.numel() != candidates.shape[0]:
            raise ValueError(
                f"evaluate must return one fitness per genome ({candidates.shape[0]}), "
                f"got {fitness.numel()}"
            )
        self.selection_eval_seconds = 0.0
        kept = self.select(candidates, fitness, context)
        refined = self.refine(batch, context)
        eval_seconds += self.selection_eval_seconds
        selection = Selection(candidates, fitness, context, refined, kept)
        for hook in self.after_selection:
            hook(selection)
        step_seconds = self.clock() - start
        self.train_cpu_seconds += time.process_time() - cpu_start
        self.evaluations += candidates.shape[0]
        self.train_seconds += step_seconds
        self.eval_seconds += eval_seconds
        record = self._generation_record(context, fitness, eval_seconds, step_seconds)
        self.generation += 1
        self.batch_in_epoch += 1
        for hook in self.after_step:
            hook(record)
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
            "wall_seconds": self._wall_seconds(),
        }
        if self.epoch_report is not None:
            record.update(self.epoch_report(self.elite))
        self.epoch_records.append(record)
        self._epoch_data_state = self.streams.data.get_state()
        self.batch_in_epoch = 0
        for hook in self.after_epoch:
            hook(record)
        self._notify(record)
        return record

    def result(self) -> EvolutionResult:
        """The run so far. ``best`` is the hall of fame's first; before any epoch ended (steps
        driven by hand) it is the elite with its last minibatch fitness."""
        if self.elite is None:
            raise ValueError("no generation has run yet: call step() or run() first")
        if len(self.hall_of_fame):
            best, best_fitness = self.hall_of_fame[0].genome, self.hall_of_fame[0].fitness.values[0]
        else:
            best, best_fitness = self.elite, self.elite_fitness
        return EvolutionResult(
            best=best,
            best_fitness=best_fitness,
            elite=self.elite,
            elite_fitness=self.elite_fitness,
            generations=self.generation,
            evaluations=self.evaluations,
            train_seconds=self.train_seconds,
            eval_seconds=self.eval_seconds,
            wall_seconds=self._wall_seconds(),
            loop_seconds=self.loop_seconds,
            logbook=self.logbook,
            hall_of_fame=self.hall_of_fame,
            epochs=list(self.epoch_records),
        )

    # -- state for checkpoints -----------------------------------------------------------
    def state(self) -> LoopState:
        """Where the loop stands after its last finished generation (live objects: the
        logbook and epoch records are not copied)."""
        streams = [self.streams.init, self.streams.mutation, self.streams.data]
        return LoopState(
            generation=self.generation,
            epoch=self.epoch_records[-1]["epoch"] + 1 if self.epoch_records else 0,
            batch=self.batch_in_epoch,
            streams=[*(stream.get_state() for stream in streams), self._epoch_data_state],
            elite=self.elite,
            elite_fitness=self.elite_fitness,
            evaluations=self.evaluations,
            train_seconds=self.train_seconds,
            eval_seconds=self.eval_seconds,
            train_cpu_seconds=self.train_cpu_seconds,
            loop_seconds=self.loop_seconds,
            hall_of_fame=[(m.genome, m.fitness.values[0]) for m in self.hall_of_fame],
            logbook=self.logbook,
            epoch_records=self.epoch_records,
            strategy=self.strategy_state(),
            wall_seconds=self._wall_seconds(),
        )

    def load_state(self, state: LoopState) -> None:
        """Continue from ``state`` (this strategy freshly built with the same settings):
        :meth:`run` resumes at its epoch, replaying the epoch's data order and skipping the
        batches already done."""
        self.streams.init.set_state(state.streams[0].clone())
        self.streams.mutation.set_state(state.streams[1].clone())
        self._epoch_data_state = state.streams[3].clone()
        self.streams.data.set_state(self._epoch_data_state.clone())
        self.start_epoch = state.epoch
        self.start_batch = self.batch_in_epoch = state.batch
        self.generation = state.generation
        self.elite = None if state.elite is None else state.elite.clone()
        self.elite_fitness = state.elite_fitness
        self.evaluations = state.evaluations
        self.train_seconds = state.train_seconds
        self.eval_seconds = state.eval_seconds
        self.train_cpu_seconds = state.train_cpu_seconds
        self.loop_seconds = state.loop_seconds
        self._wall_before = state.wall_seconds
        for genome, fitness in state.hall_of_fame:
            self.hall_of_fame.insert(Individual(genome.clone(), fitness))
        for entry in state.logbook:
            self.logbook.record(**entry)
        self.epoch_records = list(state.epoch_records)
        if state.strategy is not None:
            self.load_strategy_state(state.strategy)

    # -- records -------------------------------------------------------------------------
    def _wall_seconds(self) -> float:
        """Wall seconds of the run: its earlier processes' (a resumed run) and this one's
        since its first step."""
        now = 0.0 if self._started is None else self.clock() - self._started
        return self._wall_before + now

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
            "wall_seconds": self._wall_seconds(),
            "rate": context.rate,
            "power": context.power,
        }

    def _notify(self, record: dict[str, Any]) -> None:
        for observer in self.observers:
            observer(record)
