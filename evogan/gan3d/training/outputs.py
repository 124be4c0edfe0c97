"""What a finished GAN training writes: the final generator (``last_model.h5``, and
``best_model.h5`` when no validation picked one), every arar rank's generator, the
discriminator, and the figures of ``summary.json``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evogan.config.gan import Gan3dConfig
from evogan.distributed.gradients import average_tensors
from evogan.distributed.mpi import MPI
from evogan.gan3d.model.model_file import DIVERGED, finite_weights, save_generator
from evogan.gan3d.training.epoch_loop import Position
from evogan.gan3d.training.modes import ENSEMBLE, Mode, ParallelGanStep
from evogan.gan3d.training.validation import TrainingValidation
from evogan.store import BEST_MODEL, RunDir, save_weights

LAST_MODEL = "last_model.h5"
DISCRIMINATOR = "discriminator.h5"


@dataclass(frozen=True)
class FinishedRun:
    """The training the outputs belong to: its config, parallel mode, ranks and run directory."""

    config: Gan3dConfig
    mode: Mode
    world: MPI.Comm
    run: RunDir


def save_models(
    finished: FinishedRun,
    parallel: ParallelGanStep,
    validation: TrainingValidation | None,
    meta: dict[str, Any],
) -> None:
    """The final generator as ``last_model.h5`` (also ``best_model.h5`` when no validation
    picked one and its weights are finite; both self-describing, for ``evogan generate`` and
    ``evogan validate``) and the discriminator; in arar mode also every rank's generator,
    usable as ensemble members. With validation on, the saved generator has the standing
    batch-norm statistics it is scored with. ``meta``: what every generator file records.
    Collective."""
    world, run, mode, spec = finished.world, finished.run, finished.mode, finished.config.spec
    if mode.replicas:
        average_tensors(world, parallel.float_buffers())
    step, generator = parallel.step, parallel.scored_generator()
    if not mode.replicas:
        save_generator(run.file(f"{ENSEMBLE}/rank-{world.rank:05d}.h5"), spec, generator, meta)
    last = generator
    if validation is not None:
        last = validation.scored_copy(generator)
    if world.rank == 0:
        save_generator(run.file(LAST_MODEL), spec, last, meta)
        best = validation is None
        if best and finite_weights(last):
            save_generator(run.file(BEST_MODEL), spec, last, meta)
        elif best:
            print(DIVERGED, flush=True)
        d_meta = {**meta, "kind": "gan3d-discriminator"}
        save_weights(run.file(DISCRIMINATOR), step.discriminator.state_dict(), d_meta)
    world.Barrier()


def summary(
    finished: FinishedRun,
    shape: tuple[int, int],
    started: Position,
    position: Position,
    records: list[dict[str, Any]],
) -> dict[str, Any]:
    """The run's ``summary.json`` (rank 0): ``shape`` is (batch per rank, steps per epoch), the
    training went from ``started`` to ``position``, ``records`` are its epoch records."""
    settings = finished.config.trainer
    batch, steps = shape
    wall = sum(r["wall_s"] for r in records)
    samples = sum(r["samples"] for r in records)
    last = records[-1] if records else {}
    return {
        "task": "gan3d",
        "mode": finished.mode.name,
        "rma": settings.rma,
        "group_size": settings.group_size,
        "outer_every": settings.outer_every,
        "ranks": finished.world.size,
        "epochs_done": position.epoch,
        "resumed_from_epoch": started.epoch,
        "resumed_from_step": started.step,
        "steps_per_epoch": steps,
        "batch_per_rank": batch,
        "samples_per_s": samples / wall if wall > 0 else 0.0,
        "comm_share": float(np.mean([r["comm_share"] for r in records])) if records else 0.0,
        "final": {k: v for k, v in last.items() if k.startswith(("d_", "g_"))},
    }
