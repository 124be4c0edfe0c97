"""Multi-fidelity pruning: a candidate's members train in stages and are scored at rungs.

With ``pruning.kind`` set, the budget is cut at the rung points ``min_budget x factor^k``
(units of ``budget.kind``) below the full amount. All member trainings of a candidate are open
at once and advance stage by stage, so every member reaches a rung before the candidate is
judged on the mean member score there (the current generator, scored by the campaign's
:class:`~evogan.search.fitness.Scorer`). The group leader asks a *decide* callback, which the
backend supplies (the island's :class:`RungHistory` in the GA, Optuna's pruner through the
study owner in the Optuna backend), and broadcasts the answer: a reason to stop raises
:class:`Pruned` on every rank of the group. A ``steps`` budget is trained in epochs of
``gcd(rung points)`` steps so that every rung falls on an epoch end.

This module does not import :mod:`evogan.search.fitness` (which calls it): the member training
object it drives is passed in.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evogan.config.search import SearchConfig
from evogan.distributed.mpi import MPI

Decide = Callable[[int, float, float], "str | None"]
"""``decide(rung index, budget point, mean score) -> reason to stop, or None to go on``."""


class Pruned(Exception):
    """Raised on every rank of a group when its candidate is stopped at a rung."""


@dataclass(frozen=True)
class RungPlan:
    """Stage ends in budget units (the last is the full budget) and the epoch length."""

    kind: str  # budget.kind
    points: tuple[float, ...]
    unit: int = 1  # steps per epoch for a steps budget, else 1

    @property
    def rungs(self) -> tuple[float, ...]:
        """The points where candidates are judged (all but the full budget)."""
        return self.points[:-1]


def rung_key(point: float) -> str:
    """The JSON key of a budget point in a row's ``intermediate`` (``"2"``, ``"1.5"``)."""
    return f"{point:g}"


def rung_plan(config: SearchConfig) -> RungPlan | None:
    """The stages of one member training under ``config.pruning`` (None: no pruning)."""
    pruning, budget = config.pruning, config.budget
    if pruning.kind == "none":
        return None
    factor, amount = pruning.reduction_factor, float(budget.amount)
    low = pruning.min_budget if pruning.min_budget is not None else amount / factor**2
    whole = budget.kind != "seconds"
    points: list[float] = []
    point = low
    while point < amount * (1 - 1e-9):
        value = float(max(1, round(point))) if whole else point
        if value < amount and value not in points:
            points.append(value)
        point *= factor
    points.append(float(int(amount)) if whole else amount)
    unit = math.gcd(*(int(p) for p in points)) if budget.kind == "steps" else 1
    return RungPlan(budget.kind, tuple(points), unit)


