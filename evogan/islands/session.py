"""The island runtime: one rank's part in an island run, for every island model (the
regressor GA, the architecture search's GA).

:class:`IslandSession` splits the world once (world -> islands -> the leaders of all islands),
builds the island leader's :class:`~evogan.distributed.signals.StopAgreement` and, on request,
its :class:`~evogan.islands.migration.Migration`, picks the checkpoint generation to resume
from, and at the end agrees the stop, drains migration and gathers every island's report on
world rank 0. Any problem (rank count, missing checkpoint) is raised on every rank before the
collective that would otherwise wait for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from evogan.distributed.comm import Layout, split_layout
from evogan.distributed.mpi import MPI
from evogan.distributed.signals import StopAgreement, StopFlag
from evogan.engine.problem import (
    DifferentiableProblem,
    GenerationContext,
    MutationStep,
    Problem,
)
from evogan.errors import EvoganError
from evogan.islands.migration import Migration, Topology
from evogan.store import checkpoint as ckpt

Mode = Literal["async", "sync"]


class SharedEvaluation(DifferentiableProblem):
    """``problem`` whose batched evaluation is split over the ranks of an island: each rank
    scores a contiguous slice of the candidates and all ranks receive all fitness values."""

    def __init__(self, problem: Problem, comm: Any) -> None:
        self.inner = problem
        self.comm = comm

    def initial_genomes(self, count: int, generator: torch.Generator) -> Tensor:
        return self.inner.initial_genomes(count, generator)

    def mutate(
        self,
        parent: Tensor,
        count: int,
        seed: int,
        context: GenerationContext,
        only: int | None = None,
    ) -> Tensor:
        return self.inner.mutate(parent, count, seed, context, only)

    def replay(
        self, genome: Tensor, steps: Sequence[MutationStep], keep: Sequence[int] = ()
    ) -> list[Tensor]:
        return self.inner.replay(genome, steps, keep)

    def evaluate(self, genomes: Tensor, batch: Any) -> Tensor:
        low, high = self._slice(genomes.shape[0])
        mine = self.inner.evaluate(genomes[low:high], batch) if high > low else torch.empty(0)
        parts = self.comm.allgather(mine.detach().to("cpu", torch.float64).numpy())
        return torch.from_numpy(np.concatenate(parts))

    def example_losses(self, genomes: Tensor, batch: Any, start: int, stop: int) -> Tensor | None:
        low, high = self._slice(genomes.shape[0])
        mine = self.inner.example_losses(genomes[low:high], batch, start, stop)
        if mine is None:  # the same problem on every rank: all return here
            return None
        parts = self.comm.allgather(mine.detach().cpu().numpy())
        return torch.from_numpy(np.concatenate(parts))

    def _slice(self, count: int) -> tuple[int, int]:
        """This rank's contiguous share [low, high) of ``count`` candidates."""
        bounds = np.linspace(0, count, self.comm.size + 1).round().astype(int)
        return int(bounds[self.comm.rank]), int(bounds[self.comm.rank + 1])

    def loss(self, genome: Tensor, batch: Any) -> Tensor:
        return self.inner.loss(genome, batch)

    def batches(self, epoch: int, generator: torch.Generator) -> Any:
        return self.inner.batches(epoch, generator)

    def sample(self, events: int, generator: torch.Generator) -> Any:
        return self.inner.sample(events, generator)

    def reference_fitness(self, genomes: Tensor) -> Tensor | None:
        return self.inner.reference_fitness(genomes)


class IslandSession:
    """Communicators and island machinery of this rank; collective to create and to close.

    ``agreement`` is the stop agreement's mode (``sync``: every island stops at the same
    generation); ``flag`` the stop flag the signal handlers set (a new one by default).
    """

    def __init__(
        self,
        world: MPI.Comm,
        ranks_per_island: int,
        *,
        agreement: Mode = "async",
        flag: StopFlag | None = None,
    ) -> None:
        self.world = world
        self.layout: Layout = split_layout(world, ranks_per_island)
        self.island_index = self.layout.island_index
        self.island_count = self.layout.islands
        self.is_leader = self.layout.island.rank == 0
        self.leaders = world.Split(0 if self.is_leader else MPI.UNDEFINED, key=world.rank)
        self.flag = flag or StopFlag()
        self.agreement: StopAgreement | None = None
        self.migration: Migration | None = None
        if self.is_leader:
            self.agreement = StopAgreement(self.leaders, self.flag, agreement)

    @property
    def island(self) -> MPI.Comm:
        """The communicator of this island's ranks."""
        return self.layout.island

    @property
    def group(self) -> Any:
        """The island's communicator when it has more than one rank."""
        return self.layout.island if self.layout.island.size > 1 else None

    def problem(self, problem: Problem) -> Problem:
        """``problem`` with evaluation shared by the island's ranks (unchanged for one rank)."""
        return problem if self.group is None else SharedEvaluation(problem, self.group)

    def start_migration(
        self,
        topology: Topology,
        mode: Mode,
        rng: np.random.Generator,
        tag: int,
        encode: Callable[[list[Any], int], Any] | None = None,
        decode: Callable[[Any, int], list[Any]] | None = None,
    ) -> Migration | None:
        """The leader's migration (collective over the leaders); None on other ranks and
        when there is one island. :meth:`finish` closes it."""
        if self.is_leader and self.island_count > 1:
            self.migration = Migration(self.leaders, topology, mode, rng, tag, encode, decode)
        return self.migration

    def resume_generation(self, run_path: Path, common: bool) -> int:
        """The checkpoint generation this island resumes from (same on all ranks of it):
        with ``common`` the newest one every island has (sync runs), else its own newest."""
        choice: Any = None
        if self.is_leader:
            available = self.leaders.allgather(ckpt.generations(run_path, self.island_index))
            if common:
                choice = ckpt.common_generation(available)
            else:
                choice = available[self.island_index][-1] if available[self.island_index] else None
        if self.group is not None:
            choice = self.group.bcast(choice, root=0)
        if choice is None:
            raise EvoganError(
                f"{run_path} has no complete checkpoint for island {self.island_index} "
                f"(under {ckpt.CHECKPOINTS}/); start a new run instead of --resume"
            )
        return int(choice)

    def finish(
        self, stopped: bool, drain: Callable[[list[Any]], None] | None = None
    ) -> tuple[bool, dict[str, int]]:
        """Agree the end with all islands (every rank calls it: the leaders agree, then tell
        their island's ranks); ``drain`` takes the migrants that arrived meanwhile, the rest
        counts as late. Returns (stopped by anyone, this island's migration counts)."""
        counts: dict[str, int] = {}
        if self.agreement is not None:
            stopped = self.agreement.finish() or stopped
        if self.migration is not None:
            if drain is not None:
                drain(self.migration.receive())
            counts = self.migration.close().as_dict()
            self.migration = None
        if self.agreement is not None:
            self.agreement.close()
            self.agreement = None
        if self.group is not None:
            stopped = self.group.bcast(stopped, root=0)
        return stopped, counts

    def gather(self, report: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Every island leader's ``report`` on world rank 0 (None elsewhere)."""
        if not self.is_leader:
            return None
        reports = self.leaders.gather(report, root=0)
        return reports if self.world.rank == 0 else None

    def close(self) -> None:
        if self.leaders != MPI.COMM_NULL:
            self.leaders.Free()
        self.layout.free()
