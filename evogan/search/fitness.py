"""Fitness of one candidate, top to bottom: spec -> member trainings -> scores -> Evaluation.

Every rank of a group calls :func:`evaluate` with the same candidate (the backend's genome made
a spec by :meth:`evogan.search.space.Space.spec`, :func:`evogan.search.scheduler.run_job`). In
order:

1. :func:`precheck`: a spec whose estimated training memory exceeds ``budget.max_memory_mb``
   is refused before training (``memory``).
2. Seeds: the spec is trained ``trainings`` times (one ensemble member per training in sync
   mode, one per rank in arar mode, where every rank keeps its own discriminator), with the
   same member seeds for every candidate (common random numbers make candidates comparable).
3. Member trainings (:mod:`evogan.search.members`), each on a
   :class:`~evogan.gan3d.training.trainer.GanTrainer` in this process, one after the other, or with
   ``pruning`` all at once in rung stages, stopped when the backend's *decide* says so
   (:mod:`evogan.search.rungs`).
4. Scores: each member's generator file against held-out showers
   (:class:`~evogan.search.scoring.Scorer`), members scored in parallel across the group's
   ranks. ``fitness = mean + beta x std`` of member scores.
5. The :class:`~evogan.search.evaluation.Evaluation`: the row also holds the scores' standard
   error, every member's training seed and the one-line ``reproduce`` command
   (:func:`evogan.search.final.reproduce_member`).

A candidate that fails in a way the campaign must survive gets ``status`` != "ok", the worst
fitness (inf) and a one-line ``reason``: ``nan`` (non-finite losses or showers), ``timeout``
(``budget.timeout_s``, decided collectively per step so every rank stops at the same step),
``memory`` (estimated need above ``budget.max_memory_mb``, known before training; ``oom`` when
torch runs out), ``error`` (a user-level training error such as a batch larger than a shard),
``pruned`` (stopped at a rung).
"""

from __future__ import annotations

import gc
import math
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evogan.config.search import SearchConfig
from evogan.distributed.launcher import launch_prefix
from evogan.distributed.mpi import MPI
from evogan.gan3d.model.spec import GanSpec, discriminator_layers, generator_layers
from evogan.gan3d.training.modes import mode_for
from evogan.search.evaluation import WORST_OBJECTIVE, Evaluation
from evogan.search.members import (
    MemberTraining,
    clear_workdir,
    failure_of,
    train_in_rungs,
    train_members,
)
from evogan.search.rungs import Decide, rung_key, rung_plan
from evogan.search.scoring import MemberScore, Scorer
from evogan.seeding import derive_seed


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
    when the leader's ``decide`` says so."""
    refused = precheck(config, spec)
    if refused is not None:
        return refused
    start = time.perf_counter()
    if seeds is None:
        seeds = member_seeds(config, trainings_needed(config, group.size))
    if group.rank == 0 and workdir.exists():  # left over from a killed run: start afresh
        clear_workdir(workdir)
    group.Barrier()
    result = _record(config, spec, group, workdir, seeds)
    training = MemberTraining(config, spec, group, start, on_step)
    plan = rung_plan(config) if rungs else None
    files: list[Path] = []
    try:
        if plan is None:
            files = train_members(training, workdir, seeds, parent, result, first)
        else:
            files = train_in_rungs(training, workdir, seeds, parent, plan, scorer, decide, result)
    except Exception as exc:
        failure = failure_of(exc, config)
        if failure is None:
            raise
        result.status, result.reason = failure
    result.train_s = time.perf_counter() - start
    gc.collect()  # a trainer's frames stay in a cycle (matplotlib's savefig): free its data now
    if result.status != "ok":
        return result
    scores = scorer.score_all(files[: config.fitness.members], group)
    _add_scores(result, scores, config.fitness.beta)
    if plan is not None:  # the full budget is the last point of the learning curve
        result.intermediate[rung_key(plan.points[-1])] = result.score_mean
    result.eval_s = time.perf_counter() - start - result.train_s
    return result


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


def member_seeds(config: SearchConfig, trainings: int) -> list[int]:
    """Seeds of the ensemble trainings, shared by every candidate of the campaign."""
    return [derive_seed(config.seed, "search", "member", t) % 2**31 for t in range(trainings)]


def reproduce_command(campaign: Path, candidate: str, ranks: int, member: int = 0) -> str:
    """The shell line that re-trains member ``member`` of ``candidate`` with its recorded seed
    on ``ranks`` ranks (sync results depend on the rank count) and prints both scores: the
    campaign's launcher and its arguments (``--oversubscribe``, a hostfile) on ``ranks``."""
    launch = launch_prefix(ranks) if ranks > 1 else ""
    command = f"evogan report {shlex.quote(str(campaign))} --reproduce {candidate}:{member}"
    return f"{launch} {command}" if launch else command


def trainings_needed(config: SearchConfig, group_size: int) -> int:
    """Trainings that yield ``fitness.members`` generators on a group of ``group_size``."""
    per_training = mode_for(config.trainer).members(group_size)
    return -(-config.fitness.members // per_training)


def _record(
    config: SearchConfig, spec: GanSpec, group: MPI.Comm, workdir: Path, seeds: list[int]
) -> Evaluation:
    """The record of a candidate about to train: its seeds, each member's seed, size and (for a
    campaign candidate, not a re-training) its ``reproduce`` command; fitness the worst until
    scored."""
    result = Evaluation(
        "ok", WORST_OBJECTIVE, seeds=seeds, params=weight_count(spec), flops=flop_count(spec)
    )
    per_training = mode_for(config.trainer).members(group.size)
    count = min(config.fitness.members, per_training * len(seeds))
    result.member_seeds = [seeds[m // per_training] for m in range(count)]
    if workdir.parent.name == "candidates":
        result.reproduce = reproduce_command(workdir.parent.parent, workdir.name, group.size)
    return result


def _add_scores(result: Evaluation, scores: list[MemberScore], beta: float) -> None:
    """The member scores and their statistics into ``result``: ``nan`` when any member's
    showers were not finite; the reason of an ``ok`` one names the empty showers that
    worsened its score (each scores worst-class)."""
    result.member_scores = [score.value for score in scores]
    values = np.asarray(result.member_scores, dtype=np.float64)
    if np.isnan(values).any():
        result.status = "nan"
        result.reason = "generator showers not finite (training diverged)"
        return
    empty = [f"{s.empty} of {s.events} in member {m}" for m, s in enumerate(scores) if s.empty]
    if empty:
        result.reason = f"generator made empty showers: {', '.join(empty)}"
    result.score_mean = float(values.mean())
    result.score_std = float(values.std())
    if len(values) > 1:  # the spread of the mean, so candidates that tie within it are seen
        result.score_sem = float(values.std(ddof=1) / math.sqrt(len(values)))
    result.fitness = result.score_mean + beta * result.score_std


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
