"""Fitness of one architecture: short data-parallel trainings on a rank group, physics score.

Every rank of the group calls :func:`evaluate` with the same candidate. The candidate's spec is
trained ``trainings`` times (one ensemble member per training in sync mode, one per rank in arar
mode, where every rank keeps its own discriminator), with the same member seeds for every
candidate (common random numbers make candidates comparable). Each training runs on a
:class:`~evogan.gan3d.trainer.GanTrainer` in this process: a ``steps`` or ``epochs`` budget trains
once, a ``seconds`` budget trains epoch by epoch while time is left, and the trainer's own epoch
records tell whether the losses stayed finite. Each member's generator is scored
against held-out showers by :class:`evogan.physics.Reference` (``fitness.metric``, default the
selection score, finite for any showers: empty ones score worst-class); members are scored in
parallel across the group's ranks. ``fitness = mean + beta x std`` of member scores.

A candidate that fails in a way the campaign must survive gets ``status`` != "ok", the worst
fitness (inf) and a one-line ``reason``: ``nan`` (non-finite losses or showers), ``timeout``
(``budget.timeout_s``, decided collectively per step so every rank stops at the same step),
``memory`` (estimated need above ``budget.max_memory_mb``, known before training; ``oom`` when
torch runs out), ``error`` (a user-level training error such as a batch larger than a shard).
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mpi4py import MPI

from evogan.config.gan import Gan3dConfig
from evogan.config.regressor import RunConfig
from evogan.config.search import SearchConfig
from evogan.engine.seeding import derive_seed
from evogan.errors import EvoganError
from evogan.gan3d.parallel import mode_for
from evogan.gan3d.spec import GanSpec, discriminator_layers, generator_layers
from evogan.gan3d.trainer import GanTrainer
from evogan.physics import WORST as WORST_SCORE
from evogan.physics import Reference, Validation
from evogan.physics.validation import generate_showers
from evogan.search.inherit import seed_from_parent

WORST = math.inf
SCORE_SEED = 12345  # noise of the validation showers: the same for every member and candidate


class CandidateTimeout(Exception):
    """Raised on every rank of a group at the same step when a candidate runs out of time."""


class Diverged(Exception):
    """Training losses became NaN or infinite (decided by the group leader, on every rank)."""


def weight_count(spec: GanSpec) -> int:
    """Trainable weights and biases of the convolutions and dense layers (batch norm aside)."""
    total = 0
    for layer in [*generator_layers(spec), *discriminator_layers(spec)]:
        if layer.name == "dense":
            total += layer.in_shape[0] * layer.out_shape[0] + layer.out_shape[0]
        elif layer.kernel is not None:
            total += layer.in_shape[0] * math.prod(layer.kernel) * layer.out_shape[0]
            total += layer.out_shape[0]
    return total


def flop_count(spec: GanSpec) -> int:
    """Forward FLOPs per sample of both networks (2 x multiply-accumulates)."""
    return 2 * sum(layer.macs for layer in [*generator_layers(spec), *discriminator_layers(spec)])


def memory_estimate_mb(spec: GanSpec, batch: int) -> float:
    """A rough training footprint: activations kept for the backward pass (x3 for gradients
    and temporaries) plus weights with gradient and RMSprop state (x4)."""
    activations = sum(
        math.prod(layer.out_shape) + math.prod(layer.in_shape)
        for layer in [*generator_layers(spec), *discriminator_layers(spec)]
    )
    return (3 * 4 * activations * batch + 4 * 4 * weight_count(spec)) / 2**20


class Scorer:
    """Reference features of the held-out showers, computed once per process."""

    def __init__(self, config: SearchConfig) -> None:
        from evogan.data.reader import open_dataset

        _train, test = open_dataset(config.data, announce=lambda _line: None)
        chunk = test.read(min(config.fitness.test_events, len(test)))
        self.metric = config.fitness.metric
        self.energy = chunk.energy
        self.theta = chunk.theta
        self.reference = Reference.from_showers(
            chunk.ecal, chunk.energy, bins=config.fitness.energy_bins, seed=SCORE_SEED
        )

    def score(self, path: Path) -> float:
        """``fitness.metric`` of the generator file ``path`` (lower is better): NaN when its
        showers are not finite (training diverged), else finite."""
        from evogan.gan3d.model_file import load_generator

        spec, generator, _meta = load_generator(path)
        theta = self.theta if spec.conditioning.angle else None
        rng = torch.Generator().manual_seed(SCORE_SEED)
        showers = generate_showers(spec, generator, self.energy, theta, rng)
        if not np.isfinite(showers).all():
            return math.nan
        return metric_value(self.reference.score(showers, self.energy), self.metric)


def metric_value(result: Validation, metric: str) -> float:
    """The value a search minimises: the selection score, or one reported metric (AUC as
    its distance from 0.5); worst-class when the metric could not be measured."""
    if metric == "score":
        return result.score
    entry = result.metrics.get(metric)
    value = math.nan if entry is None else entry["value"]
    if metric == "classifier_auc":
        value = abs(value - 0.5)
    return float(value) if math.isfinite(value) else WORST_SCORE


@dataclass
class Evaluation:
    """What the campaign table records about one trained (or refused) candidate."""

    status: str
    fitness: float
    reason: str = ""
    seeds: list[int] = field(default_factory=list)
    member_scores: list[float] = field(default_factory=list)
    score_mean: float = math.nan
    score_std: float = math.nan
    params: int = 0
    flops: int = 0
    train_s: float = 0.0
    eval_s: float = 0.0
    inherited: int = 0  # member trainings that started from the parent's weights

    def objectives(self, second: str) -> list[float]:
        """Values to minimise: fitness, then params or FLOPs when asked for."""
        values = [self.fitness]
        if second == "params":
            values.append(float(self.params) if self.status == "ok" else WORST)
        elif second == "flops":
            values.append(float(self.flops) if self.status == "ok" else WORST)
        return values

    def as_row(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "fitness": self.fitness,
            "reason": self.reason,
            "seeds": self.seeds,
            "member_scores": self.member_scores,
            "score_mean": self.score_mean,
            "score_std": self.score_std,
            "params": self.params,
            "flops": self.flops,
            "train_s": self.train_s,
            "eval_s": self.eval_s,
            "inherited": self.inherited,
        }


def member_seeds(config: SearchConfig, trainings: int) -> list[int]:
    """Seeds of the ensemble trainings, shared by every candidate of the campaign."""
    return [derive_seed(config.seed, "search", "member", t) % 2**31 for t in range(trainings)]


def trainings_needed(config: SearchConfig, group_size: int) -> int:
    """Trainings that yield ``fitness.members`` generators on a group of ``group_size``."""
    per_training = mode_for(config.trainer).members(group_size)
    return -(-config.fitness.members // per_training)


def precheck(config: SearchConfig, spec: GanSpec) -> Evaluation | None:
    """A refusal known before training (memory), or None."""
    limit = config.budget.max_memory_mb
    if limit is None:
        return None
    batch = config.trainer.rank_batch(spec.batch_size)
    need = memory_estimate_mb(spec, batch)
    if need <= limit:
        return None
    return Evaluation(
        "memory",
        WORST,
        f"estimated training memory {need:.0f} MB exceeds budget.max_memory_mb = {limit:g}",
        params=weight_count(spec),
        flops=flop_count(spec),
    )


def evaluate(
    config: SearchConfig,
    spec: GanSpec,
    group: MPI.Comm,
    workdir: Path,
    scorer: Scorer,
    on_step: Callable[[Any], None] | None = None,
    parent: Path | None = None,
) -> Evaluation:
    """Collective on ``group``: train and score ``spec``; the same Evaluation on every rank.

    ``on_step`` runs on this rank after every training step (the study owner serves other
    groups from it while its own group trains). ``parent``: a trained candidate's directory
    whose members this one starts from when the layer shapes match (weight inheritance)."""
    refused = precheck(config, spec)
    if refused is not None:
        return refused
    start = time.perf_counter()
    seeds = member_seeds(config, trainings_needed(config, group.size))
    if group.rank == 0 and workdir.exists():  # left over from a killed run: start afresh
        shutil.rmtree(workdir)
    group.Barrier()
    result = Evaluation("ok", WORST, seeds=seeds, params=weight_count(spec), flops=flop_count(spec))
    training = _MemberTraining(config, spec, group, start, on_step)
    files, failure = _train_members(training, workdir, seeds, parent, result)
    result.train_s = time.perf_counter() - start
    if failure is not None:
        result.status, result.reason = failure
        return result
    _score_members(result, files[: config.fitness.members], scorer, group, config.fitness.beta)
    result.eval_s = time.perf_counter() - start - result.train_s
    return result


def _train_members(
    training: _MemberTraining,
    workdir: Path,
    seeds: list[int],
    parent: Path | None,
    result: Evaluation,
) -> tuple[list[Path], tuple[str, str] | None]:
    """Every member training in turn (counting inherited starts into ``result``); stops at the
    first failure the campaign survives, returned as (status, reason)."""
    files: list[Path] = []
    for t, seed in enumerate(seeds):
        run_dir = workdir / f"member-{t}"
        source = None if parent is None else parent / run_dir.name
        try:
            made, epochs = training.run(run_dir, seed, source)
        except Diverged as exc:
            return files, ("nan", str(exc))
        except CandidateTimeout:
            timeout = training.config.budget.timeout_s
            return files, ("timeout", f"ran past budget.timeout_s = {timeout:g} s")
        except torch.OutOfMemoryError as exc:
            return files, ("oom", f"out of memory: {str(exc).splitlines()[0]}")
        except MemoryError:
            return files, ("oom", "out of host memory")
        except EvoganError as exc:
            return files, ("error", str(exc))
        files += made
        result.inherited += int(epochs > 0)
    return files, None


def _score_members(
    result: Evaluation, files: list[Path], scorer: Scorer, group: MPI.Comm, beta: float
) -> None:
    """Score the member generators, spread over the group's ranks, into ``result``."""
    mine = {m: scorer.score(p) for m, p in enumerate(files) if m % group.size == group.rank}
    scores: dict[int, float] = {}
    for part in group.allgather(mine):
        scores.update(part)
    result.member_scores = [scores[m] for m in range(len(files))]
    values = np.asarray(result.member_scores, dtype=np.float64)
    if np.isnan(values).any():
        result.status = "nan"
        result.reason = "generator showers not finite (training diverged)"
        return
    result.score_mean = float(values.mean())
    result.score_std = float(values.std())
    result.fitness = result.score_mean + beta * result.score_std


