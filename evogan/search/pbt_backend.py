"""PBT backend: one worker per rank group, trained segment by segment, exploiting the best.

The world is split as for the GA (:class:`evogan.islands.session.IslandSession`): a group of
``ranks_per_group`` ranks trains one worker, and its leader drives it through the campaign's
scheduler like a GA island drives its candidates: every segment is a job that trains
``pbt.interval`` from the checkpoint of the worker's previous segment (weight inheritance,
:mod:`evogan.search.inherit`) and is scored with the campaign's fitness. After each segment the
leaders exchange their rows (one ``allgather``), agree on a stop, and every leader takes the
same decision (:func:`evogan.search.pbt.exploit_explore`, random stream from the campaign seed
and the segment): a worker that exploits starts its next segment from the copied worker's
checkpoint with the perturbed hyper-parameters, and its row records ``exploit`` (from which
row, at which segment, the perturbation). Segments are synchronous, so a campaign is
reproducible and a resumed one takes the rows the table holds and decides again exactly as
before; groups wait for the slowest worker at each segment end (the busy fraction shows it).
World rank 0 mirrors the table into the Optuna journal, one trial per worker.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from evogan.distributed.mpi import MPI
from evogan.distributed.signals import StopFlag
from evogan.islands.session import IslandSession
from evogan.search.follow import follow_candidates
from evogan.search.journal import mirror_table
from evogan.search.pbt import (
    Exploit,
    WorkerMirror,
    exploit_explore,
    score_point,
    segment_count,
    segment_id,
)
from evogan.search.scheduler import Session, refused_row, run_job, serve_leader
from evogan.seeding import numpy_generator


def run_pbt(session: Session, world: MPI.Comm, flag: StopFlag) -> bool:
    """Train this rank's worker through every segment; returns whether a stop ended it early."""
    config = session.config
    islands = IslandSession(world, config.ranks_per_group, agreement="sync", flag=flag)
    session.group = islands.island_index
    segments = segment_count(config)
    mirror = partial(WorkerMirror, segments=segments)
    try:
        show = world.rank == 0
        with (
            follow_candidates(session.campaign, segments * islands.island_count, show),
            mirror_table(session, show, mirror),
        ):
            if islands.is_leader:
                stopped = _lead_worker(session, islands)
            else:
                stopped = serve_leader(session, islands)
    finally:
        islands.close()
    return stopped


def _lead_worker(session: Session, islands: IslandSession) -> bool:
    config, worker = session.config, islands.island_index
    writer = f"worker-{worker:03d}"
    finished = session.campaign.finished()
    segments = segment_count(config)
    if worker == 0 and config.start_from_base:
        genome = session.space.base_genome()
    else:
        genome = session.space.sample(
            numpy_generator(config.seed, "search", "pbt", "worker", worker)
        )
    job = _job(config.pbt.interval, worker, 0, segments, genome, None, None)
    stopped = False
    for segment in range(segments):
        if islands.agreement.poll():
            stopped = True
            break
        row = finished.get(job["id"])
        if row is None:  # not yet trained (a resumed campaign takes the rows the table holds)
            row = _train(session, islands, job, segment)
            session.campaign.append(writer, row)
        rows = islands.leaders.allgather(row)
        if segment == segments - 1:
            break
        rng = numpy_generator(config.seed, "search", "pbt", "segment", segment)
        fitness = [r["fitness"] for r in rows]
        exploits = exploit_explore(
            fitness, [r["genome"] for r in rows], session.space, config.pbt, rng
        )
        if exploits is None:
            if islands.world.rank == 0:
                print(
                    f"search: pbt: every worker failed at segment {segment}; stopping", flush=True
                )
            break
        job = _next_job(
            config.pbt.interval, rows, worker, segment + 1, segments, exploits.get(worker)
        )
    islands.island.bcast(None, root=0)
    stopped, _ = islands.finish(stopped)
    return stopped


def _train(
    session: Session, islands: IslandSession, job: dict[str, Any], segment: int
) -> dict[str, Any]:
    """The segment's row: trained on the group, or refused when its genome makes no spec."""
    reason = session.space.check(job["genome"])
    if reason is not None:
        session.count("invalid")
        return refused_row(session, job, reason)
    islands.island.bcast(job, root=0)
    row = run_job(session, islands.island, job)
    row["intermediate"] = score_point(session.config, segment, row)
    return row


def _job(
    interval: float,
    worker: int,
    segment: int,
    segments: int,
    genome: dict[str, Any],
    parent: str | None,
    exploit: dict[str, Any] | None,
) -> dict[str, Any]:
    job = {
        "id": segment_id(worker, segment),
        "worker": worker,
        "segment": segment,
        "segment_budget": interval,
        "partial": segment < segments - 1,  # trained part of the budget: never ranked best
        "exploit": exploit,
        "genome": genome,
    }
    if parent is not None:
        job["inherit_from"] = parent
    return job


def _next_job(
    interval: float,
    rows: list[dict[str, Any]],
    worker: int,
    segment: int,
    segments: int,
    exploit: Exploit | None,
) -> dict[str, Any]:
    """The worker's next segment: on from its own checkpoint, or from the copied worker's."""
    mine = rows[worker]
    if exploit is None:
        return _job(interval, worker, segment, segments, mine["genome"], mine["id"], None)
    source = rows[exploit.source]
    record = {
        "from": source["id"],
        "from_worker": exploit.source,
        "from_fitness": source["fitness"],
        "replaced_fitness": mine["fitness"],
        "perturbation": exploit.perturbation,
    }
    return _job(interval, worker, segment, segments, exploit.genome, source["id"], record)
