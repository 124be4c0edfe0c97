"""The member trainings of one candidate: each on a :class:`GanTrainer` of its own, in process.

A ``steps`` or ``epochs`` budget trains once, a ``seconds`` budget trains epoch by epoch while
time is left; the trainer's own epoch records tell whether the losses stayed finite.
:func:`train_members` trains the members one after the other; with pruning,
:func:`train_in_rungs` opens them all at once and advances them stage by stage, so every member
reaches a rung before the candidate is judged on the mean score of the members' current
generators there (scored by the campaign's :class:`~evogan.search.scoring.Scorer`). The group
leader asks the backend's *decide* callback (:mod:`evogan.search.rungs`) and broadcasts the
answer: a reason to stop raises :class:`Pruned` on every rank of the group. A ``steps`` budget
is trained in epochs of ``gcd(rung points)`` steps so that every rung falls on an epoch end.

:func:`failure_of` turns what a training raised into the (status, reason) of a candidate the
campaign survives: ``pruned``, ``nan``, ``timeout``, ``oom``, ``error``. A
:class:`~evogan.errors.DataError` is the campaign's problem, not the candidate's: it ends the
command (on every rank), since the ranks that read good data would wait for the others forever.
"""

from __future__ import annotations

import math
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evogan.config.gan import Gan3dConfig
from evogan.config.run import RunConfig
from evogan.config.search import SearchConfig
from evogan.distributed.mpi import MPI
from evogan.errors import DataError, EvoganError
from evogan.gan3d.model.spec import GanSpec
from evogan.gan3d.training.trainer import GanTrainer
from evogan.search.evaluation import Evaluation
from evogan.search.inherit import seed_from_parent
from evogan.search.rungs import Decide, RungPlan, rung_key
from evogan.search.scoring import Scorer
from evogan.store import mlflow_runs as tracking

WORKDIR_ENTRIES = re.compile(r"^(member-\d+|rungs|outcome\.json|mlflow\.json)$")
"""What a candidate's or re-training's directory holds: member runs, rung generators, the
re-training's outcome (:mod:`evogan.search.final`), its MLflow run (``campaign.mlflow``)."""


def clear_workdir(workdir: Path) -> None:
    """Empty a training directory a killed session left, when it holds only what evogan
    writes there; a link, or any other entry, is refused in one line (nothing is deleted).
    An MLflow run file stays (the candidate trains again in the same MLflow run), and the
    MLflow runs of the member trainings deleted are ended KILLED."""
    if workdir.is_symlink():
        raise EvoganError(
            f"{workdir} is a symbolic link; evogan deletes a training directory it left to "
            "train afresh, and never through a link: remove the link"
        )
    others = [p.name for p in workdir.iterdir() if not WORKDIR_ENTRIES.match(p.name)]
    if others:
        raise EvoganError(
            f"{workdir} holds {others[0]!r}, which evogan did not write there, so it will not "
            "delete it to train afresh: move it away, or give another output directory"
        )
    for entry in workdir.iterdir():
        if entry.name == tracking.RUN_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            left = tracking.read_run(entry)
            if left is not None:
                left.end("KILLED")
            shutil.rmtree(entry)
        else:
            entry.unlink()
    if not any(workdir.iterdir()):
        workdir.rmdir()


class CandidateTimeout(Exception):
    """Raised on every rank of a group at the same step when a candidate runs out of time."""


class Diverged(Exception):
    """Training losses became NaN or infinite (decided by the group leader, on every rank)."""


class Pruned(Exception):
    """Raised on every rank of a group when its candidate is stopped at a rung."""


