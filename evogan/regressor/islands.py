"""One rank's part of ``evogan evolve`` for the regressor: every rank runs this, under mpirun or
alone (a world of one is one island through the same code).

Order matters for clean failures: every check that can fail (config, rank layout, resume
layout, data) runs before the first collective call, and rank 0 alone creates the run
directory and tells the others the outcome.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from evogan.config import dump
from evogan.config.regressor import RegressorConfig
from evogan.distributed.comm import check_layout, node_position, world_comm
from evogan.distributed.failure import rank0_decides
from evogan.distributed.launcher import resume_line
from evogan.distributed.signals import catch_stop_signals
from evogan.distributed.tags import Tag
from evogan.errors import EvoganError, RunStopped
from evogan.islands.codec import MigrantCodec
from evogan.islands.island import Island, IslandSettings
from evogan.islands.migration import check_matrix, make_policy, make_topology
from evogan.islands.session import IslandSession
from evogan.islands.state import CheckpointWriter, read_state
from evogan.regressor import island_report as report
from evogan.regressor.data import RegressorData, load_and_check
from evogan.regressor.problem import RegressorProblem, require_cuda
from evogan.regressor.readout import ReadoutStart
from evogan.regressor.report import (
    EXPERIMENT,
    Progress,
    epoch_test_mape,
    finish_run,
    percent,
    track_run,
)
from evogan.regressor.strategy import build_strategy, check_memory, method_name, schedules
from evogan.seeding import numpy_generator
from evogan.store import MetricsWriter, RunDir
from evogan.store import mlflow_runs as tracking
from evogan.store.manifest import check_resume_layout, write_manifest


def _quiet(line: str) -> None:
    del line


class IslandRun:
    """Set up, run and report one island of a regressor GA run (see the module docstring)."""

    def __init__(self, cfg: RegressorConfig, announce: Callable[[str], Any] = print) -> None:
        self.cfg = cfg
        self.world = world_comm()
        self.rank0 = self.world.rank == 0
        self.announce = announce if self.rank0 else _quiet
        self.method = method_name(cfg)
        self.tracked: tracking.TrackedRun | None = None  # rank 0's MLflow run (run.mlflow)

    def execute(self, run_dir: str | Path | None, resume: bool) -> RunDir:
        cfg, world = self.cfg, self.world
        schedules(cfg.ga)
        make_topology(cfg.migration.topology, cfg.migration.migrants, cfg.migration.matrix)
        check_layout(world.size, cfg.islands.ranks_per_island, None)
        if resume:
            if run_dir is None:
                raise EvoganError("--resume needs the run directory to continue")
            run = RunDir(run_dir)
            check_resume_layout(run, world.size, cfg.islands.ranks_per_island)
        device = rank_gpu(world) if cfg.ga.device == "cuda" else "cpu"  # refused before data
        if not self.rank0:
            world.Barrier()  # rank 0 may be generating the shared default data set
        layout, train, test = load_and_check(cfg, cfg.ga.batch_size, self.announce)
        rank0_decides(lambda: check_memory(cfg.ga, layout.size), world)
        if self.rank0:
            world.Barrier()
        problem = RegressorProblem(
            layout,
            train,
            batch_size=cfg.ga.batch_size,
            mutation=cfg.ga.mutation,
            replace_sigma=cfg.ga.replace_sigma,
            eval_block=cfg.ga.eval_block,
            device=device,
            readout=ReadoutStart.from_config(cfg.model),
        )
        session = IslandSession(world, cfg.islands.ranks_per_island, agreement=cfg.migration.mode)
        try:
            check_matrix(cfg.migration.matrix, session.island_count)
            # From here a stop signal only sets the flag: the first generation polls it and
            # writes a checkpoint, so a run stopped this early is still resumable.
            with catch_stop_signals(session.flag):
                if not resume:
                    run = self._create_run(run_dir)
                tracked = rank0_decides(lambda: track_run(run, cfg), world)
                self.tracked = tracked if self.rank0 else None
                with tracking.ending_on_error(self.tracked):
                    return self._start(session, problem, test, run, resume)
        finally:
            session.close()

    def _start(
        self,
        session: IslandSession,
        problem: RegressorProblem,
        test: Any,
        run: RunDir,
        resume: bool,
    ) -> RunDir:
        cfg, layout, train = self.cfg, problem.layout, problem.train
        layout_record = self._layout(session)  # collective: every rank takes part
        if self.rank0 and not resume:
            write_manifest(
                run,
                self._config(),
                layout_record,
                {
                    "root": cfg.seed,
                    "streams": "derive_seed(root, 'island', I, purpose)",
                    "migration": "derive_seed(root, 'migration'[, I])",
                },
            )
        self.announce(
            f"{self.method}: {layout.size} weights, {len(train)} training / {len(test)} test "
            f"events, 1+{cfg.ga.children} per generation, {session.island_count} island(s) "
            f"of {cfg.islands.ranks_per_island} rank(s), migration {cfg.migration.mode} "
            f"{cfg.migration.topology} every {cfg.migration.every} -> {run.path}"
        )
        return self._evolve(session, problem, test, run, resume)

    def _config(self) -> dict[str, Any]:
        import yaml

        return yaml.safe_load(dump(self.cfg))

    def _layout(self, session: IslandSession) -> dict[str, Any]:
        hosts = self.world.gather(session.layout.describe()["host"], root=0)
        return {**session.layout.describe(), "hosts": sorted(set(hosts or []))}

    def _create_run(self, run_dir: str | Path | None) -> RunDir:
        outcome: tuple[str, str] = ("", "")
        if self.rank0:
            try:
                run = RunDir.create(
                    self.method, root=self.cfg.run.root, name=self.cfg.run.name, path=run_dir
                )
                run.write_config(dump(self.cfg))
                outcome = ("ok", str(run.path))
            except EvoganError as exc:
                outcome = ("error", str(exc))
        outcome = self.world.bcast(outcome, root=0)
        if outcome[0] == "error":
            raise EvoganError(outcome[1])
        return RunDir(outcome[1])

    def _evolve(
        self,
        session: IslandSession,
        problem: RegressorProblem,
        test: RegressorData,
        run: RunDir,
        resume: bool,
    ) -> RunDir:
        cfg = self.cfg
        index = session.island_index
        metrics_path = report.island_metrics(run, index, session.island_count)
        sync = cfg.migration.mode == "sync"
        generation = session.resume_generation(run.path, common=sync) if resume else None
        island = self._island(session, problem, test, run)
        if generation is not None:
            island.load_state(read_state(run.path, index, generation))
            if session.is_leader:
                report.truncate_metrics(metrics_path, generation, island.strategy.start_epoch)
            self.announce(f"{self.method}: resumed {run.path} from generation {generation}")
        island_run = self._track_island(session, metrics_path)
        writer = MetricsWriter(metrics_path) if session.is_leader else None
        if writer is not None:
            stream = sys.stdout if self.rank0 else _Discard()
            island.strategy.observers.append(
                Progress(writer, cfg.ga.epochs, cfg.run.progress_every, stream=stream)
            )
        with tracking.ending_on_error(island_run):
            try:
                result = island.run()
                stopped, counts = session.finish(island.stopped)
            finally:
                if writer is not None:
                    writer.close()
        if island_run is not None:
            island_run.end("KILLED" if stopped else "FINISHED")
        if stopped:
            why = session.flag.signal_name or "a signal on another rank"
            self.announce(
                f"{self.method}: stopped by {why} after generation "
                f"{island.strategy.generation}; checkpoints are in {run.path}/checkpoints"
            )
            raise RunStopped(resume_line("evolve", run.path, self.world.size))
        reports = session.gather(report.island_report(island, result, counts))
        if reports is not None:
            summary = self._summarise(run, problem, test, reports, session.island_count)
            self.announce(
                f"{self.method}: test MAPE {percent(summary['test_mape'])} after "
                f"{summary['generations']} generations ({summary['train_seconds']:.1f} s, "
                f"{summary['islands']} island(s)); summary in {run.file('summary.json')}"
            )
        return run

    def _track_island(
        self, session: IslandSession, metrics_path: Path
    ) -> tracking.TrackedRun | None:
        """An island leader's MLflow run, nested under the run's, when there are several
        islands (one island's records are the run's own)."""
        if not session.is_leader or session.island_count == 1:
            return None
        return tracking.start(metrics_path.parent, self.cfg.run.mlflow, EXPERIMENT)

    def _island(
        self, session: IslandSession, problem: RegressorProblem, test: RegressorData, run: RunDir
    ) -> Island:
        """This rank's island: the configured strategy wrapped with the session's machinery."""
        cfg, mig, index = self.cfg, self.cfg.migration, session.island_index
        shared = session.problem(problem)
        strategy = build_strategy(
            cfg,
            shared,
            island=index,
            epoch_report=lambda genome: epoch_test_mape(
                lambda x: problem.predict(genome, x), test.x, test.y
            ),
        )
        codec = MigrantCodec(shared, mig.send)
        keys = ("migration",) if mig.mode == "sync" else ("migration", index)
        migration = session.start_migration(
            make_topology(mig.topology, mig.migrants, mig.matrix),
            mig.mode,
            numpy_generator(cfg.seed, *keys),
            int(Tag.MIGRANTS),
            codec.encode,
            codec.decode,
        )
        settings = IslandSettings(
            index=index,
            count=session.island_count,
            migrate_every=mig.every,
            migrants=mig.migrants,
            checkpoint_every=cfg.checkpoint.every,
        )
        writer = CheckpointWriter(run.path, index, cfg.checkpoint.keep)
        return Island(
            strategy,
            settings,
            policy=make_policy(mig.policy),
            codec=codec,
            migration=migration,
            group=session.group,
            agreement=session.agreement,
            flag=session.flag,
            checkpoint=writer if session.is_leader else None,
        )

    def _summarise(
        self,
        run: RunDir,
        problem: RegressorProblem,
        test: RegressorData,
        reports: list[dict[str, Any]],
        islands: int,
    ) -> dict[str, Any]:
        cfg = self.cfg
        best = report.best_report(reports)
        genome = torch.from_numpy(best["best"])
        if islands > 1:
            report.write_global_epochs(run, reports)
            if self.tracked is not None:  # the islands' records went to their own runs
                self.tracked.log(run.metrics())
        extra = {
            **report.time_fields(reports),
            "train_events": len(problem.train),
            "test_events": len(test),
            "final_elite_fitness": best["elite_fitness"],
            "islands": islands,
            "ranks": self.world.size,
            "ranks_per_island": cfg.islands.ranks_per_island,
            "best_island": best["island"],
            "evaluations_total": sum(r["evaluations"] for r in reports),
            "migration_mode": cfg.migration.mode,
            **report.migration_fields(reports, problem.layout.size),
        }
        if best["gradient_steps"] is not None:
            extra["gradient_steps"] = best["gradient_steps"]
            extra["discarded_refinements"] = best["discarded_refinements"]
            extra["lineage_note"] = (
                "hybrid RMSprop steps are not replayable from mutation seeds: migrants are sent "
                "as weights"
            )
        return finish_run(
            run,
            cfg,
            method=self.method,
            layout=problem.layout,
            best=genome,
            best_fitness=best["best_fitness"],
            test=test,
            test_prediction=problem.predict(genome, test.x),
            epochs=best["epochs"],
            generations=max(r["generations"] for r in reports),
            evaluations=best["evaluations"],
            train_seconds=max(r["train_seconds"] for r in reports),
            wall_seconds=max(r["wall_seconds"] for r in reports),
            extra=extra,
            tracked=self.tracked,
        )


class _Discard:
    """A text stream that drops everything (progress lines of islands other than rank 0)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


def rank_gpu(world: Any) -> str:
    """The GPU of this rank among those of its node (collective); refused in one line where
    torch sees none, before any data is read."""
    local, _ = node_position(world)
    require_cuda()
    return f"cuda:{local % torch.cuda.device_count()}"
