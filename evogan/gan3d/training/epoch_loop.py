"""The epoch loop of data-parallel 3DGAN training: batches, steps, metrics, checkpoints, stops.

Ranks meet at every epoch end: rank 0 gathers every rank's figures into one JSONL record (mean
losses, samples/s of the whole job, share of step time spent exchanging gradients). Checkpoints
are committed every ``checkpoint.every_epochs`` epochs, mid-epoch once
``checkpoint.every_seconds`` have passed, and when the ranks agreed to stop
(:mod:`evogan.gan3d.training.cadence`). A checkpoint holds the position (epoch, step) and the
partial sums of the epoch, so a resumed run replays the epoch's batch order, skips the steps it
already took and continues exactly where it stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from evogan.config.trainer import TrainerConfig
from evogan.distributed.comm import Layout
from evogan.distributed.mpi import MPI
from evogan.gan3d.training import checkpoint as ckpt
from evogan.gan3d.training.cadence import CHECKPOINT, VALIDATE, Cadence
from evogan.gan3d.training.lr_decay import lr_factor
from evogan.gan3d.training.modes import Mode, ParallelGanStep
from evogan.gan3d.training.validation import TrainingValidation
from evogan.progress import progress
from evogan.seeding import numpy_generator
from evogan.store import MetricsWriter, RunDir

LEARNING_CURVE = "learning_curve.png"
# Validations closer together than this redraw the learning curve only once (the figure takes
# about 0.5 s on rank 0 while the other ranks wait); the end of a training, and a stop with
# validations the figure lacks, always draw it.
CURVE_REDRAW_SECONDS = 60.0

# A rank's shard is read once and kept in memory when it is at most this large.
CACHE_BYTES = 2 << 30


@dataclass(frozen=True)
class StepInfo:
    """Where a step is, passed to the optional ``on_step`` hook."""

    rank: int
    epoch: int
    step: int


@dataclass
class Position:
    """Where one rank is: ``step`` steps into epoch ``epoch`` (0-based), the epoch's partial
    sums (losses, seconds), and the run's wall seconds so far (across resumes)."""

    epoch: int = 0
    step: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    elapsed: float = 0.0

    def own(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "step": self.step, "sums": self.sums, "elapsed": self.elapsed}


