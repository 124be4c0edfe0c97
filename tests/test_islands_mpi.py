"""The island model under real ``mpirun -n 2`` and ``-n 4 --oversubscribe``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from evogan.errors import EXIT_STOPPED
from evogan.plots.regressor_curve import progress_records
from evogan.store import load_weights, read_metrics
from tests.conftest import (
    REPO,
    evogan_here,
    kill_job,
    launch,
    mpirun,
    rank_pid,
    untimed,
    wait_for,
    write_config,
)

SCRIPT = str(REPO / "tests" / "mpi_scripts" / "islands_run.py")
TINY = {
    "task": "regressor",
    "seed": 3,
    "data": {"synthetic": {"events": 300}, "train_events": 240, "test_events": 60},
    "ga": {"batch_size": 32, "epochs": 2, "schedule_milestones": [1]},
    "run": {"progress_every": 1000},
    "migration": {"every": 2},
    "checkpoint": {"every": 4},
}
SYNC_LONG = [
    "--set",
    "ga.epochs=10",
    "--set",
    "migration.mode=sync",
    "--set",
    "checkpoint.every=20",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    return write_config(tmp_path_factory, "islands", TINY)


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def _same_run(a: Path, b: Path, islands: int, differ: tuple[str, ...] = ()) -> None:
    first, _ = load_weights(a / "best_model.h5")
    second, _ = load_weights(b / "best_model.h5")
    assert all(torch.equal(first[k], second[k]) for k in first)
    summaries = [{k: v for k, v in _summary(run).items() if k not in differ} for run in (a, b)]
    assert [untimed(s) for s in summaries[:1]] == [untimed(s) for s in summaries[1:]]
    for island in range(islands):
        metrics = f"islands/island-{island:04d}/metrics.jsonl"
        assert [untimed(r) for r in read_metrics(a / metrics)] == [
            untimed(r) for r in read_metrics(b / metrics)
        ]


@pytest.fixture(scope="module")
def two_islands(config, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Two islands of one rank, sync mode."""
    run = tmp_path_factory.mktemp("two_islands") / "run"
    done = mpirun(2, [SCRIPT, str(config), str(run), "--set", "migration.mode=sync"], timeout=60)
    assert done.returncode == 0, done.stderr
    return run, done


