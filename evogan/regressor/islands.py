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

import numpy as np
import torch

from evogan.config import dump
from evogan.config.regressor import RegressorConfig
from evogan.distributed.comm import check_layout, world_comm
from evogan.distributed.signals import catch_stop_signals
from evogan.errors import EvoganError, RunStopped
from evogan.engine import make_schedule
from evogan.islands.session import IslandSession
from evogan.islands.island import IslandModel, StopEvolution
from evogan.islands.migration import make_topology
from evogan.regressor.problem import RegressorProblem, load_and_check
from evogan.regressor.evolve import build_strategy, method_name
from evogan.regressor.report import Progress, epoch_test_mape, finish_run
from evogan.store import METRICS, MetricsWriter, RunDir, atomic_write, read_metrics, to_json
from evogan.store.manifest import check_resume_layout, write_manifest

ISLANDS = "islands"


def island_metrics(run: RunDir, island: int, islands: int) -> Path:
    """Where an island's metrics go: the run's own file when it is the only island."""
    if islands == 1:
        return run.file(METRICS)
    return run.path / ISLANDS / f"island-{island:04d}" / METRICS


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

    def execute(self, run_dir: str | Path | None, resume: bool) -> RunDir:
        cfg, world = self.cfg, self.world
        make_schedule(cfg.ga.rate_schedule, cfg.ga.mutation_rate, cfg.ga.schedule_milestones)
        make_topology(cfg.migration.topology, cfg.migration.k, cfg.migration.matrix)
        check_layout(world.size, cfg.islands.ranks_per_island, None)
        if resume:
            if run_dir is None:
                raise EvoganError("--resume needs the run directory to continue")
            run = RunDir(run_dir)
            check_resume_layout(run, world.size, cfg.islands.ranks_per_island)
        if not self.rank0:
            world.Barrier()  # rank 0 may be generating the shared default data set
        layout, train, test = load_and_check(cfg, cfg.ga.batch_size, self.announce)
        if self.rank0:
            world.Barrier()
        problem = RegressorProblem(
            layout,
            train,
            batch_size=cfg.ga.batch_size,
            mutation=cfg.ga.mutation,
            replace_sigma=cfg.ga.replace_sigma,
            eval_block=cfg.ga.eval_block,
        )
        session = IslandSession(world, cfg.seed, cfg.islands, cfg.migration, cfg.checkpoint)
        try:
            # From here a stop signal only sets the flag: the first generation polls it and
            # writes a checkpoint, so a run stopped this early is still resumable.
            with catch_stop_signals(session.flag):
                if not resume:
                    run = self._create_run(run_dir)
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
            f"{cfg.migration.topology} every {cfg.migration.interval} -> {run.path}"
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
        test: Any,
        run: RunDir,
        resume: bool,
    ) -> RunDir:
        cfg = self.cfg
        metrics_path = island_metrics(run, session.island_index, session.island_count)
        generation = session.resume_generation(run.path) if resume else None
        strategy = build_strategy(
            cfg,
            session.problem(problem),
            island=session.island_index,
            epoch_report=lambda genome: epoch_test_mape(
                lambda x: problem.predict(genome, x), test.x, test.y
            ),
        )
        session.attach(strategy, run.path)
        if generation is not None:
            session.restore(strategy, run.path, generation)
            if session.is_leader:
                _truncate_metrics(metrics_path, generation, strategy.start_epoch)
            self.announce(f"{self.method}: resumed {run.path} from generation {generation}")
        writer = MetricsWriter(metrics_path) if session.is_leader else None
        if writer is not None:
            stream = sys.stdout if self.rank0 else _Discard()
            strategy.observers.append(
                Progress(writer, cfg.ga.epochs, cfg.run.progress_every, stream=stream)
            )
        stopped = False
        try:
            try:
                result = strategy.run()
            except StopEvolution:
                stopped, result = True, None  # no result yet when stopped in generation 0
            strategy.save_checkpoint()
            stopped, counts = session.finish(strategy, stopped)
        finally:
            if writer is not None:
                writer.close()
        if stopped:
            why = session.flag.signal_name or "a signal on another rank"
            self.announce(
                f"{self.method}: stopped by {why} after generation {strategy.generation}; "
                f"checkpoints are in {run.path}/checkpoints"
            )
            launch = f"mpirun -n {self.world.size} " if self.world.size > 1 else ""
            raise RunStopped(f"{launch}evogan evolve --resume {run.path}")
        reports = session.gather(self._report(strategy, result, counts))
        if reports is not None:
            summary = self._summarise(run, problem, test, reports, session)
            self.announce(
                f"{self.method}: test MAPE {summary['test_mape']:.4f} after "
                f"{summary['generations']} generations ({summary['train_seconds']:.1f} s, "
                f"{summary['islands']} island(s)); summary in {run.file('summary.json')}"
            )
        return run

    def _report(self, strategy: IslandModel, result: Any, counts: dict[str, int]) -> dict[str, Any]:
        lineage = strategy.elite_lineage
        return {
            "island": strategy.island.index,
            "best": result.best.detach().cpu().numpy(),
            "best_fitness": result.best_fitness,
            "elite_fitness": result.elite_fitness,
            "generations": result.generations,
            "evaluations": result.evaluations,
            "train_seconds": result.train_seconds,
            "eval_seconds": result.eval_seconds,
            "wall_seconds": result.wall_seconds,
            "loop_seconds": result.loop_seconds,
            "epochs": result.epochs,
            "migration": counts,
            "migrant_bytes": strategy.migrant_bytes.summary(),
            "immigrants_used": strategy.immigrants_used,
            "immigrant_wins": strategy.immigrant_wins,
            "island_seconds": strategy.island_seconds,
            "island_cpu_seconds_share": strategy.island_cpu_seconds
            / max(strategy.train_cpu_seconds, 1e-12),
            "elite_lineage_bytes": None if lineage is None else len(lineage.to_bytes()),
            "elite_lineage_mutations": None if lineage is None else len(lineage),
            "gradient_steps": getattr(strategy, "gradient_steps", None),
        }

    def _summarise(
        self,
        run: RunDir,
        problem: RegressorProblem,
        test: Any,
        reports: list[dict[str, Any]],
        session: IslandSession,
    ) -> dict[str, Any]:
        cfg = self.cfg
        best = min(reports, key=lambda r: (_finite(r["best_fitness"]), r["island"]))
        genome = torch.from_numpy(best["best"])
        if session.island_count > 1:
            _write_global_epochs(run, reports)
        migrants = [r["migrant_bytes"] for r in reports if r["migrant_bytes"]["migrants"]]
        extra = {
            "eval_seconds": max(r["eval_seconds"] for r in reports),
            "eval_share": sum(r["eval_seconds"] for r in reports)
            / max(sum(r["train_seconds"] for r in reports), 1e-12),
            "eval_share_of_loop": sum(r["eval_seconds"] for r in reports)
            / max(sum(r["loop_seconds"] for r in reports), 1e-12),
            "train_events": len(problem.train),
            "test_events": len(test),
            "final_elite_fitness": best["elite_fitness"],
            "islands": session.island_count,
            "ranks": self.world.size,
            "ranks_per_island": cfg.islands.ranks_per_island,
            "best_island": best["island"],
            "evaluations_total": sum(r["evaluations"] for r in reports),
            "migration_mode": cfg.migration.mode,
            "migrations_sent": sum(r["migration"].get("messages_sent", 0) for r in reports),
            "migrations_received": sum(r["migration"].get("messages_received", 0) for r in reports),
            "migrants_sent": sum(r["migration"].get("migrants_sent", 0) for r in reports),
            "migrants_received": sum(r["migration"].get("migrants_received", 0) for r in reports),
            "migrations_late": sum(r["migration"].get("late", 0) for r in reports),
            "immigrants_used": sum(r["immigrants_used"] for r in reports),
            "immigrant_wins": sum(r["immigrant_wins"] for r in reports),
            "island_seconds": max(r["island_seconds"] for r in reports),
            "island_seconds_share": max(
                r["island_seconds"] / max(r["train_seconds"], 1e-12) for r in reports
            ),
            "island_cpu_seconds_share": max(r["island_cpu_seconds_share"] for r in reports),
            "bytes_per_migrant": _bytes_per_migrant(migrants, reports, problem.layout.size),
            "per_island": [
                {
                    key: r[key]
                    for key in (
                        "island",
                        "best_fitness",
                        "generations",
                        "evaluations",
                        "train_seconds",
                        "wall_seconds",
                        "immigrants_used",
                        "immigrant_wins",
                    )
                }
                for r in sorted(reports, key=lambda r: r["island"])
            ],
        }
        if best["gradient_steps"] is not None:
            extra["gradient_steps"] = best["gradient_steps"]
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
            test_energy=test.energy,
            test_prediction=problem.predict(genome, test.x),
            epochs=best["epochs"],
            generations=max(r["generations"] for r in reports),
            evaluations=best["evaluations"],
            train_seconds=max(r["train_seconds"] for r in reports),
            wall_seconds=max(r["wall_seconds"] for r in reports),
            extra=extra,
        )


