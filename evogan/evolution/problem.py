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


MutationStep = tuple[torch.Generator, int, int, GenerationContext]
"""``(generator, children drawn, the child kept, context)``: one step of a lineage replay."""


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
        generator: torch.Generator,
        context: GenerationContext,
        only: int | None = None,
    ) -> Tensor:
        """``count`` children of ``parent`` (size,), shape (count, size); with ``only``, just
        that child of the same draw, shape (1, size) (lineage replays rebuild one child)."""

    def replay(self, genome: Tensor, steps: Sequence[MutationStep]) -> Tensor:
        """``genome`` after each ``(generator, count, only, context)`` step in turn, keeping
        child ``only`` (a lineage rebuild); problems may do a run of steps in one go."""
        for generator, count, only, context in steps:
            genome = self.mutate(genome, count, generator, context, only)[0]
        return genome

    @abstractmethod
    def evaluate(self, genomes: Tensor, batch: Any) -> Tensor:
        """Fitness (P,) of genomes (P, size) on one batch of data (lower is better)."""

    def batches(self, epoch: int, generator: torch.Generator) -> Iterable[Any]:
        """The data batches of one epoch; one generation runs per batch.

        The default suits problems without data: one generation per epoch.
        """
        del epoch, generator
        return [None]

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
