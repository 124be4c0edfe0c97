"""Optuna backend: one rank owns the study (ask/tell) and hands trials to rank groups over MPI.

World rank 0 owns the study and also leads group 0, so no rank only waits. The study lives in
``CAMPAIGN/study.journal`` (Optuna's JournalStorage over a JournalFileBackend: one append-only
file written by the one owner, no database server, opened by ``optuna.load_study`` and by
optuna-dashboard). Other group leaders send their finished candidate and ask for the next trial
(:attr:`Tag.SEARCH_RESULT` / :attr:`Tag.SEARCH_TRIAL`); the owner answers between its own
candidates and from its training loop after every step, so a leader waits at most one step.

With ``pruning`` on, every group leader reports its candidate's rung scores to the owner
(:attr:`Tag.SEARCH_RUNG`), which calls ``trial.report`` and answers with Optuna's
``trial.should_prune`` (:attr:`Tag.SEARCH_PRUNE`); pruned trials are told ``PRUNED``, and
optuna-dashboard shows every trial's intermediate values.

Invalid genomes are told as failed trials with ``status = invalid`` before any rank sees them.
On resume, trials left running by the killed session are failed and enqueued again with the
same parameters (re-run); trials the table holds are told from the table instead.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from evogan.config.search import SearchConfig
from evogan.distributed.comm import split_layout
from evogan.distributed.mpi import MPI
from evogan.distributed.signals import StopFlag
from evogan.distributed.tags import Tag
from evogan.errors import ConfigError, EvoganError
from evogan.search.campaign import STUDY
from evogan.search.follow import follow_candidates
from evogan.search.journal import (
    STUDY_NAME,
    intermediate_values,
    open_journal,
    trial_params,
    user_attrs,
)
from evogan.search.rungs import rung_plan
from evogan.search.scheduler import Session, refused_row, run_job

__all__ = ["STUDY_NAME", "StudyOwner", "make_pruner", "make_sampler", "open_study", "run_optuna"]
WRITER = "study"
MAX_INVALID_IN_A_ROW = 1000


def open_study(config: SearchConfig, path: str) -> Any:
    """The campaign's study (created or loaded) with the configured sampler and pruner."""
    objectives = 1 + int(config.fitness.second_objective != "none")
    sampler, pruner = make_sampler(config, objectives), make_pruner(config)
    return open_journal(path, objectives, sampler=sampler, pruner=pruner)


def make_pruner(config: SearchConfig) -> Any:
    """Optuna's own pruner for ``pruning.kind``; trials report their rung scores at integer
    steps (budget units), the first rung at ``min_resource``."""
    import optuna

    plan = rung_plan(config)
    if plan is None:
        return optuna.pruners.NopPruner()
    factor = config.pruning.reduction_factor
    low = max(1, round(plan.points[0]))
    if config.pruning.kind == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=low, reduction_factor=factor)
    high = max(low, round(plan.points[-1]))
    return optuna.pruners.HyperbandPruner(
        min_resource=low, max_resource=high, reduction_factor=factor
    )


def make_sampler(config: SearchConfig, objectives: int) -> Any:
    import optuna

    settings, seed = config.optuna, config.seed
    if settings.sampler == "tpe":
        return optuna.samplers.TPESampler(n_startup_trials=settings.startup_trials, seed=seed)
    if settings.sampler == "nsga2":
        return optuna.samplers.NSGAIISampler(population_size=settings.population, seed=seed)
    if settings.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if objectives > 1:
        raise ConfigError("optuna.sampler = 'cmaes' optimises one objective; use tpe or nsga2")
    try:
        import cmaes  # noqa: F401  (Optuna's CMA-ES sampler needs it)
    except ImportError:
        raise ConfigError(
            "optuna.sampler = 'cmaes' needs the cmaes package: pip install cmaes"
        ) from None
    return optuna.samplers.CmaEsSampler(n_startup_trials=settings.startup_trials, seed=seed)