class _MemberTraining:
    """Trains the members of one candidate in process, each on a :class:`GanTrainer` of its
    own, within the campaign's budget."""

    def __init__(
        self,
        config: SearchConfig,
        spec: GanSpec,
        group: MPI.Comm,
        start: float,
        hook: Callable[[Any], None] | None,
    ) -> None:
        self.config, self.spec, self.group = config, spec, group
        self.on_step = _step_hook(group, start, config.budget.timeout_s, hook)

    def gan_config(self, seed: int) -> Gan3dConfig:
        """The training of one member: the candidate's spec with the budget's epochs/steps."""
        budget = self.config.budget
        trainer = self.config.trainer.model_copy()
        if budget.kind == "steps":
            trainer.epochs, trainer.steps_per_epoch = 1, int(budget.amount)
        elif budget.kind == "epochs":
            trainer.epochs = int(budget.amount)
        else:
            trainer.epochs = 1
        run = RunConfig(progress_every=10**9)
        return Gan3dConfig(
            seed=seed, data=self.config.data, spec=self.spec, trainer=trainer, run=run
        )

    def run(self, run_dir: Path, seed: int, parent: Path | None) -> tuple[list[Path], int]:
        """One member training; returns its generator file(s), one per member, and the epochs
        inherited from ``parent`` (0: trained from scratch)."""
        group, budget = self.group, self.config.budget
        config = self.gan_config(seed)
        inherited = 0
        if parent is not None and group.rank == 0:
            inherited = seed_from_parent(parent, run_dir, config, group.size)
        inherited = group.bcast(inherited, root=0)
        config.trainer.epochs += inherited
        began = time.perf_counter()  # a seconds budget counts the first epoch too
        if inherited > 0:
            trainer = GanTrainer.resume(run_dir, config, world=group, on_step=self.on_step)
        else:
            trainer = GanTrainer.open(config, run_dir, world=group, on_step=self.on_step)
        with trainer:
            trainer.train()
            while budget.kind == "seconds" and trainer.losses_finite():
                if not group.bcast(time.perf_counter() - began < budget.amount, root=0):
                    break
                trainer.train(epochs=1)
            trainer.save()  # a diverged member's run directory still shows what it trained
        if not trainer.losses_finite():
            raise Diverged("training losses became NaN or infinite")
        return trainer.member_files(), inherited


def _step_hook(
    group: MPI.Comm, start: float, timeout: float | None, hook: Callable[[Any], None] | None
) -> Callable[[Any], None] | None:
    """The caller's hook, then the collective deadline check (every rank, every step)."""
    if timeout is None:
        return hook

    def on_step(info: Any) -> None:
        if hook is not None:
            hook(info)
        late = time.perf_counter() - start > timeout
        if group.allreduce(late, op=MPI.LOR):
            raise CandidateTimeout()

    return on_step