class MemberTraining:
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
        self.on_step = step_hook(group, start, config.budget.timeout_s, hook)

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
        run = RunConfig(progress_every=10**9, mlflow=self.config.campaign.mlflow)
        return Gan3dConfig(
            seed=seed, data=self.config.data, spec=self.spec, trainer=trainer, run=run
        )

    def start(
        self, run_dir: Path, seed: int, parent: Path | None, config: Gan3dConfig | None = None
    ) -> tuple[GanTrainer, int]:
        """A member's trainer (``config``, default :meth:`gan_config`), started from
        ``parent``'s weights when they fit, and the epochs inherited (0: from scratch)."""
        group = self.group
        config = self.gan_config(seed) if config is None else config
        inherited = 0
        if parent is not None and group.rank == 0:
            inherited = seed_from_parent(parent, run_dir, config, group.size)
        inherited = group.bcast(inherited, root=0)
        config.trainer.epochs += inherited
        step = self.on_step  # the campaign said what data it reads, once for all trainings
        if inherited > 0:
            resumed = GanTrainer.resume(run_dir, config, world=group, on_step=step, announce=False)
            return resumed, inherited
        opened = GanTrainer.open(config, run_dir, world=group, on_step=step, announce=False)
        return opened, inherited

    def check(self, trainer: GanTrainer) -> None:
        """Raise :class:`Diverged` (on every rank) when the last epoch's losses are not finite."""
        if not trainer.losses_finite():
            raise Diverged("training losses became NaN or infinite")

    def run(self, run_dir: Path, seed: int, parent: Path | None, result: Evaluation) -> list[Path]:
        """One member training; returns its generator file(s), one per member. A start from
        ``parent``'s weights is counted into ``result`` before training, so a member that then
        diverges still says where it started."""
        group, budget = self.group, self.config.budget
        began = time.perf_counter()  # a seconds budget counts the first epoch too
        trainer, inherited = self.start(run_dir, seed, parent)
        result.inherited += int(inherited > 0)
        with trainer:
            trainer.train()
            while budget.kind == "seconds" and trainer.losses_finite():
                if not group.bcast(time.perf_counter() - began < budget.amount, root=0):
                    break
                trainer.train(epochs=1)
            trainer.save(learning_curve=False)  # a diverged member's still shows its metrics
        self.check(trainer)
        return trainer.member_files()


def step_hook(
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


def failure_of(exc: Exception, config: SearchConfig) -> tuple[str, str] | None:
    """(status, reason) of a training failure the campaign survives; None for any other (a
    DataError too: bad data fails every candidate, maybe on only some of a group's ranks)."""
    if isinstance(exc, Pruned):
        return "pruned", str(exc)
    if isinstance(exc, Diverged):
        return "nan", str(exc)
    if isinstance(exc, CandidateTimeout):
        return "timeout", f"ran past budget.timeout_s = {config.budget.timeout_s:g} s"
    if isinstance(exc, torch.OutOfMemoryError):
        return "oom", f"out of memory: {str(exc).splitlines()[0]}"
    if isinstance(exc, MemoryError):
        return "oom", "out of host memory"
    if isinstance(exc, EvoganError) and not isinstance(exc, DataError):
        return "error", str(exc)
    return None


def train_members(
    training: MemberTraining,
    workdir: Path,
    seeds: list[int],
    parent: Path | None,
    result: Evaluation,
    first: int = 0,
) -> list[Path]:
    """Collective on ``training.group``: every member training in turn (``seeds[t]`` in
    ``workdir/member-{first + t}``, from the same member of ``parent``); returns the member
    generator files and counts the inherited starts into ``result``."""
    files: list[Path] = []
    for t, seed in enumerate(seeds):
        run_dir = workdir / f"member-{first + t}"
        source = None if parent is None else parent / run_dir.name
        files += training.run(run_dir, seed, source, result)
    return files


def train_in_rungs(
    training: MemberTraining,
    workdir: Path,
    seeds: list[int],
    parent: Path | None,
    plan: RungPlan,
    scorer: Scorer,
    decide: Decide | None,
    result: Evaluation,
) -> list[Path]:
    """Collective on ``training.group``: train every member stage by stage, judging the
    candidate at each rung; returns the member generator files (after save). Records the
    rung scores in ``result.intermediate``; on a stop sets ``result.rung`` and raises
    :class:`Pruned`."""
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
        mean = _rung_score(training, members, workdir, index, scorer)
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


@dataclass
class _Member:
    trainer: GanTrainer
    inherited: int
    spent: float = 0.0  # training seconds (a seconds budget)
    epochs_at_start: int = 0


def _open(
    training: MemberTraining, workdir: Path, t: int, seed: int, parent: Path | None, plan: RungPlan
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
    training: MemberTraining, members: list[_Member], workdir: Path, rung: int, scorer: Scorer
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
    values = [s.value for s in scorer.score_all(files[: training.config.fitness.members], group)]
    return math.nan if any(math.isnan(v) for v in values) else sum(values) / len(values)


def _close(members: list[_Member]) -> None:
    """Save and free every member training (its run directory shows what it trained)."""
    for member in members:
        member.trainer.save(learning_curve=False)
        member.trainer.close()