def iter_batches(
    chunks: Callable[[], Iterator[Any]], batch: int, steps: int, rng: np.random.Generator | None
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``steps`` batches of ``batch`` showers from a stream of chunks, shuffled within chunks
    when ``rng`` is given; a chunk's remainder is carried into the next chunk."""
    ecal = energy = theta = None
    made = 0
    for chunk in chunks():
        parts = (chunk.ecal, chunk.energy, chunk.theta)
        if ecal is not None and len(ecal):
            parts = tuple(
                np.concatenate([a, b]) for a, b in zip((ecal, energy, theta), parts, strict=True)
            )
        ecal, energy, theta = parts
        if rng is not None:
            order = rng.permutation(len(energy))
            ecal, energy, theta = ecal[order], energy[order], theta[order]
        usable = len(energy) // batch * batch
        for lo in range(0, usable, batch):
            yield ecal[lo : lo + batch], energy[lo : lo + batch], theta[lo : lo + batch]
            made += 1
            if made == steps:
                return
        ecal, energy, theta = ecal[usable:], energy[usable:], theta[usable:]


def save_checkpoint(
    mode: Mode,
    world: MPI.Comm,
    run: RunDir,
    parallel: ParallelGanStep,
    position: Position,
    serial: int,
    extra: dict[str, Any],
) -> None:
    """Collective: every rank (sync: rank 0, with every rank's buffers and position) writes,
    then the checkpoint ``serial`` is committed; the training state is left untouched."""
    sync = mode.replicas
    mine = ([b.detach().clone() for b in parallel.float_buffers()], position.own())
    extras = world.gather(mine, root=0) if sync else [mine]
    meta = {"world_size": world.size, "mode": mode.name, "serial": serial}
    if world.rank == 0 or not sync:
        ranks = range(world.size) if sync else [world.rank]
        own = dict(zip(ranks, extras, strict=True))
        name = ckpt.rank_file(serial, world.rank)
        ckpt.save_rank(run, name, parallel.rank_state(), own, {**meta, "rank": world.rank})
    files = [ckpt.rank_file(serial, r) for r in range(1 if sync else world.size)]
    lead = {"epoch": position.epoch, "step": position.step, **extra}
    ckpt.commit(run, world, files, {**meta, **lead})


def chunk_source(shard: Any, chunk_events: int) -> Callable[[], Iterator[Any]]:
    """The shard's chunks, from memory when the shard is small enough to keep there."""
    event_bytes = 4 * int(np.prod(shard.shape))
    if len(shard) * event_bytes <= CACHE_BYTES:
        cached = shard.read()
        return lambda: iter([cached])
    return lambda: shard.iter_chunks(chunk_events)


def _epoch_record(epoch: int, steps: int, figures: list[dict[str, Any]]) -> dict[str, Any]:
    """One JSONL record from every rank's sums of an epoch."""
    wall = max(f["wall_s"] for f in figures)
    samples = sum(f["samples"] for f in figures)
    shares = [f["comm_s"] / f["step_s"] if f["step_s"] > 0 else 0.0 for f in figures]
    record: dict[str, Any] = {
        "kind": "epoch",
        "epoch": epoch + 1,
        "step": (epoch + 1) * steps,
        "steps": steps,
        "ranks": len(figures),
        "samples": samples,
        "wall_s": wall,
        "samples_per_s": samples / wall if wall > 0 else 0.0,
        "comm_s": float(np.mean([f["comm_s"] for f in figures])),
        "comm_share": float(np.mean(shares)),
        "comm_share_max": float(np.max(shares)),
    }
    for key in figures[0]["losses"]:
        record[key] = float(np.mean([f["losses"][key] for f in figures]))
    if figures[0]["received"] is not None:
        record["gradients_received"] = [f["received"] for f in figures]
    return record


@dataclass
class Outcome:
    """How :meth:`EpochLoop.run` ended: the summary records, or a stop at ``position``."""

    records: list[dict[str, Any]]
    stopped: bool
    position: Position


def draw_learning_curve(run: RunDir) -> None:
    """Redraw ``learning_curve.png`` from everything in the run's metrics (rank 0)."""
    from evogan.plots.learning import plot_learning_curve

    plot_learning_curve(run.metrics(), run.file(LEARNING_CURVE), title=run.name)


@dataclass(frozen=True)
class EpochPlan:
    """What the loop trains: the ``trainer:`` settings, the root seed, a checkpoint every
    ``checkpoint_every`` epochs, ``batch`` showers per rank and step, ``steps`` per epoch."""

    settings: TrainerConfig
    seed: int
    checkpoint_every: int
    batch: int
    steps: int


@dataclass(frozen=True)
class LoopParts:
    """What the loop trains with: the parallel ``mode`` and this rank's ``parallel`` step over
    ``layout``, the ``run`` directory, the shard's ``chunks``, the ``cadence`` the ranks agree
    on, the ``validation`` (None: off) and who hears how long the first step took."""

    mode: Mode
    layout: Layout
    parallel: ParallelGanStep
    run: RunDir
    chunks: Callable[[], Iterator[Any]]
    cadence: Cadence
    validation: TrainingValidation | None
    first_step: Callable[[float], None] | None = None  # told the first step's seconds


class EpochLoop:
    """Trains epochs from a :class:`Position` up to a target epoch (collective); one loop
    serves every :meth:`run_epochs` call of a training, so its checkpoint serial (from
    ``serial``), cadence and validation state carry over from call to call."""

    def __init__(self, plan: EpochPlan, parts: LoopParts, serial: int) -> None:
        self.settings, self.seed = plan.settings, plan.seed
        self.checkpoint_every = plan.checkpoint_every
        self.batch, self.steps = plan.batch, plan.steps
        self.mode, self.world, self.parallel = parts.mode, parts.layout.world, parts.parallel
        self.run, self.chunks = parts.run, parts.chunks
        self.cadence, self.validation, self.serial = parts.cadence, parts.validation, serial
        self.first_step = parts.first_step
        self.lead = self.world.rank == 0
        self.metrics: MetricsWriter | None = None
        self.records: list[dict[str, Any]] = []
        self.validated = -1  # global step of the last validation
        self.curve_drawn = -math.inf  # monotonic time of the last learning-curve draw
        self.curve_behind = False  # a validation is logged that the learning curve lacks
        self.started = time.monotonic()
        self.target = 0

    def run_epochs(
        self, position: Position, target: int, on_step: Callable[[StepInfo], None] | None
    ) -> Outcome:
        """Train until epoch ``target`` or an agreed stop (checkpointed before returning)."""
        self.target = target
        self.started = time.monotonic() - position.elapsed
        total = (target - position.epoch) * self.steps - position.step
        if self.lead:
            self.metrics = MetricsWriter(self.run.file("metrics.jsonl"))
        try:
            # the first step compiles, autotunes and times the FFT products' forms
            with progress("train", total=total, unit="steps", show=self.lead, warmup=1) as task:
                while position.epoch < target:
                    if not self._epoch(position, on_step, task):
                        self._stop(position)
                        return Outcome(self.records, True, position)
            if self.validation is not None and self.validated != target * self.steps:
                self._validate(position)
        finally:
            if self.metrics is not None:
                self.metrics.close()
                self.metrics = None
        return Outcome(self.records, False, position)

    def _epoch(self, pos: Position, on_step: Callable[[StepInfo], None] | None, task) -> bool:
        """One epoch from ``pos`` (its steps, then the epoch end); False on an agreed stop."""
        settings, rank, epoch = self.settings, self.world.rank, pos.epoch
        shuffle = numpy_generator(self.seed, "gan3d", "batches", rank, epoch)
        outer = (epoch + 1) % settings.outer_every == 0
        batches = iter_batches(
            self.chunks, self.batch, self.steps, shuffle if settings.shuffle else None
        )
        for index, (ecal, energy, theta) in enumerate(batches):
            if index < pos.step:  # done before the checkpoint this run resumed from
                continue
            if settings.lr_decay_from < 1.0:
                step = epoch * self.steps + index
                total = settings.epochs * self.steps
                self.parallel.scale_learning_rates(lr_factor(step, total, settings.lr_decay_from))
            start = time.perf_counter()
            figures = self.parallel.train_step(
                torch.from_numpy(ecal),
                torch.from_numpy(energy),
                torch.from_numpy(theta),
                outer=outer and index == self.steps - 1,
            )
            if on_step is not None:
                on_step(StepInfo(rank, epoch, index))
            figures["wall_s"] = time.perf_counter() - start
            if self.first_step is not None:
                self.first_step(figures["wall_s"])
                self.first_step = None
            for key, value in figures.items():
                pos.sums[key] = pos.sums.get(key, 0.0) + value
            pos.step = index + 1
            note = f"epoch {epoch + 1}/{self.target}, d_loss {figures['d_loss']:.3g}"
            task.advance(1, note=f"{note}, g_loss {figures['g_loss']:.3g}")
            stop, actions = self.cadence.after_step()
            if stop:
                return False
            self._act(actions, pos)
        stop, actions = self.cadence.epoch_end()
        if stop:
            return False
        self._end_epoch(pos)
        every = settings.validate_every
        if every is not None and pos.epoch % every == 0:
            actions |= VALIDATE
        last = pos.epoch == self.target
        if pos.epoch % self.checkpoint_every == 0 or last:
            actions |= CHECKPOINT
        self._act(actions, pos)
        return True

    def _end_epoch(self, pos: Position) -> None:
        """Gather the epoch's figures into one record (rank 0) and move to the next epoch."""
        sums, steps = dict(pos.sums), self.steps
        mine = {
            "samples": steps * self.batch,
            "wall_s": sums.pop("wall_s"),
            "comm_s": sums.pop("comm_s"),
            "step_s": sums.pop("step_s"),
            "losses": {key: value / steps for key, value in sums.items()},
            "received": self.mode.received(self.parallel),
        }
        gathered = self.world.gather(mine, root=0)
        epoch = pos.epoch
        pos.epoch, pos.step, pos.sums = epoch + 1, 0, {}
        if self.metrics is None:
            return
        record = _epoch_record(epoch, steps, gathered)
        record["wall_seconds"] = self._elapsed(pos)
        self.metrics.write(record)
        self.records.append(record)
        print(
            f"epoch {epoch + 1}/{self.target}: d_loss {record['d_loss']:.4g} "
            f"g_loss {record['g_loss']:.4g}, {record['samples_per_s']:.1f} samples/s on "
            f"{self.world.size} rank(s), {100 * record['comm_share']:.1f}% of step time in "
            "communication",
            flush=True,
        )

    def _act(self, actions: int, pos: Position) -> None:
        fresh = pos.epoch * self.steps + pos.step != self.validated  # not scored at this step yet
        if actions & VALIDATE and self.validation is not None and fresh:
            self._validate(pos)
        if actions & CHECKPOINT:
            self._checkpoint(pos)

    def _elapsed(self, pos: Position) -> float:
        pos.elapsed = time.monotonic() - self.started
        return pos.elapsed

    def _validate(self, pos: Position) -> None:
        from evogan.physics.targets import describe_targets

        step = pos.epoch * self.steps + pos.step
        at = {"epoch": pos.epoch, "step": step, "wall_seconds": self._elapsed(pos)}
        generator = self.parallel.scored_generator()
        record = self.validation.validate(generator, self.run, self.metrics, at)
        self.validated = step
        self.cadence.done(VALIDATE)
        if record is not None:
            best = self.validation.best  # None while only diverged generators were scored
            print(
                f"validation at step {step}: score {record['score']:.4g} "
                f"(best {'none' if best is None else f'{best:.4g}'}); "
                f"{describe_targets(record['targets'])}",
                flush=True,
            )
            self.curve_behind = True
            if time.monotonic() - self.curve_drawn >= CURVE_REDRAW_SECONDS:
                self._draw_curve()

    def _draw_curve(self) -> None:
        draw_learning_curve(self.run)
        self.curve_drawn, self.curve_behind = time.monotonic(), False

    def _checkpoint(self, pos: Position) -> None:
        self._elapsed(pos)
        best = self.validation.best if self.validation is not None else None
        save_checkpoint(
            self.mode, self.world, self.run, self.parallel, pos, self.serial, {"best": best}
        )
        self.serial += 1
        self.cadence.done(CHECKPOINT)

    def _stop(self, pos: Position) -> None:
        """Checkpoint where this rank stopped, say so in the metrics and bring the learning
        curve up to date (after the checkpoint: a kill while drawing loses nothing)."""
        self._checkpoint(pos)
        if self.metrics is not None:
            self.metrics.write(
                {
                    "kind": "stop",
                    "epoch": pos.epoch,
                    "step": pos.epoch * self.steps + pos.step,
                    "wall_seconds": pos.elapsed,
                    "signal": self.cadence.signal_name,
                }
            )
        if self.lead and self.curve_behind:
            self._draw_curve()
