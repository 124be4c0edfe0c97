"""How ``evogan`` ends under a real ``mpirun -n 2``: a user error is printed once by rank 0
(exit 2, no abort banner of MPI's own; the one-process RMSprop ``train`` refuses several ranks
before writing), SIGTERM to the ranks or SIGUSR1 to ``mpirun`` stops every rank with a
resumable checkpoint (exit 75), even before the first generation finished, and the printed
resume command completes the run; Ctrl-C to ``mpirun``, which ends the ranks before they can
stop, leaves a run that resumes without ``--force``. A search campaign's stop and resume:
tests/test_search_campaign.py."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evogan.distributed.launcher import find_mpirun
from evogan.errors import EXIT_STOPPED, EXIT_USER_ERROR
from tests.conftest import (
    REPO,
    evogan,
    launch,
    mpi_env,
    mpirun,
    run_launched,
    terminate_ranks,
    wait_for,
    write_config,
)
from tests.test_islands_mpi import SCRIPT, SYNC_LONG, TINY

SYNC_SHORT = ["--set", "ga.epochs=6", "--set", "migration.mode=sync", "--set", "checkpoint.every=4"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_config(tmp_path_factory, "cli_mpi", TINY)


def evogan_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("evogan:")]


def test_a_user_error_on_every_rank_is_printed_once(tiny, tmp_path) -> None:
    done = mpirun(2, ["-m", "evogan", "evolve", str(tmp_path / "absent.yaml")], timeout=60)
    assert done.returncode == EXIT_USER_ERROR
    assert evogan_lines(done.stderr) == [
        f"evogan: error: config file {tmp_path / 'absent.yaml'} does not exist; pass e.g. "
        "configs/smoke.yaml"
    ]
    assert "MPI_ABORT" not in done.stderr and "Traceback" not in done.stderr
    done = mpirun(2, ["-m", "evogan", "evolve", str(tiny), "--resume", str(tmp_path)], timeout=60)
    assert done.returncode == EXIT_USER_ERROR
    (line,) = evogan_lines(done.stderr)
    assert "continues with the run's own config" in line


def test_regressor_train_refuses_several_ranks_before_writing(tmp_path) -> None:
    config = str(REPO / "configs" / "smoke.yaml")
    args = ["-m", "evogan", "train", config, "--run-dir", "runs/x"]
    done = mpirun(2, args, timeout=60, cwd=tmp_path)
    assert done.returncode == EXIT_USER_ERROR
    assert evogan_lines(done.stderr) == [
        "evogan: error: evogan train for the regressor runs on one process (RMSprop), got 2 "
        "ranks; run it without mpirun, or use evogan evolve for the island GA"
    ]
    assert list(tmp_path.iterdir()) == []


def paste(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a printed ``mpirun ... evogan ...`` command as a shell would, with this
    environment's mpirun and Python."""
    words = shlex.split(command)
    evogan_at = words.index("evogan")
    assert words[0] == "mpirun", command
    line = [find_mpirun(), *words[1:evogan_at], sys.executable, "-m", *words[evogan_at:]]
    return run_launched(line, env=mpi_env(), cwd=REPO, timeout=timeout)