class _Discard:
    """A text stream that drops everything (progress lines of islands other than rank 0)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


def _finite(value: float | None) -> float:
    return float("inf") if value is None or not np.isfinite(value) else float(value)


def _bytes_per_migrant(
    migrants: list[dict[str, Any]], reports: list[dict[str, Any]], size: int
) -> dict[str, Any]:
    """Mean bytes per migrant as raw weights and as actually sent (lineage deltas), and the
    whole lineage of the islands' final elites (what a migrant would cost with no delta)."""
    weights = 4 * size
    count = sum(m["migrants"] for m in migrants)
    whole = [r["elite_lineage_bytes"] for r in reports if r["elite_lineage_bytes"] is not None]
    return {
        "weights": weights,
        "lineage": sum(whole) / len(whole) if whole else None,
        "sent": sum(m["sent"] * m["migrants"] for m in migrants) / count if count else None,
        "migrants": count,
    }


def _write_global_epochs(run: RunDir, reports: list[dict[str, Any]]) -> None:
    """The run's metrics.jsonl for several islands: per epoch, the record of the island with
    the best reference fitness (its ``island`` field says which)."""
    lines = []
    epochs = max(len(r["epochs"]) for r in reports)
    for index in range(epochs):
        rows = [
            {**r["epochs"][index], "island": r["island"]}
            for r in reports
            if index < len(r["epochs"])
        ]
        lines.append(min(rows, key=lambda row: _finite(row.get("reference_fitness"))))
    run.write_text(METRICS, "".join(to_json(line) + "\n" for line in lines))


def _truncate_metrics(path: Path, generation: int, epoch: int) -> None:
    """Drop the records written after the checkpoint a resumed island restarts from
    (generations from ``generation`` on, epochs from ``epoch`` on)."""
    if not path.is_file():
        return
    kept = [
        record
        for record in read_metrics(path)
        if (record.get("kind") == "epoch" and record["epoch"] < epoch)
        or (record.get("kind") == "generation" and record["generation"] < generation)
    ]
    atomic_write(path, "".join(to_json(record) + "\n" for record in kept))