def prune_reason(
    score: float, earlier: list[float], factor: int, rung: int, point: float, kind: str
) -> str | None:
    """Successive halving: stop unless ``score`` is among the best ``1/factor`` of the scores
    at this rung (``earlier`` plus itself; at least the best one survives, as in Optuna)."""
    value = math.inf if math.isnan(score) else score
    values = sorted([math.inf if math.isnan(v) else v for v in earlier] + [value])
    keep = max(1, len(values) // factor)
    if value <= values[keep - 1]:
        return None
    return (
        f"pruned at rung {rung} ({point:g} {kind}): score {score:.4f} not among the best "
        f"{keep} of {len(values)} at this rung (1/{factor} survive)"
    )


class RungHistory:
    """Scores recorded at each rung on one GA island (rebuilt from the table on resume)."""

    def __init__(self, factor: int, kind: str) -> None:
        self.factor, self.kind = factor, kind
        self.scores: dict[str, list[float]] = {}

    def add_row(self, row: dict[str, Any]) -> None:
        for key, value in (row.get("intermediate") or {}).items():
            self.scores.setdefault(key, []).append(math.nan if value is None else float(value))

    def decider(self, prunable: bool) -> Decide:
        """A decide callback for one candidate; only ``prunable`` ones (children) may stop,
        but every candidate's scores are recorded."""

        def decide(rung: int, point: float, score: float) -> str | None:
            earlier = self.scores.setdefault(rung_key(point), [])
            reason = None
            if prunable:
                reason = prune_reason(score, earlier, self.factor, rung, point, self.kind)
            earlier.append(score)
            return reason

        return decide


@dataclass
class _Member:
    trainer: Any  # GanTrainer
    inherited: int
    spent: float = 0.0  # training seconds (a seconds budget)
    epochs_at_start: int = 0


def train_in_rungs(
    training: Any,
    workdir: Path,
    seeds: list[int],
    parent: Path | None,
    plan: RungPlan,
    score: Callable[[Path], float],
    decide: Decide | None,
    result: Any,
) -> list[Path]:
    """Collective on ``training.group``: train every member stage by stage, judging the
    candidate at each rung; returns the member generator files (after save). Records the
    rung scores in ``result.intermediate``; on a stop sets ``result.rung`` and raises
    :class:`Pruned`. ``training`` is fitness's member training (``start``, ``check``)."""
    group = training.group
    members = [_open(training, workdir, t, seed, parent, plan) for t, seed in enumerate(seeds)]
    result.inherited += sum(int(m.inherited > 0) for m in members)
    for index, point in enumerate(plan.points):
        for member in members:
            _advance(member, plan, point, group)
        finite = [m.trainer.losses_finite() for m in members]
        if not all(finite):
            _close(members)
            training.check(members[finite.index(False)].trainer)
        if index == len(plan.points) - 1:
            break
        mean = _rung_score(training, members, workdir, index, score)
        result.intermediate[rung_key(point)] = mean
        reason = decide(index, point, mean) if group.rank == 0 and decide is not None else None
        reason = group.bcast(reason, root=0)
        if reason is not None:
            result.rung = index
            _close(members)
            raise Pruned(reason)
    files: list[Path] = []
    for member in members:
        member.trainer.save(learning_curve=False)
        member.trainer.close()
        files += member.trainer.member_files()
    return files


def _open(
    training: Any, workdir: Path, t: int, seed: int, parent: Path | None, plan: RungPlan
) -> _Member:
    config = training.gan_config(seed)
    if plan.kind == "steps":  # epochs of gcd(rung points) steps: rungs fall on epoch ends
        config.trainer.steps_per_epoch = plan.unit
        config.trainer.epochs = int(plan.points[-1]) // plan.unit
    run_dir = workdir / f"member-{t}"
    source = None if parent is None else parent / run_dir.name
    trainer, inherited = training.start(run_dir, seed, source, config)
    return _Member(trainer, inherited, epochs_at_start=trainer.position.epoch)


def _advance(member: _Member, plan: RungPlan, point: float, group: MPI.Comm) -> None:
    """Train ``member`` up to the budget ``point`` (a seconds budget: at least one epoch)."""
    trainer = member.trainer
    if plan.kind != "seconds":
        target = member.epochs_at_start + round(point / plan.unit)
        if target > trainer.position.epoch:
            trainer.train(epochs=target - trainer.position.epoch)
        return
    while True:
        first = trainer.position.epoch == member.epochs_at_start
        if not group.bcast(first or member.spent < point, root=0):
            return
        began = time.perf_counter()
        trainer.train(epochs=1)
        member.spent += time.perf_counter() - began


def _rung_score(
    training: Any, members: list[_Member], workdir: Path, rung: int, score: Callable[[Path], float]
) -> float:
    """Mean score of the members' current generators (files under ``workdir/rungs``, scored
    in parallel across the group's ranks)."""
    from evogan.gan3d.model.conditions import KEY
    from evogan.gan3d.model.model_file import save_generator

    group = training.group
    folder = workdir / "rungs"
    if group.rank == 0:
        folder.mkdir(parents=True, exist_ok=True)
    group.Barrier()
    files: list[Path] = []
    for t, member in enumerate(members):
        trainer = member.trainer
        ranks = [0] if trainer.mode.replicas else list(range(group.size))
        for r in ranks:
            path = folder / f"rung-{rung}-member-{t}-rank-{r}.h5"
            if r == group.rank:
                meta = {"epochs": trainer.position.epoch, "rung": rung, KEY: trainer.trained_on}
                save_generator(path, trainer.config.spec, trainer.parallel.step.generator, meta)
            files.append(path)
    group.Barrier()
    files = files[: training.config.fitness.members]
    mine = {m: score(p) for m, p in enumerate(files) if m % group.size == group.rank}
    scores: dict[int, float] = {}
    for part in group.allgather(mine):
        scores.update(part)
    values = [scores[m] for m in range(len(files))]
    return math.nan if any(math.isnan(v) for v in values) else sum(values) / len(values)


def _close(members: list[_Member]) -> None:
    """Save and free every member training (its run directory shows what it trained)."""
    for member in members:
        member.trainer.save(learning_curve=False)
        member.trainer.close()
