"""What the engine evolves: a :class:`Problem` is the only thing that knows what a genome means."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class GenerationContext:
    """Where the run stands when a generation is made (operators read rate and power here)."""

    epoch: int
    generation: int
    rate: float
    power: float


MutationStep = tuple[int, int, int, float, float]
"""``(seed, children drawn, the child kept, rate, power)``: one step of a lineage replay."""


class Problem(ABC):
    """Initial genomes, mutation and batched evaluation; genomes are rows of one float tensor.

    Fitness is minimised. ``evaluate`` scores a whole batch of genomes in one call so a problem
    can vectorise over them.
    """

    @abstractmethod
    def initial_genomes(self, count: int, generator: torch.Generator) -> Tensor:
        """``count`` random genomes, shape (count, size)."""

    @abstractmethod
    def mutate(
        self,
        parent: Tensor,
        count: int,
        seed: int,
        context: GenerationContext,
        only: int | None = None,
    ) -> Tensor:
        """``count`` children of ``parent`` (size,), shape (count, size), all random numbers
        derived from the 64-bit ``seed``; with ``only``, just that child of the same draw,
        shape (1, size) (lineage replays rebuild one child)."""

    def replay(
        self, genome: Tensor, steps: Sequence[MutationStep], keep: Sequence[int] = ()
    ) -> list[Tensor]:
        """``genome`` after each ``(seed, count, only, rate, power)`` step in turn, keeping
        child ``only`` (a lineage rebuild): the genomes after the step counts in ``keep``
        (ascending), then the final one. Problems may do the whole run of steps in one go."""
        kept = []
        for done, (seed, count, only, rate, power) in enumerate(steps, start=1):
            context = GenerationContext(0, 0, rate, power)
            genome = self.mutate(genome, count, seed, context, only)[0]
            if done in keep:
                kept.append(genome)
        return [*kept, genome]

    @abstractmethod
    def evaluate(self, genomes: Tensor, batch: Any) -> Tensor:
        """Fitness (P,) of genomes (P, size) on one batch of data (lower is better)."""

    def batches(self, epoch: int, generator: torch.Generator) -> Iterable[Any]:
        """The data batches of one epoch; one generation runs per batch.

        The default suits problems without data: one generation per epoch.
        """
        del epoch, generator
        return [None]

    def sample(self, events: int, generator: torch.Generator) -> Any:
        """A random batch of ``events`` examples for re-evaluating an elite and a challenger
        (noise-aware acceptance). ``None`` (the default): the problem has no data to draw."""
        del events, generator
        return None

    def example_losses(self, genomes: Tensor, batch: Any, start: int, stop: int) -> Tensor | None:
        """Losses (P, stop - start) of genomes (P, size) on examples [start, stop) of ``batch``,
        whose mean over all examples is :meth:`evaluate`'s fitness: re-evaluation can then
        stop early once a difference is clear. ``None`` (the default): only the mean is known."""
        del genomes, batch, start, stop
        return None

    def reference_fitness(self, genomes: Tensor) -> Tensor | None:
        """Fitness on a fixed reference set, comparable across epochs (for the hall of fame).

        ``None`` (the default) means minibatch fitness is the only measure.
        """
        del genomes
        return None


class DifferentiableProblem(Problem):
    """A problem whose fitness has a gradient: hybrid strategies take optimiser steps on it."""

    @abstractmethod
    def loss(self, genome: Tensor, batch: Any) -> Tensor:
        """Differentiable scalar loss of one genome (size,) on ``batch``."""
