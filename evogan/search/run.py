"""``evogan search``: open the campaign, prepare every rank, run a backend, write the summary."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from evogan.config.search import SearchConfig
from evogan.distributed.failure import rank0_decides
from evogan.distributed.launcher import resume_line
from evogan.distributed.mpi import MPI
from evogan.distributed.signals import StopFlag, catch_stop_signals
from evogan.errors import RunStopped
from evogan.search.campaign import Campaign, resolve_base
from evogan.search.pbt import pbt_summary, segment_count
from evogan.search.scheduler import Session
from evogan.search.scoring import Scorer, check_data
from evogan.search.space import Space
from evogan.search.summary import build_summary, trained
from evogan.store import BEST_MODEL as BEST
from evogan.store import mlflow_runs as tracking


def run_search(
    config: SearchConfig,
    *,
    config_path: Path | None = None,
    run_dir: Path | None = None,
    resume: Path | None = None,
    world: MPI.Comm | None = None,
) -> Campaign:
    """Run (or resume) a campaign on every rank of ``world``; returns it on every rank."""
    world = MPI.COMM_WORLD if world is None else world
    config = resolve_base(config, config_path)
    config.check_ranks(world.size)
    space = Space(config.space, config.spec)
    if config.start_from_base:
        space.base_genome()  # a base the genes cannot hold is refused before anything is written
    scorer = rank0_decides(lambda: check_data(config), world)  # before _open: nothing written
    campaign, number, offset, tracked = _open(config, world, run_dir, resume)
    with tracking.ending_on_error(tracked):
        session = Session(config, space, campaign, scorer, number, offset)
        if world.rank == 0:
            _announce(config, campaign, world.size, scorer, resumed=resume is not None)
        flag = session.flag
        world.Barrier()
        session.started = time.perf_counter()
        with catch_stop_signals(flag):
            stopped = _backend(config)(session, world, flag)
        wall = time.perf_counter() - session.started
        busy = world.gather(session.busy, root=0)
        counters = world.gather(session.counters, root=0)
        if world.rank == 0:
            _finish(config, campaign, number, world.size, wall, busy, counters, stopped)
        world.Barrier()
        resume_command = resume_line("search", campaign.path, world.size)
        if stopped:
            raise RunStopped(resume_command)
        from evogan.search.final import run_final

        run_final(config, campaign, world, resume_command, session.scorer)  # top 0: no test
    if tracked is not None:
        _end_tracking(tracked, campaign, number)
    return campaign


def _backend(config: SearchConfig) -> Callable[[Session, MPI.Comm, StopFlag], bool]:
    """The backend's run function: True when it was stopped by a signal."""
    if config.backend == "ga":
        from evogan.search.ga_backend import run_ga

        return run_ga
    if config.backend == "pbt":
        from evogan.search.pbt_backend import run_pbt

        return run_pbt
    from evogan.search.optuna_backend import run_optuna

    return run_optuna


def _end_tracking(tracked: tracking.TrackedRun, campaign: Campaign, session: int) -> None:
    """The campaign's MLflow run ends with the summary's figures (stepped by session), the
    summary and the best candidate's member models."""
    summary = campaign.summary()
    tracked.log([summary], kind="summary", step=session)
    files = [campaign.path / "summary.json"]
    if summary.get("best"):
        files += sorted(campaign.candidate_dir(summary["best"][0]["id"]).glob("member-*/" + BEST))
    tracked.end("FINISHED", files)


def _announce(
    config: SearchConfig, campaign: Campaign, ranks: int, scorer: Scorer, resumed: bool
) -> None:
    """The campaign's first line, and a note where the test split holds fewer showers than
    ``fitness.test_events`` asks for."""
    action = "resuming" if resumed else "starting"
    print(
        f"search: {action} {config.backend} campaign {campaign.path} on {ranks} rank(s), "
        f"{ranks // config.ranks_per_group} group(s) of {config.ranks_per_group}",
        flush=True,
    )
    held, wanted = len(scorer.energy), config.fitness.test_events
    if held < wanted:
        print(
            f"search: note: fitness.test_events = {wanted}, but the test split holds {held} "
            f"showers; every candidate is scored on all {held}",
            flush=True,
        )


def _open(
    config: SearchConfig, world: MPI.Comm, run_dir: Path | None, resume: Path | None
) -> tuple[Campaign, int, float, tracking.TrackedRun | None]:
    """Rank 0 creates or checks the directory and opens its MLflow run (``campaign.mlflow``,
    held by rank 0 only); every rank gets the answer or the same error."""

    def on_rank0() -> tuple[str, int, float, tracking.TrackedRun | None]:
        if resume is not None:
            campaign = Campaign.open(resume, config, world.size)
        else:
            campaign = Campaign.create(config, world.size, run_dir)
        params = config.model_dump(mode="json")
        name = campaign.path.name
        tracked = tracking.start(campaign.path, config.campaign.mlflow, name, params)
        number = campaign.start_session(world.size)
        return str(campaign.path), number, campaign.elapsed_offset(), tracked

    path, number, offset, tracked = rank0_decides(on_rank0, world)
    return Campaign(path), number, offset, tracked if world.rank == 0 else None


def _finish(
    config: SearchConfig,
    campaign: Campaign,
    number: int,
    world_size: int,
    wall: float,
    busy: list[float],
    counters: list[dict[str, int]],
    stopped: bool,
) -> None:
    total: dict[str, int] = {}
    for part in counters:
        for key, value in part.items():
            total[key] = total.get(key, 0) + value
    rows = campaign.rows()
    groups = world_size // config.ranks_per_group
    pbt = config.backend == "pbt"  # PBT's rows: every worker's segments
    summary = build_summary(
        rows,
        backend=config.backend,
        top=config.campaign.top,
        session=number,
        world_size=world_size,
        groups=groups,
        target=segment_count(config) * groups if pbt else config.candidates,
        wall_s=wall,
        busy_s=busy,
        counters=total,
        stopped=stopped,
    )
    if pbt:
        summary["pbt"] = pbt_summary(config, rows, groups)
    campaign.write_summary(summary)
    best = summary["best"][0] if summary["best"] else None
    line = f"search: {summary['candidates_trained']} candidate(s) trained"
    if best is not None:
        line += f", best {best['id']} fitness {best['fitness']:.4f}"
    line += (  # counted as evogan report does: refused before training (rejected, memory)
        f"; {len(rows) - len(trained(rows))} invalid genome(s) never trained, "
        f"{summary['invalid_genomes']['repaired']} repaired and trained; "
        f"ranks busy {100 * summary['busy_fraction']['mean']:.1f}% of {wall:.1f} s"
    )
    print(line, flush=True)
    print(f"search: wrote {campaign.path / 'summary.json'}", flush=True)
