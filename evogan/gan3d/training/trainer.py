"""Data-parallel 3DGAN training over MPI: ``mpirun -n N evogan train configs/gan3d.yaml``.

:class:`GanTrainer` is one training on the ranks of a communicator: :meth:`GanTrainer.open`
starts a new run directory, :meth:`GanTrainer.resume` continues one from its last committed
checkpoint, :meth:`~GanTrainer.train` trains epochs (again and again, in process: the
architecture search trains a candidate epoch by epoch within its budget), and
:meth:`~GanTrainer.save` writes the final models and ``summary.json``. :func:`train_gan3d` is the
whole run in one call, as ``evogan train`` makes it.

Every rank trains on its own contiguous shard of the training events; ``trainer.mode`` picks
how ranks combine their work (:mod:`evogan.gan3d.training.modes`). Random streams come from the root
seed: in sync mode all ranks share one step stream and each uses its block of every global draw
(``GanStep.shard``), so R ranks with batch b draw exactly what one process with batch R*b draws;
in arar mode every rank has its own stream and its own discriminator initialisation. Ranks meet
once per epoch (metrics, checkpoint); in sync mode they also agree on stopping after every step
(:mod:`evogan.gan3d.training.cadence`), in arar mode without waiting.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evogan.config.base import dump
from evogan.config.gan import Gan3dConfig
from evogan.distributed.comm import Layout, split_layout
from evogan.distributed.failure import rank0_decides
from evogan.distributed.mpi import MPI
from evogan.distributed.signals import StopFlag, catch_stop_signals
from evogan.errors import RunStopped
from evogan.gan3d.model.conditions import KEY, trained_ranges
from evogan.gan3d.model.model_file import finite_weights
from evogan.gan3d.model.spec import check_window
from evogan.gan3d.training import checkpoint as ckpt
from evogan.gan3d.training.cadence import Cadence
from evogan.gan3d.training.epoch_loop import (
    LEARNING_CURVE,
    EpochLoop,
    EpochPlan,
    LoopParts,
    Position,
    StepInfo,
    chunk_source,
    draw_learning_curve,
)
from evogan.gan3d.training.estimate import LONG_EPOCH_S, EpochEstimate
from evogan.gan3d.training.modes import Mode, ParallelGanStep, mode_for
from evogan.gan3d.training.outputs import FinishedRun, save_models, summary
from evogan.gan3d.training.resume import open_run, resume_command
from evogan.gan3d.training.setup import batch_shape, load_data, manifest, rank_setup, share_cores
from evogan.gan3d.training.validation import TrainingValidation, ValidationPlan
from evogan.gan3d.training.weight_average import WeightAverage
from evogan.logs import hint
from evogan.store import BEST_MODEL, CONFIG, RunDir
from evogan.store import mlflow_runs as tracking

MANIFEST = "manifest.json"

__all__ = ["GanTrainer", "Opening", "train_gan3d"]


@dataclass(frozen=True)
class Opening:
    """Which run directory a training opens: a new one (``run_dir``, or one made under
    ``run.root``), or with ``resume`` the one ``run_dir`` holds, continued from its last
    committed checkpoint; ``until``: the epoch a resumed run must not have reached yet (None:
    any); ``announce``: say what data it reads and, on a CPU, how long an epoch of more than
    ``long_epoch_s`` seconds will take (a search says the data once for all its short
    trainings)."""

    run_dir: Path | None = None
    resume: bool = False
    until: int | None = None
    announce: bool = True
    long_epoch_s: float = LONG_EPOCH_S


class GanTrainer:
    """One data-parallel 3DGAN training on the ranks of ``world``; every method is collective.

    Made by :meth:`open` or :meth:`resume`; use it as a context manager (or call
    :meth:`close`) so its communicators are freed. ``stop`` is the flag a signal handler sets
    (:func:`evogan.distributed.signals.catch_stop_signals`); ``on_step`` runs on every rank
    after every step.
    """

    def __init__(
        self,
        config: Gan3dConfig,
        opening: Opening,
        world: MPI.Comm,
        stop: StopFlag,
        on_step: Callable[[StepInfo], None] | None = None,
    ) -> None:
        settings = config.trainer
        self.config, self.world, self.on_step = config, world, on_step
        self.mode: Mode = mode_for(settings)
        self.setup = rank_setup(settings, world)  # refused before a run directory exists
        shard, held_out = load_data(config.data, settings, world, quiet=not opening.announce)
        check_window(config.spec, held_out.shape, held_out.files)  # the same on every rank
        self.trained_on = trained_ranges(*shard.conditions(), world)
        self.shape = batch_shape(settings, config.spec.batch_size, world, shard, held_out)
        self.run, marker = open_run(config, world, opening.run_dir, opening.resume, opening.until)
        self.tracked = self._track()
        self.finished = FinishedRun(config, self.mode, world, self.run)
        self.layout: Layout = split_layout(world, None, self.mode.group_size)
        if self.setup.device == "cpu":
            share_cores(world)
        self.parallel: ParallelGanStep = self.mode.build(
            config.spec, self.layout, config.seed, self.setup
        )
        if settings.generator_average:
            self.parallel.average = WeightAverage(
                self.parallel.step.generator, settings.generator_average
            )
        self.position, serial, best = self._start(marker)
        self.started = Position(self.position.epoch, self.position.step)
        validation = self._validation(held_out, best) if settings.validates else None
        every = (config.checkpoint.every_seconds, settings.validate_every_seconds)
        self.cadence = Cadence(world, stop, self.mode.replicas, *every)
        plan = EpochPlan(settings, config.seed, config.checkpoint.every_epochs, *self.shape)
        chunks = chunk_source(shard, config.data.chunk_events)
        self.estimate = self._estimate(opening)
        parts = LoopParts(
            self.mode,
            self.layout,
            self.parallel,
            self.run,
            chunks,
            self.cadence,
            validation,
            None if self.estimate is None else self.estimate.first_step,
        )
        self.loop = EpochLoop(plan, parts, serial)
        self.validation = validation
        self._cadence_open = self._layout_open = True

    @classmethod
    def open(
        cls,
        config: Gan3dConfig,
        run_dir: Path | None = None,
        *,
        world: MPI.Comm | None = None,
        stop: StopFlag | None = None,
        on_step: Callable[[StepInfo], None] | None = None,
        announce: bool = True,
    ) -> GanTrainer:
        """A new training of ``config`` in a new run directory (``run_dir``, or one made under
        ``run.root``; an existing non-empty one is refused)."""
        world = MPI.COMM_WORLD if world is None else world
        opening = Opening(run_dir, announce=announce)
        return cls(config, opening, world, stop or StopFlag(), on_step)

    @classmethod
    def resume(
        cls,
        run_dir: Path,
        config: Gan3dConfig | None = None,
        *,
        world: MPI.Comm | None = None,
        stop: StopFlag | None = None,
        on_step: Callable[[StepInfo], None] | None = None,
        announce: bool = True,
    ) -> GanTrainer:
        """The training ``run_dir`` holds, continued from its last committed checkpoint with
        ``config`` (default: the run's own ``config.yaml``; with a config given, a run that
        already reached its ``trainer.epochs`` is refused); a config that would not continue
        the same computation (spec, data, seed, mode, batch, rank count) is refused."""
        from evogan.config.base import validate
        from evogan.config.resume import stored_config

        world = MPI.COMM_WORLD if world is None else world
        until = None if config is None else config.trainer.epochs
        if config is None:
            path = Path(run_dir) / CONFIG
            config = validate(Gan3dConfig, stored_config(Path(run_dir)), source=str(path))
        opening = Opening(run_dir, True, until, announce)
        return cls(config, opening, world, stop or StopFlag(), on_step)

    def _track(self) -> tracking.TrackedRun | None:
        """The training's MLflow run (``run.mlflow``), opened by rank 0 and held there only,
        before the first metrics record."""
        config, world = self.config, self.world

        def start() -> tracking.TrackedRun | None:
            params = config.model_dump(mode="json")
            return tracking.start(self.run.path, config.run.mlflow, "evogan-gan3d", params)

        tracked = rank0_decides(start, world)
        return tracked if world.rank == 0 else None

    def _end_tracking(self, exc: BaseException | None, artifacts: list[Path]) -> None:
        if self.tracked is not None:
            tracked, self.tracked = self.tracked, None
            tracked.end(tracking.status_of(exc), artifacts)

    def _start(self, marker: dict[str, Any] | None) -> tuple[Position, int, float | None]:
        """Restore this rank from ``marker``'s checkpoint (or write a new run's manifest) and
        the config; returns the position, the next checkpoint serial and the best score."""
        world, run = self.world, self.run
        layouts = world.gather(self.layout.describe(), root=0)
        position, serial, best = Position(), 1, None
        if marker is not None:
            files = marker["files"]
            own = files[0] if len(files) == 1 else files[world.rank]
            state = ckpt.load_rank(run, own, self.parallel.rank_state(), world.rank)
            position = Position(state["epoch"], state["step"], state["sums"], state["elapsed"])
            serial, best = marker["serial"] + 1, marker.get("best")
        elif world.rank == 0:
            settings = self.config.trainer
            record = manifest(self.config.seed, settings, self.layout, layouts, self.setup)
            run.write_json(MANIFEST, record)
        if world.rank == 0:
            run.write_config(dump(self.config))
            if marker is not None:
                step = position.epoch * self.shape[1] + position.step
                with run.metrics_writer() as metrics:
                    metrics.write(
                        {
                            "kind": "resume",
                            "epoch": position.epoch,
                            "step": step,
                            "ranks": world.size,
                        }
                    )
        return position, serial, best

    @property
    def records(self) -> list[dict[str, Any]]:
        """The epoch records of this process's :meth:`train` calls (complete on rank 0)."""
        return self.loop.records

    def train(self, epochs: int | None = None) -> list[dict[str, Any]]:
        """Train ``epochs`` more epochs (default: up to ``trainer.epochs``); returns the epoch
        records so far (rank 0). On an agreed stop the trainer checkpoints where it stopped,
        closes and raises :class:`RunStopped` with the command that resumes it."""
        for text in self.setup.hints:  # training starts: nothing can refuse it now
            hint(text)
        if self.estimate is not None:
            self.estimate.at_start()
        target = self.config.trainer.epochs if epochs is None else self.position.epoch + epochs
        outcome = self.loop.run_epochs(self.position, target, self.on_step)
        if outcome.stopped:
            self.world.gather(self.parallel.close(), root=0)
            self.close()
            where = f"epoch {outcome.position.epoch + 1} step {outcome.position.step}"
            if self.world.rank == 0:
                signal, path = self.cadence.signal_name, self.run.path
                print(f"stopped by {signal} at {where}; checkpoint in {path}")
            raise RunStopped(resume_command(self.run, self.world))
        return self.records

    def losses_finite(self) -> bool:
        """Whether the last epoch's mean losses and the generator's weights are finite (decided
        by rank 0, on every rank): a diverged training's generator is saved as no best model."""
        finite = True
        if self.world.rank == 0 and self.records:
            losses = [v for k, v in self.records[-1].items() if k.endswith("_loss")]
            finite = all(v is not None and math.isfinite(v) for v in losses)
            finite = finite and finite_weights(self.parallel.step.generator)
        return self.world.bcast(finite, root=0)

    def member_files(self) -> list[Path]:
        """The generator file of every ensemble member this training yields (after save)."""
        return self.mode.member_files(self.run.path, self.world.size)

    def save(self, learning_curve: bool = True) -> RunDir:
        """Finish the training: complete in-flight communication, write the final models and
        (rank 0) ``summary.json`` and, unless ``learning_curve`` is False, the learning curve
        (a figure costs more than a search candidate's short training). Nothing is trained
        afterwards."""
        world = self.world
        stats = world.gather(self.parallel.close(), root=0)
        self._close_cadence()
        meta = {
            "epochs": self.position.epoch,
            "mode": self.mode.name,
            "world_size": world.size,
            "seed": self.config.seed,
            "rank": world.rank,
            KEY: self.trained_on,
        }
        save_models(self.finished, self.parallel, self.validation, meta)
        if world.rank == 0:
            if self.position.epoch != self.config.trainer.epochs:  # trained on by train(epochs)
                settings = self.config.trainer.model_copy(update={"epochs": self.position.epoch})
                self.run.write_config(dump(self.config.model_copy(update={"trainer": settings})))
            result = summary(self.finished, self.shape, self.started, self.position, self.records)
            result["exchange"] = stats
            if self.validation is not None:
                result["best_score"] = self.validation.best
            self.run.write_summary(result)
            if learning_curve:
                draw_learning_curve(self.run)
            self._end_tracking(None, [self.run.file(BEST_MODEL), self.run.file(LEARNING_CURVE)])
            epochs = self.position.epoch
            print(f"trained {epochs} epoch(s) on {world.size} rank(s); run in {self.run.path}")
        return self.run

    def close(self) -> None:
        """Free the training's communicators and torch.distributed group (collective; once)."""
        self.parallel.release()
        self._close_cadence()
        if self._layout_open:
            self._layout_open = False
            self.layout.free()

    def _close_cadence(self) -> None:
        if self._cadence_open:
            self._cadence_open = False
            self.cadence.close()

    def __enter__(self) -> GanTrainer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, *_trace: object
    ) -> None:
        if kind is None:  # after a failure the other ranks may not reach a collective call
            self.close()
        else:
            self.parallel.release()  # local
            self._end_tracking(exc, [])

    def _estimate(self, opening: Opening) -> EpochEstimate | None:
        """What this training says of a long epoch on a CPU (:mod:`.estimate`); None on GPUs
        and where ``opening`` announces nothing."""
        if not opening.announce or self.setup.device != "cpu":
            return None
        config, (batch, steps) = self.config, self.shape
        forward, ranks, detector = self.setup.forward, self.world.size, config.data.detector
        return EpochEstimate(
            config.spec, forward, batch, steps, ranks, detector, opening.long_epoch_s
        )

    def _validation(self, held_out: Any, best: float | None) -> TrainingValidation:
        config = self.config
        settings, spec = config.trainer, config.spec
        standing = (settings.standing_batches, settings.rank_batch(spec.batch_size))
        plan = ValidationPlan(
            spec,
            config.seed,
            settings.validation_bins,
            self.mode.replicas,
            standing,
            {KEY: self.trained_on},
        )
        return TrainingValidation(plan, self.world, held_out, best)


