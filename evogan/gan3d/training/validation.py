"""Validation during GAN training: score the current generator on held-out showers with the
physics score (:mod:`evogan.physics`), log it and keep the best generator.

The reference (features of ``trainer.validation_events`` showers of the test split, disjoint
from the training showers) is built once, on rank 0; every validation generates showers for the
same primaries and angles from the same noise stream, so two scores differ by what the
generator learned, not by the draw. The scored generator is a copy (the training state is not
touched) with standing batch-norm statistics (:mod:`evogan.gan3d.training.standing_stats`) computed
for the reference's primaries from their own noise stream; without them (``standing_batches:
0``) a sync run's copy has the ranks' running statistics averaged, as for the saved model.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from evogan.distributed.gradients import average_tensors
from evogan.distributed.mpi import MPI
from evogan.gan3d.model.model_file import finite_weights, save_generator
from evogan.gan3d.model.networks import Generator
from evogan.gan3d.model.spec import GanSpec
from evogan.gan3d.training.standing_stats import standing_statistics
from evogan.progress import progress
from evogan.seeding import torch_generator
from evogan.store import BEST_MODEL, MetricsWriter, RunDir

GENERATE_BATCH = 128


def generator_buffers(generator: torch.nn.Module) -> list[torch.Tensor]:
    return [b for b in generator.buffers() if b.is_floating_point()]


def averaged_generator(world: MPI.Comm, generator: Generator, replicas: bool) -> Generator | None:
    """Collective: rank 0 gets a copy of its generator, for replicas (sync mode) with the
    batch-norm statistics averaged over ranks; other ranks get None."""
    buffers = generator_buffers(generator)
    if replicas:
        buffers = [b.detach().clone() for b in buffers]
        average_tensors(world, buffers)
    if world.rank != 0:
        return None
    model = copy.deepcopy(generator)
    with torch.no_grad():
        for mine, value in zip(generator_buffers(model), buffers, strict=True):
            mine.copy_(value)
    return model


@dataclass(frozen=True)
class ValidationPlan:
    """What every validation of one training does: the ``spec`` and root ``seed`` of its noise
    streams, the score's energy ``bins``; ``replicas``: the ranks hold the same networks (sync
    mode), so rank 0's generator is scored with the ranks' mean batch-norm statistics;
    ``standing``: (batches, showers per batch) of the standing statistics, ``(0, n)`` for none;
    ``meta``: what every ``best_model.h5`` it saves records besides its score (the training
    conditions)."""

    spec: GanSpec
    seed: int
    bins: int
    replicas: bool
    standing: tuple[int, int]
    meta: dict[str, Any] = field(default_factory=dict)


class TrainingValidation:
    """Scores generators against one fixed reference (``held_out`` showers) as ``plan`` says;
    rank 0 holds the state. ``best``: the best score so far (None: none yet)."""

    def __init__(
        self, plan: ValidationPlan, world: MPI.Comm, held_out: Any, best: float | None = None
    ) -> None:
        from evogan.physics import Reference
        from evogan.physics.score import FLOOR_SPLITS

        spec, seed, bins = plan.spec, plan.seed, plan.bins
        self.spec, self.seed, self.replicas = spec, seed, plan.replicas
        self.standing, self.world, self.meta = plan.standing, world, plan.meta
        self.best = best
        self.reference = self.floor = self.spread = None
        if world.rank == 0:
            chunk = held_out.read()
            self.energy = chunk.energy
            self.theta = chunk.theta if spec.conditioning.angle else None
            self.reference = Reference.from_showers(
                chunk.ecal,
                chunk.energy,
                cell_threshold=held_out.cell_threshold,
                detector=held_out.detector,
                bins=bins,
                seed=seed,
                theta=self.theta,
            )
            with progress("validation: reference floor", FLOOR_SPLITS, unit="splits") as task:
                floor = self.reference.floor(on_split=lambda _score: task.advance(1))
            self.floor, self.spread = floor["score"], floor["spread"]

    def validate(
        self,
        generator: Generator,
        run: RunDir,
        metrics: MetricsWriter | None,
        at: dict[str, Any],
    ) -> dict | None:
        """Collective: score ``generator`` (rank 0's) at ``at`` (epoch, step, wall_seconds);
        write the record and, when it is the best so far, ``best_model.h5``. Returns the record
        on rank 0: the score, the floor and the learning targets (:mod:`evogan.physics.targets`)
        within tolerance."""
        from evogan.physics.targets import compare_targets, target_summary

        model = self.scored_copy(generator)
        if model is None:
            return None
        showers = self._generate(model)
        result = self.reference.score(showers, self.energy, self.theta)
        score = float(result.score)
        rows = compare_targets(result.table, self.reference.table, self.reference.edges)
        best = finite_weights(model) and (self.best is None or score < self.best)
        if best:
            self.best = score
            meta = {
                **self.meta,
                **at,
                "score": score,
                "seed": self.seed,
                "picked": "best validation score",
            }
            save_generator(run.file(BEST_MODEL), self.spec, model, meta)
        record = {"kind": "validation", **at, "score": score, "floor": self.floor, "best": best}
        record["floor_spread"] = self.spread
        record["targets"] = target_summary(rows)
        if metrics is not None:
            metrics.write(record)
        return record

    def scored_copy(self, generator: Generator) -> Generator | None:
        """Collective: on rank 0, a copy of ``generator`` with the batch-norm statistics it is
        scored and saved with; None on other ranks."""
        model = averaged_generator(self.world, generator, self.replicas)
        if model is not None:
            batches, batch_size = self.standing
            rng = torch_generator(self.seed, "gan3d", "standing", device=_device(model))
            standing_statistics(self.spec, model, self.energy, self.theta, batches, batch_size, rng)
        return model

    def _generate(self, model: Generator) -> np.ndarray:
        from evogan.gan3d.model.generate import generate_showers

        spec, n = self.spec, len(self.energy)
        rng = torch_generator(self.seed, "gan3d", "validation", device=_device(model))
        parts = []
        with progress("validation: generate", total=n, unit="showers") as task:
            for lo in range(0, n, GENERATE_BATCH):
                hi = min(lo + GENERATE_BATCH, n)
                theta = None if self.theta is None else self.theta[lo:hi]
                parts.append(generate_showers(spec, model, self.energy[lo:hi], theta, rng))
                task.advance(hi - lo)
        return np.concatenate(parts)


def _device(model: torch.nn.Module) -> str:
    return str(next(model.parameters()).device)
