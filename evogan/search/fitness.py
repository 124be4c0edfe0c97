"""Fitness of one architecture: short data-parallel trainings on a rank group, physics score.

Every rank of the group calls :func:`evaluate` with the same candidate. The candidate's spec is
trained ``trainings`` times (one ensemble member per training in sync mode, one per rank in arar
mode, where every rank keeps its own discriminator), with the same member seeds for every
candidate (common random numbers make candidates comparable). Each member's generator is scored
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
from evogan.gan3d.spec import GanSpec, discriminator_layers, generator_layers
from evogan.physics import WORST as WORST_SCORE
from evogan.physics import Reference, Validation
from evogan.physics.validation import generate_showers

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
    per_training = group_size if config.trainer.mode == "arar" else 1
    return -(-config.fitness.members // per_training)


def precheck(config: SearchConfig, spec: GanSpec) -> Evaluation | None:
    """A refusal known before training (memory), or None."""
    limit = config.budget.max_memory_mb
    if limit is None:
        return None
    batch = config.trainer.batch_size or spec.batch_size
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
    files: list[Path] = []
    failure: tuple[str, str] | None = None
    inherited = 0
    for t, seed in enumerate(seeds):
        try:
            run_dir = workdir / f"member-{t}"
            source = None if parent is None else parent / run_dir.name
            made, epochs = _train_member(config, spec, group, run_dir, seed, start, on_step, source)
            files += made
            inherited += int(epochs > 0)
        except Diverged as exc:
            failure = ("nan", str(exc))
        except CandidateTimeout:
            failure = ("timeout", f"ran past budget.timeout_s = {config.budget.timeout_s:g} s")
        except torch.OutOfMemoryError as exc:
            failure = ("oom", f"out of memory: {str(exc).splitlines()[0]}")
        except MemoryError:
            failure = ("oom", "out of host memory")
        except EvoganError as exc:
            failure = ("error", str(exc))
        if failure is not None:
            break
    train_s = time.perf_counter() - start
    result = Evaluation("ok", WORST, seeds=seeds, params=weight_count(spec), flops=flop_count(spec))
    result.train_s = train_s
    result.inherited = inherited
    if failure is not None:
        result.status, result.reason = failure
        return result
    files = files[: config.fitness.members]
    mine = {m: scorer.score(p) for m, p in enumerate(files) if m % group.size == group.rank}
    scores: dict[int, float] = {}
    for part in group.allgather(mine):
        scores.update(part)
    result.member_scores = [scores[m] for m in range(len(files))]
    result.eval_s = time.perf_counter() - start - train_s
    values = np.asarray(result.member_scores, dtype=np.float64)
    if np.isnan(values).any():
        result.status = "nan"
        result.reason = "generator showers not finite (training diverged)"
        return result
    result.score_mean = float(values.mean())
    result.score_std = float(values.std())
    result.fitness = result.score_mean + config.fitness.beta * result.score_std
    return result


def _train_member(
    config: SearchConfig,
    spec: GanSpec,
    group: MPI.Comm,
    run_dir: Path,
    seed: int,
    start: float,
    hook: Callable[[Any], None] | None,
    parent: Path | None,
) -> tuple[list[Path], int]:
    """One training of the candidate; returns its generator file(s), one per member, and the
    epochs inherited from ``parent`` (0: trained from scratch)."""
    from evogan.gan3d.trainer import ENSEMBLE, train_gan3d
    from evogan.search.inherit import seed_from_parent

    budget = config.budget
    trainer = config.trainer.model_copy()
    if budget.kind == "steps":
        trainer.epochs, trainer.steps_per_epoch = 1, int(budget.amount)
    elif budget.kind == "epochs":
        trainer.epochs = int(budget.amount)
    else:
        trainer.epochs = 1
    train_config = Gan3dConfig(
        seed=seed,
        data=config.data,
        spec=spec,
        trainer=trainer,
        run=RunConfig(progress_every=10**9),
    )
    inherited = 0
    if parent is not None and group.rank == 0:
        inherited = seed_from_parent(parent, run_dir, train_config, group.size)
    inherited = group.bcast(inherited, root=0)
    train_config.trainer.epochs += inherited
    on_step = _step_hook(group, start, budget.timeout_s, hook)
    began = time.perf_counter()  # a seconds budget counts the first epoch too
    resume = inherited > 0
    train_gan3d(train_config, run_dir, resume=resume, world=group, on_step=on_step, signals=False)
    while budget.kind == "seconds":
        _check_finite(run_dir, group)
        more = group.bcast(time.perf_counter() - began < budget.amount, root=0)
        if not more:
            break
        train_config.trainer.epochs += 1
        train_gan3d(train_config, run_dir, resume=True, world=group, on_step=on_step, signals=False)
    _check_finite(run_dir, group)
    if trainer.mode == "arar":
        return [run_dir / ENSEMBLE / f"rank-{r:05d}.h5" for r in range(group.size)], inherited
    return [run_dir / "best_model.h5"], inherited


def _check_finite(run_dir: Path, group: MPI.Comm) -> None:
    """Stop early on diverged losses (the last epoch's record in the run's metrics)."""
    from evogan.store import read_metrics

    finite = True
    if group.rank == 0:
        records = read_metrics(run_dir / "metrics.jsonl", "epoch")
        losses = [v for k, v in records[-1].items() if k.endswith("_loss")] if records else []
        finite = all(v is not None and math.isfinite(v) for v in losses)
    if not group.bcast(finite, root=0):
        raise Diverged("training losses became NaN or infinite")


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