def train_gan3d(
    config: Gan3dConfig,
    run_dir: Path | None = None,
    *,
    resume: bool = False,
    world: MPI.Comm | None = None,
    on_step: Callable[[StepInfo], None] | None = None,
    signals: bool = True,
    learning_curve: bool = True,
) -> RunDir:
    """Train ``config`` on every rank of ``world``; returns the run directory (all ranks).

    ``resume`` continues ``run_dir`` from its last committed checkpoint (same rank count,
    spec, data, seed, mode and batch) up to ``trainer.epochs``; otherwise a new run is made.
    With ``signals``, SIGTERM/SIGINT on any rank stops every rank after a checkpoint and
    raises :class:`RunStopped` (callers with their own stop handling pass False). Without
    ``learning_curve`` no ``learning_curve.png`` is drawn at the end (about a second on a CPU,
    more than a short training; ``evogan compare RUN`` draws it later).
    """
    world = MPI.COMM_WORLD if world is None else world
    flag = StopFlag()
    catching = catch_stop_signals(flag) if signals else contextlib.nullcontext()
    until = config.trainer.epochs
    opening = Opening(run_dir, resume, until)
    with catching, GanTrainer(config, opening, world, flag, on_step) as trainer:
        trainer.train()
        return trainer.save(learning_curve)
