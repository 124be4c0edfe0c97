"""The member trainings of one candidate: each on a :class:`GanTrainer` of its own, in process.

A ``steps`` or ``epochs`` budget trains once, a ``seconds`` budget trains epoch by epoch while
time is left; the trainer's own epoch records tell whether the losses stayed finite. With
pruning, :func:`train_pruned` trains all members in rung stages (:mod:`evogan.search.rungs`).
:func:`failure_of` turns what a training raised into the (status, reason) of a candidate the
campaign survives: ``pruned``, ``nan``, ``timeout``, ``oom``, ``error``. A
:class:`~evogan.errors.DataError` is the campaign's problem, not the candidate's: it ends the
command (on every rank), since the ranks that read good data would wait for the others forever.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from evogan.config.gan import Gan3dConfig
from evogan.config.run import RunConfig
from evogan.config.search import SearchConfig
from evogan.distributed.mpi import MPI
from evogan.errors import DataError, EvoganError
from evogan.gan3d.spec import GanSpec
from evogan.gan3d.trainer import GanTrainer
from evogan.search.inherit import seed_from_parent
from evogan.search.rungs import Decide, Pruned, RungPlan, train_in_rungs

WORKDIR_ENTRIES = re.compile(r"^(member-\d+|rungs|outcome\.json)$")
"""What a candidate's or re-training's directory holds: member runs, rung generators, the
re-training's outcome (:mod:`evogan.search.final`)."""


def clear_workdir(workdir: Path) -> None:
    """Remove a training directory a killed session left, when it holds only what evogan
    writes there; a link, or any other entry, is refused in one line (nothing is deleted)."""
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
    shutil.rmtree(workdir)


class CandidateTimeout(Exception):
    """Raised on every rank of a group at the same step when a candidate runs out of time."""


class Diverged(Exception):
    """Training losses became NaN or infinite (decided by the group leader, on every rank)."""


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
        run = RunConfig(progress_every=10**9)
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
        if inherited > 0:
            return GanTrainer.resume(run_dir, config, world=group, on_step=self.on_step), inherited
        return GanTrainer.open(config, run_dir, world=group, on_step=self.on_step), inherited

    def check(self, trainer: GanTrainer) -> None:
        """Raise :class:`Diverged` (on every rank) when the last epoch's losses are not finite."""
        if not trainer.losses_finite():
            raise Diverged("training losses became NaN or infinite")

    def run(self, run_dir: Path, seed: int, parent: Path | None) -> tuple[list[Path], int]:
        """One member training; returns its generator file(s), one per member, and the epochs
        inherited from ``parent`` (0: trained from scratch)."""
        group, budget = self.group, self.config.budget
        began = time.perf_counter()  # a seconds budget counts the first epoch too
        trainer, inherited = self.start(run_dir, seed, parent)
        with trainer:
            trainer.train()
            while budget.kind == "seconds" and trainer.losses_finite():
                if not group.bcast(time.perf_counter() - began < budget.amount, root=0):
                    break
                trainer.train(epochs=1)
            trainer.save(learning_curve=False)  # a diverged member's still shows its metrics
        self.check(trainer)
        return trainer.member_files(), inherited


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


def train_pruned(
    training: MemberTraining,
    workdir: Path,
    seeds: list[int],
    parent: Path | None,
    result: Any,
    plan: RungPlan,
    score: Callable[[Path], float],
    decide: Decide | None,
) -> tuple[list[Path], tuple[str, str] | None]:
    """All member trainings in rung stages (:func:`evogan.search.rungs.train_in_rungs`)."""
    try:
        return train_in_rungs(training, workdir, seeds, parent, plan, score, decide, result), None
    except Exception as exc:
        failure = failure_of(exc, training.config)
        if failure is None:
            raise
        return [], failure


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