class StudyOwner:
    """World rank 0: asks the study for trials, tells results, serves the other leaders."""

    def __init__(
        self, session: Session, comm: MPI.Comm, leaders: list[int], flag: StopFlag
    ) -> None:
        self.session = session
        self.config = session.config
        self.comm = comm
        self.flag = flag
        self.study = open_study(self.config, str(session.campaign.path / STUDY))
        self.finished = session.campaign.finished()
        self.running: dict[str, Any] = {}  # job id -> optuna trial
        self.active = set(leaders) - {comm.rank}  # the other group leaders still working
        self.handed = sum(1 for row in self.finished.values() if row["status"] != "invalid")
        if self.config.start_from_base and not self.study.trials:
            params, _ = trial_params(session.space.base_genome(), session.space)
            self.study.enqueue_trial(params)
        self._recover()

    def _recover(self) -> None:
        """Trials a killed session left running: told from the table, or failed and re-queued."""
        from optuna.trial import TrialState

        for trial in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            row = self.finished.get(_trial_id(trial.number))
            if row is not None:
                self._tell(trial.number, row)
                continue
            self.study.tell(trial.number, state=TrialState.FAIL)
            self.study.enqueue_trial(trial.params, user_attrs={"rerun_of": trial.number})
            self.session.count("rerun")

    def next_job(self) -> dict[str, Any] | None:
        """A valid trial as a job, or None when the budget is handed out or a stop came."""
        if self.flag.raised or self.handed >= self.config.candidates:
            return None
        space = self.session.space
        for _ in range(MAX_INVALID_IN_A_ROW):
            trial = self.study.ask()
            genome = space.suggest(trial)
            job = {"id": _trial_id(trial.number), "trial": trial.number, "genome": genome}
            reason = space.check(genome)
            if reason is None:
                self.running[job["id"]] = trial
                self.handed += 1
                return job
            self.session.count("invalid")
            self.session.count("rejected")
            row = refused_row(self.session, job, reason)
            self.session.campaign.append(WRITER, row)
            self._tell(trial, row)
        raise EvoganError(
            f"{MAX_INVALID_IN_A_ROW} trials in a row made invalid specs; narrow the space so "
            "that most genomes build (see the reasons in the campaign table)"
        )

    def report(self, job_id: str, point: float, value: float) -> str | None:
        """A candidate's rung score, told to its trial (``trial.report``); the reason to stop
        it when Optuna's pruner says so (``trial.should_prune``), else None."""
        trial = self.running.get(job_id)
        if trial is None:
            return None
        step = round(point)
        trial.report(value, step)
        if not trial.should_prune():
            return None
        kind = self.config.pruning.kind.replace("_", " ")
        return f"pruned by Optuna's {kind} pruner at step {step}: score {value:.4f}"

    def record(self, row: dict[str, Any]) -> None:
        """Table first, then the study: a kill in between is healed by :meth:`_recover`."""
        self.session.campaign.append(WRITER, row)
        self._tell(self.running.pop(row["id"], row["trial"]), row)

    def _tell(self, trial: Any, row: dict[str, Any]) -> None:
        """Tell a Trial (its user attributes get status and reason) or a trial number."""
        from optuna.trial import TrialState

        if hasattr(trial, "set_user_attr"):
            for key, value in user_attrs(row).items():
                trial.set_user_attr(key, value)
            steps = intermediate_values(row)
            if row["status"] == "ok" and steps:  # the full budget ends the learning curve
                trial.report(steps[max(steps)], max(steps))
        if row["status"] == "ok":
            self.study.tell(trial, row["objectives"])
        elif row["status"] == "pruned":
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, state=TrialState.FAIL)

    def serve(self, block: bool = False) -> None:
        """Answer every leader that reported a result or a rung score (waiting for one
        message when ``block``)."""
        status = MPI.Status()
        while block or self.comm.iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
            if block:
                self.comm.probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
            block = False
            source = status.Get_source()
            if status.Get_tag() == Tag.SEARCH_RUNG:
                job_id, point, value = self.comm.recv(source=source, tag=Tag.SEARCH_RUNG)
                reason = self.report(job_id, point, value)
                self.comm.send(reason, dest=source, tag=Tag.SEARCH_PRUNE)
                continue
            row, stopping = self.comm.recv(source=source, tag=Tag.SEARCH_RESULT, status=status)
            if row is not None:
                self.record(row)
            if stopping:
                self.flag.raised = True
            job = self.next_job()
            self.comm.send(job, dest=status.Get_source(), tag=Tag.SEARCH_TRIAL)
            if job is None:
                self.active.discard(status.Get_source())


def _trial_id(number: int) -> str:
    return f"t{number:05d}"


def run_optuna(session: Session, world: MPI.Comm, flag: StopFlag) -> bool:
    """Run trials on every group until the budget is spent; returns whether a stop ended it."""
    config = session.config
    layout = split_layout(world, config.ranks_per_group, None)
    group = layout.island
    comm = world.Dup()
    leader_ranks = world.allgather(world.rank if group.rank == 0 else -1)
    leaders = [r for r in leader_ranks if r >= 0]
    session.group = layout.island_index
    with follow_candidates(session.campaign, config.candidates, show=world.rank == 0):
        if world.rank == 0:
            owner = StudyOwner(session, comm, leaders, flag)
            _own_group(owner, group)
        elif group.rank == 0:
            _lead_group(session, group, comm, flag)
        else:
            while (job := group.bcast(None, root=0)) is not None:
                run_job(session, group, job)
        stopped = bool(world.allreduce(flag.raised, op=MPI.LOR))
    comm.Free()
    layout.free()
    return stopped


def _own_group(owner: StudyOwner, group: MPI.Comm) -> None:
    """The study owner's loop: serve, run one of its own trials, repeat; then drain."""

    def serve_during_training(_info: Any) -> None:
        owner.serve()

    while True:
        owner.serve()
        job = owner.next_job()
        group.bcast(job, root=0)
        if job is None:
            break
        decide = partial(_decide_here, owner, job["id"])
        row = run_job(owner.session, group, job, on_step=serve_during_training, decide=decide)
        owner.record(row)
    while owner.active:
        owner.serve(block=True)


def _lead_group(session: Session, group: MPI.Comm, comm: MPI.Comm, flag: StopFlag) -> None:
    row = None
    while True:
        comm.send((row, flag.raised), dest=0, tag=Tag.SEARCH_RESULT)
        job = comm.recv(source=0, tag=Tag.SEARCH_TRIAL)
        group.bcast(job, root=0)
        if job is None:
            return
        decide = partial(_ask_owner, comm, job["id"])
        row = run_job(session, group, job, decide=decide)


def _decide_here(owner: StudyOwner, job_id: str, _rung: int, point: float, value: float) -> Any:
    """The study owner's own group judges its rung with the study directly."""
    return owner.report(job_id, point, value)


def _ask_owner(comm: MPI.Comm, job_id: str, _rung: int, point: float, value: float) -> Any:
    """A group leader sends its rung score to the study owner and waits for the decision
    (the owner answers between its own steps, so at most one step later)."""
    comm.send((job_id, point, value), dest=0, tag=Tag.SEARCH_RUNG)
    return comm.recv(source=0, tag=Tag.SEARCH_PRUNE)