def test_sigterm_to_every_rank_stops_the_run_and_the_printed_command_resumes(
    tiny, tmp_path
) -> None:
    """SIGTERM to every rank, as srun sends it, mid-run: every rank stops within seconds with
    a checkpoint of the same generation on every island (sync mode), one line names the resume
    command, a resume without mpirun is refused, and the printed command, pasted, completes
    the run."""
    run = tmp_path / "run"
    args = ["-m", "evogan", "evolve", str(tiny), "--run-dir", str(run), *SYNC_SHORT]
    process = launch(2, args)
    wait_for(run / "checkpoints/island-0001/gen-*.h5", process)
    started = time.monotonic()
    terminate_ranks(process)
    out, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_STOPPED, err
    assert time.monotonic() - started < 10, "the ranks took too long to stop"
    assert "stopped by SIGTERM" in out, out
    command = f"mpirun -n 2 --oversubscribe evogan evolve --resume {run}"
    assert evogan_lines(err) == [f"evogan: stopped by a signal; resume with: {command}"]
    assert "Traceback" not in err and "MPI_ABORT" not in err
    assert json.loads((run / "status.json").read_text())["status"] == "stopped"
    last = [sorted((run / f"checkpoints/island-{i:04d}").glob("gen-*.h5"))[-1].name for i in (0, 1)]
    assert last[0] == last[1], f"islands stopped at different generations: {last}"
    assert not (run / "summary.json").exists()
    refused = evogan("evolve", "--resume", str(run))
    assert refused.returncode == EXIT_USER_ERROR, refused.stderr
    assert "resume it with mpirun -n 2" in refused.stderr and "Traceback" not in refused.stderr
    resumed = paste(command, timeout=90)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed" in resumed.stdout
    assert json.loads((run / "summary.json").read_text())["generations"] == 6 * (240 // 32)
    assert json.loads((run / "status.json").read_text())["status"] == "finished"


def test_sigusr1_to_mpirun_stops_every_rank_before_the_first_generation_ended(
    tiny, tmp_path
) -> None:
    """SIGUSR1 to mpirun, which Open MPI passes on to every rank as it is, as soon as the run
    exists: the stop the SIGTERM test resumes, reached through the launcher, with a
    checkpoint on every island although no generation had ended."""
    run = tmp_path / "run"
    process = launch(2, ["-m", "evogan", "evolve", str(tiny), "--run-dir", str(run), *SYNC_LONG])
    wait_for(run / "manifest.json", process)
    os.kill(process.pid, signal.SIGUSR1)
    _, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_STOPPED, err
    command = f"mpirun -n 2 --oversubscribe evogan evolve --resume {run}"
    assert evogan_lines(err) == [f"evogan: stopped by a signal; resume with: {command}"]
    assert "Traceback" not in err and "MPI_ABORT" not in err
    assert json.loads((run / "status.json").read_text())["status"] == "stopped"
    for island in (0, 1):
        assert list((run / f"checkpoints/island-{island:04d}").glob("gen-*.h5")), island
    assert not (run / "summary.json").exists()


def test_ctrl_c_to_mpirun_leaves_a_run_that_resumes_without_force(tiny, tmp_path) -> None:
    """Open MPI ends the ranks 0.25 s after it passes mpirun's SIGINT on as SIGTERM, here in
    the middle of rank 0's slow generation, so no stop is written; rank 0 recorded the signal
    as it came, and the run resumes from its last checkpoint without --force."""
    run = tmp_path / "run"
    every = ["--set", "migration.mode=sync", "--set", "checkpoint.every=1"]
    slow = ["--slow-rank", "0", "--slow-seconds", "1"]  # 1 s in each of rank 0's evaluations
    process = launch(2, [SCRIPT, str(tiny), str(run), *every, *slow])
    for island in (1, 0):
        wait_for(run / f"checkpoints/island-{island:04d}/gen-*.h5", process)
    os.kill(process.pid, signal.SIGINT)
    process.communicate(timeout=30)
    assert process.returncode == 1  # mpirun's own code for a job it ended
    status = json.loads((run / "status.json").read_text())
    assert (status["status"], status["signal"]) == ("running", "SIGTERM")
    resumed = mpirun(2, ["-m", "evogan", "evolve", "--resume", str(run)], timeout=90)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert evogan_lines(resumed.stderr) == [
        f"evogan: note: {run} was ended by its launcher after SIGTERM, before its stop was "
        "written; it resumes from its last checkpoint"
    ]
    assert f"resumed {run} from generation 1" in resumed.stdout
    assert json.loads((run / "status.json").read_text())["status"] == "finished"
