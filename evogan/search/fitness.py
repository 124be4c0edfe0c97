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
parallel across the group's ranks. ``fitness = mean + beta x std`` of member scores; the row
also holds their standard error, every member's training seed and the one-line ``reproduce``
command (:func:`evogan.search.final.reproduce_member`).

A candidate that fails in a way the campaign must survive gets ``status`` != "ok", the worst
fitness (inf) and a one-line ``reason``: ``nan`` (non-finite losses or showers), ``timeout``
(``budget.timeout_s``, decided collectively per step so every rank stops at the same step),
``memory`` (estimated need above ``budget.max_memory_mb``, known before training; ``oom`` when
torch runs out), ``error`` (a user-level training error such as a batch larger than a shard).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evogan.config.data import DataConfig
from evogan.config.search import MIN_TEST_EVENTS, SearchConfig
from evogan.distributed.mpi import MPI
from evogan.errors import ConfigError, DataError
from evogan.gan3d.parallel import mode_for
from evogan.gan3d.spec import GanSpec, check_window, discriminator_layers, generator_layers
from evogan.physics import WORST_SCORE, Reference, Validation
from evogan.physics.validation import generate_showers
from evogan.search.members import MemberTraining, clear_workdir, failure_of, train_pruned
from evogan.search.rungs import Decide, rung_key, rung_plan
from evogan.seeding import derive_seed

WORST_OBJECTIVE = math.inf
"""An objective (fitness, parameters, FLOPs) a candidate did not earn: worse than any value."""
SCORE_SEED = 12345  # noise of the validation showers: the same for every member and candidate


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
    """Reference features of the held-out showers, computed once per process. As in training
    validation, an angle-conditioned base spec has its showers' angles scored."""

    def __init__(self, config: SearchConfig) -> None:
        from evogan.data.reader import open_dataset

        _train, test = open_dataset(config.data, announce=lambda _line: None)
        chunk = test.read(min(config.fitness.test_events, len(test)))
        self.metric = config.fitness.metric
        self.energy = chunk.energy
        self.theta = chunk.theta
        self.reference = Reference.from_showers(
            chunk.ecal,
            chunk.energy,
            cell_threshold=test.cell_threshold,
            bins=config.fitness.energy_bins,
            seed=SCORE_SEED,
            theta=chunk.theta if config.spec.conditioning.angle else None,
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
        result = self.reference.score(showers, self.energy, self.theta)
        return metric_value(result, self.metric)


def check_data(config: SearchConfig) -> Scorer:
    """Refuse data that would fail every candidate, before the campaign directory exists: files
    that cannot be read or whose cell window is not the base spec's output shape, an energy or
    angle of any train or test event that is not finite (read without the cells), too few test
    events for the score or its energy bins. Makes the synthetic data when no files are given,
    so one rank calls it before the others read, and returns the scorer it built for them to
    share."""
    from evogan.data.reader import open_dataset

    train, test = open_dataset(config.data, announce=lambda _line: None)
    check_window(config.spec, test.shape, test.files)  # open_dataset: train's cells are alike
    for view in (train, test):
        view.energies()  # checks every event's energy and angle
    if len(test) < MIN_TEST_EVENTS:
        raise DataError(
            f"the test split holds {len(test)} event(s), fewer than the {MIN_TEST_EVENTS} the "
            f"fitness score needs (two halves of 4); {_more_test_data(config.data)}"
        )
    _check_bins(config, len(test))
    return Scorer(config)


def _check_bins(config: SearchConfig, held: int) -> None:
    """The reference (``fitness.test_events`` of the ``held`` test events) needs at least one
    event per energy bin; said with the search's keys."""
    fitness = config.fitness
    events = min(fitness.test_events, held)
    if events >= fitness.energy_bins:
        return
    more = _more_test_data(config.data)
    if fitness.test_events < held:
        more = "raise fitness.test_events"
    raise ConfigError(
        f"fitness.energy_bins = {fitness.energy_bins} needs at least as many reference events, "
        f"got {events} (fitness.test_events = {fitness.test_events}, test split {held}); "
        f"lower fitness.energy_bins, or {more}"
    )


def _more_test_data(data: DataConfig) -> str:
    """The settings that give the test split more events."""
    if data.test_events is not None:
        return f"raise data.test_events (= {data.test_events}) or use more data"
    if data.test_files:
        return "add events to data.test_files"
    return "use more data or raise data.test_fraction"


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
    score_sem: float = math.nan  # standard error of the mean member score (nan for one member)
    member_seeds: list[int] = field(default_factory=list)  # each member's training seed
    reproduce: str = ""  # one command that re-trains and re-scores member 0
    params: int = 0
    flops: int = 0
    train_s: float = 0.0
    eval_s: float = 0.0
    inherited: int = 0  # member trainings that started from the parent's weights
    intermediate: dict[str, float] = field(default_factory=dict)  # rung budget -> mean score
    rung: int | None = None  # the rung a pruned candidate stopped at

    def objectives(self, second: str) -> list[float]:
        """Values to minimise: fitness, then params or FLOPs when asked for."""
        values = [self.fitness]
        if second == "params":
            values.append(float(self.params) if self.status == "ok" else WORST_OBJECTIVE)
        elif second == "flops":
            values.append(float(self.flops) if self.status == "ok" else WORST_OBJECTIVE)
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
            "score_sem": self.score_sem,
            "member_seeds": self.member_seeds,
            "reproduce": self.reproduce,
            "params": self.params,
            "flops": self.flops,
            "train_s": self.train_s,
            "eval_s": self.eval_s,
            "inherited": self.inherited,
            "intermediate": self.intermediate,
            "rung": self.rung,
        }


