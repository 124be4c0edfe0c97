"""Running candidates on rank groups and recording them: what every backend shares.

A *job* is a JSON-able dict ``{"id", "genome", ...backend fields}`` made by a group leader (GA,
PBT) or the study owner (Optuna) and broadcast to the group; :func:`run_job` trains and scores it on
the group and turns the result into a table row (world rank 0 reports it from the table,
:mod:`evogan.search.follow`; what a group leader prints while training carries its group).
:class:`Session` holds the bookkeeping of one process for one run of the campaign (busy time,
elapsed campaign time, counters).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evogan.config.search import SearchConfig
from evogan.distributed.mpi import MPI
from evogan.distributed.signals import StopFlag
from evogan.islands.session import IslandSession
from evogan.logs import labelled_stdout
from evogan.progress import hushed
from evogan.search.campaign import Campaign
from evogan.search.evaluation import Evaluation
from evogan.search.fitness import evaluate
from evogan.search.rungs import Decide
from evogan.search.scoring import Scorer
from evogan.search.space import Space
from evogan.store import mlflow_runs as tracking

# A candidate's MLflow status by its table status (any other: FAILED).
RUN_STATUS = {"ok": "FINISHED", "pruned": "KILLED"}


@dataclass
class Session:
    """One process's view of one run (or resumed run) of a campaign."""

    config: SearchConfig
    space: Space
    campaign: Campaign
    scorer: Scorer
    number: int  # 0 for a fresh campaign, +1 per resume
    offset: float  # campaign seconds spent by earlier sessions
    started: float = field(default_factory=time.perf_counter)
    busy: float = 0.0  # seconds this rank spent training and scoring candidates
    counters: dict[str, int] = field(default_factory=dict)
    group: int = 0  # this rank's group (island) index, to label the lines its leader prints
    flag: StopFlag = field(default_factory=StopFlag)  # set by this rank's stop signals

    def count(self, name: str, amount: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + amount

    def elapsed(self) -> float:
        """Campaign time: earlier sessions plus this one so far."""
        return self.offset + time.perf_counter() - self.started

    def row(self, job: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        """A table row for ``job``: its fields, the active genome, timing and ``extra``."""
        return {
            **{k: v for k, v in job.items() if k != "genome"},
            "backend": self.config.backend,
            "genome": self.space.active(job["genome"]),
            "session": self.number,
            "elapsed_s": self.elapsed(),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **extra,
        }


def job_config(config: SearchConfig, job: dict[str, Any]) -> SearchConfig:
    """The config a job trains with: the campaign's, with the job's ``segment_budget`` as the
    budget's amount when it trains part of the campaign's budget (a PBT segment)."""
    if "segment_budget" not in job:
        return config
    budget = config.budget.model_copy(update={"amount": job["segment_budget"]})
    return config.model_copy(update={"budget": budget})


def run_job(
    session: Session,
    group: MPI.Comm,
    job: dict[str, Any],
    on_step: Callable[[Any], None] | None = None,
    decide: Decide | None = None,
) -> dict[str, Any]:
    """Collective on ``group``: train and score ``job``; its table row (same on every rank).
    With ``pruning`` on, the group leader's ``decide`` judges the candidate at each rung."""
    start = time.perf_counter()
    config = job_config(session.config, job)
    spec = session.space.spec(job["genome"])
    workdir = session.campaign.candidate_dir(job["id"])
    parent = job.get("inherit_from")
    parent_dir = None if parent is None else session.campaign.candidate_dir(parent)
    label = labelled_stdout(f"[group {session.group}] ") if group.rank == 0 else nullcontext()
    tracked = _track(session, group, job, workdir)
    # the search's own display reports candidates; trainers only count
    with label, hushed(), tracking.ending_on_error(tracked):
        result: Evaluation = evaluate(
            config,
            spec,
            group,
            workdir,
            session.scorer,
            on_step,
            parent_dir,
            rungs=config.pruning.kind != "none",
            decide=decide,
        )
    session.busy += time.perf_counter() - start
    ranks, raised = zip(*group.allgather((MPI.COMM_WORLD.rank, session.flag.raised)), strict=True)
    if any(raised):  # a signal on any rank of the group reaches its leader, which decides
        session.flag.raised = True
    second = session.config.fitness.second_objective
    extra = {**result.as_row(), "objectives": result.objectives(second), "ranks": list(ranks)}
    extra["wall_s"] = time.perf_counter() - start
    row = session.row(job, extra)
    if tracked is not None:
        tracked.log([row], kind="candidate", step=0)
        tags = {"evogan.status": row["status"], "evogan.reason": str(row.get("reason") or "")}
        tracked.end(RUN_STATUS.get(row["status"], "FAILED"), tags=tags)
    return row


def _track(
    session: Session, group: MPI.Comm, job: dict[str, Any], workdir: Path
) -> tracking.TrackedRun | None:
    """The candidate's MLflow run (``campaign.mlflow``), nested under the campaign's, opened
    by the group leader and held there only; params: the job and its active genes."""
    if group.rank != 0:
        return None
    params = {**job, "genome": session.space.active(job["genome"])}
    name = session.campaign.path.name
    return tracking.start(workdir, session.config.campaign.mlflow, name, params)


def serve_leader(session: Session, islands: IslandSession) -> bool:
    """A group's non-leader rank: run each job its leader broadcasts until the leader sends
    None; whether the campaign was stopped."""
    while (job := islands.island.bcast(None, root=0)) is not None:
        run_job(session, islands.island, job)
    stopped, _ = islands.finish(False)
    return stopped


def refused_row(session: Session, job: dict[str, Any], reason: str) -> dict[str, Any]:
    """A row for a genome rejected before training (invalid shape): worst fitness, no time."""
    second = session.config.fitness.second_objective
    worst = Evaluation("invalid", float("inf"), reason)
    extra = {**worst.as_row(), "objectives": worst.objectives(second), "ranks": [], "wall_s": 0.0}
    return session.row(job, extra)