def test_two_islands_exchange_and_use_migrants(two_islands, tmp_path) -> None:
    run, done = two_islands
    summary = _summary(run)
    assert (summary["islands"], summary["ranks"]) == (2, 2)
    assert summary["migrations_sent"] == 2 * (summary["generations"] // 2)
    assert summary["migrations_received"] == summary["migrations_sent"]  # sync: none late
    assert summary["migrations_received"] > 0 and summary["immigrants_used"] > 0
    sizes = summary["bytes_per_migrant"]
    assert sizes["weights"] == 4 * summary["params"] and 0 < sizes["sent"] < sizes["weights"]
    assert sizes["sent"] < sizes["lineage"] < sizes["weights"]  # lineage deltas are smaller
    assert {p.name for p in run.iterdir()} >= {
        "manifest.json",
        "checkpoints",
        "islands",
        "metrics.jsonl",
        "summary.json",
        "learning_curve.png",
    }
    assert set(progress_records(run)) == {"island 0", "island 1"}  # one training line each
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["layout"]["world_size"] == 2 and manifest["seeds"]["root"] == 3
    for island in (0, 1):
        records = read_metrics(run / f"islands/island-{island:04d}/metrics.jsonl", "epoch")
        assert len(records) == 2
    assert "2 island(s)" in done.stdout
    figures = tmp_path / "figures"
    compared = evogan_here("compare", str(run), "--out", str(figures))
    assert compared.returncode == 0, compared.stderr
    assert (figures / "island_curves.png").stat().st_size > 10_000


def test_islands_of_two_ranks_share_evaluation_exactly(config, two_islands, tmp_path) -> None:
    run = tmp_path / "run"
    args = [
        SCRIPT,
        str(config),
        str(run),
        "--set",
        "migration.mode=sync",
        "--set",
        "islands.ranks_per_island=2",
    ]
    done = mpirun(4, args, timeout=90)
    assert done.returncode == 0, done.stderr
    summary = _summary(run)
    assert (summary["islands"], summary["ranks"], summary["ranks_per_island"]) == (2, 4, 2)
    _same_run(two_islands[0], run, 2, differ=("ranks", "ranks_per_island"))  # nothing else


def test_async_run_finishes_with_one_slow_island(config, tmp_path) -> None:
    run = tmp_path / "run"
    args = [
        SCRIPT,
        str(config),
        str(run),
        "--slow-rank",
        "3",
        "--slow-seconds",
        "0.12",
        "--set",
        "migration.topology=full",
        "--set",
        "migration.every=1",
    ]
    done = mpirun(4, args, timeout=90)
    assert done.returncode == 0, done.stderr
    summary = _summary(run)
    per_island = {row["island"]: row for row in summary["per_island"]}
    slow = per_island[3]["wall_seconds"]
    assert slow > 14 * 0.12  # 14 generations of sleeping evaluations
    assert all(per_island[i]["wall_seconds"] < slow / 2 for i in (0, 1, 2))  # never waited
    assert summary["migrations_received"] > 0


def test_sync_runs_are_identical_and_survive_a_kill(config, two_islands, tmp_path) -> None:
    """The run of ``two_islands`` again, with rank 1's evaluations slowed (which changes no
    result) so that a SIGKILL lands mid-run: the resume is refused without --force (no clean
    stop), and with it ends as the uninterrupted run did, bit for bit."""
    killed = tmp_path / "killed"
    slow = ["--slow-rank", "1", "--slow-seconds", "0.2"]  # 10 generations left take 2 s at least
    process = launch(2, [SCRIPT, str(config), str(killed), "--set", "migration.mode=sync", *slow])
    for island in (0, 1):  # a complete checkpoint of every island to resume from
        wait_for(killed / f"checkpoints/island-{island:04d}/gen-*.h5", process, timeout=40)
    kill_job(process)
    assert not (killed / "summary.json").exists(), "the run ended before the kill"
    refused = evogan_mpi(2, ["evolve", "--resume", str(killed)])  # killed: no clean stop
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert f"resume it with --resume {killed} --force" in refused.stderr
    resumed = evogan_mpi(2, ["evolve", "--resume", str(killed), "--force"])
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed" in resumed.stdout
    _same_run(two_islands[0], killed, 2)


def test_a_signal_on_an_islands_second_rank_stops_the_run(config, tmp_path) -> None:
    """Only the island's leader takes part in the stop agreement: the other rank's signal
    must reach it, as a user's ``kill -TERM`` of one rank or a node's own shutdown does."""
    run = tmp_path / "run"
    island = ["--set", "islands.ranks_per_island=2", "--set", "ga.epochs=40"]
    early = ["--set", "checkpoint.every=4"]
    process = launch(2, [SCRIPT, str(config), str(run), *SYNC_LONG, *island, *early])
    wait_for(run / "checkpoints/island-0000/gen-*.h5", process, timeout=40)
    os.kill(rank_pid(process, 1), signal.SIGTERM)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == EXIT_STOPPED, err[-2000:]
    assert f"resume with: mpirun -n 2 --oversubscribe evogan evolve --resume {run}" in err
    assert json.loads((run / "status.json").read_text())["status"] == "stopped"


def test_a_failing_rank_ends_the_job_promptly(config, tmp_path) -> None:
    started = time.monotonic()
    done = mpirun(
        2,
        [SCRIPT, str(config), str(tmp_path / "run"), "--fail-rank", "1", "--fail-after", "5"],
        timeout=60,
    )
    assert done.returncode == 1
    assert time.monotonic() - started < 30
    errors = [line for line in done.stderr.splitlines() if line.startswith("evogan:")]
    assert len(errors) == 1 and "rank 1 of 2" in errors[0] and "deliberate failure" in errors[0]
    assert "MPI_ABORT" not in done.stderr
    # mpirun ended rank 0 with SIGTERM after rank 1 had gone: a crash, not a stop to note
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["status"] == "running" and "signal" not in status


def evogan_mpi(ranks: int, args: list[str]) -> subprocess.CompletedProcess[str]:
    return mpirun(ranks, ["-m", "evogan", *args], timeout=60)


def test_an_island_of_two_ranks_re_evaluates_as_one_rank_does(config, tmp_path) -> None:
    """Staged re-evaluation splits the challenger and the elite over the island's ranks and
    gathers their per-event losses: the run is the one-rank run, bit for bit."""
    staged = [
        *("--set", "ga.acceptance=reevaluate", "--set", "ga.reevaluation_events=64"),
        *("--set", "ga.reevaluation_first=16", "--set", "ga.step_adaptation=success_rule"),
        *("--set", "ga.mutation_rate=0.01", "--set", "ga.rate_schedule=constant"),
        # sync: the stop poll (and the global_best it records) every interval, not on a clock
        *("--set", "migration.mode=sync", "--set", "ga.epochs=1"),
    ]
    runs = {ranks: tmp_path / f"ranks-{ranks}" for ranks in (1, 2)}
    for ranks, run in runs.items():
        extra = ["--set", f"islands.ranks_per_island={ranks}"]
        done = mpirun(ranks, [SCRIPT, str(config), str(run), *staged, *extra], timeout=90)
        assert done.returncode == 0, done.stderr
    assert _summary(runs[2])["ranks_per_island"] == 2
    _same_run(runs[1], runs[2], 0, differ=("ranks", "ranks_per_island"))  # one island: root
    records = [[untimed(r) for r in read_metrics(run / "metrics.jsonl")] for run in runs.values()]
    assert records[0] == records[1] and len(records[0]) > 7


def test_the_island_smoke_config_ends_where_islands_show_their_worth(tmp_path) -> None:
    """configs/islands_smoke.yaml as its comment runs it (4 ranks on a small machine): the
    islands trade migrants and end below 10% test MAPE, where one island of the same length
    ends at about 10%."""
    run = tmp_path / "smoke"
    config = str(REPO / "configs" / "islands_smoke.yaml")
    done = mpirun(4, ["-m", "evogan", "evolve", config, "--run-dir", str(run)], timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = _summary(run)
    assert summary["islands"] == 4 and summary["immigrants_used"] > 0
    assert summary["test_mape"] < 0.10, summary["test_mape"]