def member_seeds(config: SearchConfig, trainings: int) -> list[int]:
    """Seeds of the ensemble trainings, shared by every candidate of the campaign."""
    return [derive_seed(config.seed, "search", "member", t) % 2**31 for t in range(trainings)]


def reproduce_command(campaign: Path, candidate: str, ranks: int, member: int = 0) -> str:
    """The shell line that re-trains member ``member`` of ``candidate`` with its recorded seed
    on ``ranks`` ranks (sync results depend on the rank count) and prints both scores."""
    launch = f"mpirun -n {ranks} " if ranks > 1 else ""
    return f"{launch}evogan report {campaign} --reproduce {candidate}:{member}"


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
        WORST_OBJECTIVE,
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
    seeds: list[int] | None = None,
    first: int = 0,
    rungs: bool = False,
    decide: Decide | None = None,
) -> Evaluation:
    """Collective on ``group``: train and score ``spec``; the same Evaluation on every rank.

    ``on_step`` runs on this rank after every training step (the study owner serves other
    groups from it while its own group trains). ``parent``: a trained candidate's directory
    whose members this one starts from when the layer shapes match (weight inheritance).
    ``seeds``: training seeds other than the campaign's member seeds (re-trainings), the first
    of them for training ``first`` (its directory and parent member are ``member-FIRST``).
    ``rungs``: train in stages under ``config.pruning`` (every rank of the group), stopping
    when the leader's ``decide`` says so (:mod:`evogan.search.rungs`)."""
    refused = precheck(config, spec)
    if refused is not None:
        return refused
    start = time.perf_counter()
    if seeds is None:
        seeds = member_seeds(config, trainings_needed(config, group.size))
    if group.rank == 0 and workdir.exists():  # left over from a killed run: start afresh
        clear_workdir(workdir)
    group.Barrier()
    result = Evaluation(
        "ok", WORST_OBJECTIVE, seeds=seeds, params=weight_count(spec), flops=flop_count(spec)
    )
    per_training = mode_for(config.trainer).members(group.size)
    count = min(config.fitness.members, per_training * len(seeds))
    result.member_seeds = [seeds[m // per_training] for m in range(count)]
    if workdir.parent.name == "candidates":  # a campaign candidate, not a re-training
        result.reproduce = reproduce_command(workdir.parent.parent, workdir.name, group.size)
    training = MemberTraining(config, spec, group, start, on_step)
    plan = rung_plan(config) if rungs else None
    if plan is None:
        files, failure = _train_members(training, workdir, seeds, parent, result, first)
    else:
        files, failure = train_pruned(
            training, workdir, seeds, parent, result, plan, scorer.score, decide
        )
    result.train_s = time.perf_counter() - start
    gc.collect()  # a trainer's frames stay in a cycle (matplotlib's savefig): free its data now
    if failure is not None:
        result.status, result.reason = failure
        return result
    _score_members(result, files[: config.fitness.members], scorer, group, config.fitness.beta)
    if plan is not None:  # the full budget is the last point of the learning curve
        result.intermediate[rung_key(plan.points[-1])] = result.score_mean
    result.eval_s = time.perf_counter() - start - result.train_s
    return result


def _train_members(
    training: MemberTraining,
    workdir: Path,
    seeds: list[int],
    parent: Path | None,
    result: Evaluation,
    first: int = 0,
) -> tuple[list[Path], tuple[str, str] | None]:
    """Every member training in turn (counting inherited starts into ``result``); stops at the
    first failure the campaign survives, returned as (status, reason)."""
    files: list[Path] = []
    for t, seed in enumerate(seeds):
        run_dir = workdir / f"member-{first + t}"
        source = None if parent is None else parent / run_dir.name
        try:
            made, epochs = training.run(run_dir, seed, source)
        except Exception as exc:
            failure = failure_of(exc, training.config)
            if failure is None:
                raise
            return files, failure
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
    if len(values) > 1:  # the spread of the mean, so candidates that tie within it are seen
        result.score_sem = float(values.std(ddof=1) / math.sqrt(len(values)))
    result.fitness = result.score_mean + beta * result.score_std
