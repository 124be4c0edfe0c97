"""One rank's part in an island run: communicators, migration, stop agreement, checkpoints.

:class:`IslandSession` splits the world once (world -> islands -> the leaders of all islands),
builds the island leader's :class:`~evogan.islands.migration.Migration` and
:class:`~evogan.distributed.signals.StopAgreement`, attaches them to a strategy, picks the
checkpoint to resume from, and at the end drains migration and gathers every island's result
on world rank 0. Any problem (rank count, missing checkpoint) is raised on every rank before
the collective that would otherwise wait for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mpi4py import MPI
from torch import Tensor

from evogan.config.islands import CheckpointConfig, IslandsConfig, MigrationConfig
from evogan.distributed.comm import Layout, split_layout
from evogan.distributed.signals import StopAgreement, StopFlag
from evogan.distributed.tags import Tag
from evogan.errors import EvoganError
from evogan.islands.state import GrowingParts, island_state, restore_island
from evogan.islands.island import IslandModel, IslandSettings
from evogan.islands.migration import Migration, make_topology
from evogan.engine.problem import (
    DifferentiableProblem,
    GenerationContext,
    MutationStep,
    Problem,
)
from evogan.engine.seeding import numpy_generator
from evogan.store import checkpoint as ckpt


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
        bounds = np.linspace(0, genomes.shape[0], self.comm.size + 1).round().astype(int)
        low, high = bounds[self.comm.rank], bounds[self.comm.rank + 1]
        mine = self.inner.evaluate(genomes[low:high], batch) if high > low else torch.empty(0)
        parts = self.comm.allgather(mine.detach().to("cpu", torch.float64).numpy())
        return torch.from_numpy(np.concatenate(parts))

    def loss(self, genome: Tensor, batch: Any) -> Tensor:
        return self.inner.loss(genome, batch)

    def batches(self, epoch: int, generator: torch.Generator) -> Any:
        return self.inner.batches(epoch, generator)

    def reference_fitness(self, genomes: Tensor) -> Tensor | None:
        return self.inner.reference_fitness(genomes)


class IslandSession:
    """Communicators and island machinery of this rank; collective to create and to close."""

    def __init__(
        self,
        world: MPI.Comm,
        seed: int,
        islands: IslandsConfig,
        migration: MigrationConfig,
        checkpoint: CheckpointConfig,
    ) -> None:
        make_topology(migration.topology, migration.k, migration.matrix)  # config errors first
        self.world = world
        self.seed = seed
        self.migration_cfg = migration
        self.checkpoint_cfg = checkpoint
        self.layout: Layout = split_layout(world, islands.ranks_per_island)
        self.island_index = self.layout.island_index
        self.island_count = self.layout.islands
        self.is_leader = self.layout.island.rank == 0
        self.leaders = world.Split(0 if self.is_leader else MPI.UNDEFINED, key=world.rank)
        if migration.topology == "matrix" and len(migration.matrix) != self.island_count:
            size = len(migration.matrix)
            raise EvoganError(
                f"migration.matrix must be {self.island_count} x {self.island_count} for "
                f"{self.island_count} islands, got {size} x {size}; give one row per island"
            )
        self.flag = StopFlag()
        self.agreement: StopAgreement | None = None
        self.migration: Migration | None = None
        if self.is_leader:
            self.agreement = StopAgreement(self.leaders, self.flag, migration.mode)
            if self.island_count > 1:
                shared = (
                    ("migration",) if migration.mode == "sync" else ("migration", self.island_index)
                )
                self.migration = Migration(
                    self.leaders,
                    make_topology(migration.topology, migration.k, migration.matrix),
                    migration.mode,
                    numpy_generator(seed, *shared),
                    int(Tag.MIGRANTS),
                )

    @property
    def group(self) -> Any:
        """The island's communicator when it has more than one rank."""
        return self.layout.island if self.layout.island.size > 1 else None

    def problem(self, problem: Problem) -> Problem:
        """``problem`` with evaluation shared by the island's ranks (unchanged for one rank)."""
        return problem if self.group is None else SharedEvaluation(problem, self.group)

    def attach(self, strategy: IslandModel, run_path: Path | None) -> None:
        """Wire ``strategy`` into this session; checkpoints go under ``run_path`` (leader)."""
        settings = IslandSettings(
            index=self.island_index,
            count=self.island_count,
            interval=self.migration_cfg.interval,
            k=self.migration_cfg.k,
            policy=self.migration_cfg.policy,
            send=self.migration_cfg.send,
            checkpoint_every=self.checkpoint_cfg.every,
        )
        writer = None
        if self.is_leader and run_path is not None:
            writer = self._checkpoint_writer(run_path)
        strategy.setup_island(
            settings,
            migration=self.migration,
            group=self.group,
            agreement=self.agreement,
            checkpoint=writer,
        )

    def _checkpoint_writer(self, run_path: Path) -> Callable[[IslandModel], None]:
        keep = self.checkpoint_cfg.keep
        island = self.island_index
        growing = GrowingParts()

        def write(strategy: IslandModel) -> None:
            arrays, meta, parts = island_state(strategy, growing)
            path = ckpt.checkpoint_path(run_path, island, strategy.generation)
            ckpt.write_checkpoint(path, arrays, meta, parts)
            ckpt.prune(run_path, island, keep)

        return write

    def resume_generation(self, run_path: Path) -> int:
        """The checkpoint generation this island resumes from (same on all ranks of it)."""
        choice: Any = None
        if self.is_leader:
            available = self.leaders.allgather(ckpt.generations(run_path, self.island_index))
            if self.migration_cfg.mode == "sync":
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

    def restore(self, strategy: IslandModel, run_path: Path, generation: int) -> None:
        path = ckpt.checkpoint_path(run_path, self.island_index, generation)
        arrays, meta = ckpt.read_checkpoint(path)
        restore_island(strategy, arrays, meta)

    def finish(self, strategy: IslandModel, stopped: bool) -> tuple[bool, dict[str, int]]:
        """Agree the end with all islands, drain migration; returns (stopped by anyone,
        this island's migration counts)."""
        counts: dict[str, int] = {}
        if self.agreement is not None:
            stopped = self.agreement.finish() or stopped
            self.agreement.close()
        if self.migration is not None:
            counts = self.migration.close().as_dict()
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
