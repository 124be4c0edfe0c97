"""The Slurm templates parse, and their start-or-resume logic (scripts/slurm/common.sh) starts
a new run, does nothing for a finished one, refuses a failed one and requeues on exit 75.
``srun`` and ``scontrol`` are shell functions here (no Slurm on this machine): ``srun`` runs
its command once, ``scontrol`` records what it was asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evogan.store.lock import FAILED, RUNNING, write_status
from tests.conftest import REPO, mpi_env
from tests.test_islands_mpi import TINY

SLURM = REPO / "scripts" / "slurm"
TEMPLATES = sorted(SLURM.glob("*.sbatch"))


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.name for p in TEMPLATES])
def test_templates_parse_and_signal_requeue(path: Path) -> None:
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    text = path.read_text()
    for line in ("#SBATCH --signal=TERM@", "#SBATCH --requeue", "run_or_resume", "# module load"):
        assert line in text
    assert {p.name for p in TEMPLATES} == {"evolve.sbatch", "train.sbatch", "search.sbatch"}


def run_or_resume(
    tmp_path: Path, *args: str, evogan: str = f"{sys.executable} -m evogan"
) -> subprocess.CompletedProcess:
    script = (
        f"set -euo pipefail; source {SLURM / 'common.sh'}\n"
        'srun() { shift; "$@"; }\n'
        'scontrol() { echo "scontrol $*" >> "$CALLS"; }\n'
        f"run_or_resume {' '.join(args)}\n"
    )
    env = {**mpi_env(), "CALLS": str(tmp_path / "calls"), "SLURM_JOB_ID": "4242", "EVOGAN": evogan}
    return subprocess.run(
        ["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_start_then_nothing_then_refuse_a_failed_run(tmp_path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "ga": {**TINY["ga"], "epochs": 1}}))
    run = tmp_path / "run"
    done = run_or_resume(tmp_path, "evolve", str(config), str(run))
    assert done.returncode == 0, done.stderr
    assert f"starting {run}" in done.stdout and (run / "summary.json").is_file()
    done = run_or_resume(tmp_path, "evolve", str(config), str(run))
    assert done.returncode == 0 and f"{run} is finished; nothing to do" in done.stdout
    write_status(run, FAILED, "RuntimeError: node lost")
    done = run_or_resume(tmp_path, "evolve", str(config), str(run))
    assert done.returncode == 1
    assert "has status 'failed'" in done.stderr and f"--resume {run} --force" in done.stderr
    assert not (tmp_path / "calls").exists()


def echo_evogan(tmp_path: Path, code: int) -> tuple[Path, Path]:
    """A stand-in evogan that prints its command and exits ``code``, and an existing run."""
    evogan = tmp_path / "echo-evogan"
    evogan.write_text(f'#!/bin/bash\necho "evogan $*"\nexit {code}\n')
    evogan.chmod(0o755)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("task: regressor\n")
    return evogan, run


def test_exit_75_requeues_the_job(tmp_path) -> None:
    stopped, run = echo_evogan(tmp_path, 75)
    done = run_or_resume(tmp_path, "train", "unused.yaml", str(run), evogan=str(stopped))
    assert done.returncode == 75
    assert f"evogan train --resume {run}" in done.stdout
    assert (tmp_path / "calls").read_text() == "scontrol requeue 4242\n"


@pytest.mark.parametrize(("signal", "resumed"), [("SIGTERM", True), (None, False)])
def test_a_run_its_launcher_killed_after_a_stop_signal_is_resumed(
    tmp_path, signal: str | None, resumed: bool
) -> None:
    """mpirun kills the ranks 0.25 s after a SIGTERM of its own; the signal was recorded, so
    the run resumes as evogan would without --force; a running status without one is refused."""
    echo, run = echo_evogan(tmp_path, 0)
    write_status(run, RUNNING, signal=signal)
    done = run_or_resume(tmp_path, "evolve", "unused.yaml", str(run), evogan=str(echo))
    assert (f"evogan evolve --resume {run}" in done.stdout) == resumed
    assert done.returncode == (0 if resumed else 1)
    assert resumed or "has status 'running'" in done.stderr


@pytest.mark.slow
def test_arguments_reach_a_new_run_and_a_resume_keeps_its_config(tmp_path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    run = tmp_path / "run"
    settings = ("--set", "ga.epochs=1", "run.progress_every=7")
    done = run_or_resume(tmp_path, "evolve", str(config), str(run), *settings)
    assert done.returncode == 0, done.stderr
    assert (
        f"starting {run} from {config} with --set ga.epochs=1 run.progress_every=7" in done.stdout
    )
    stored = yaml.safe_load((run / "config.yaml").read_text())
    assert stored["ga"]["epochs"] == 1 and stored["run"]["progress_every"] == 7


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.name for p in TEMPLATES])
def test_a_template_passes_its_arguments_to_evogan(tmp_path, path: Path) -> None:
    """``sbatch TEMPLATE --set ...`` (Slurm gives the script those arguments): the new run
    gets them; the requeued job resumes with the run's own config instead."""
    echo, run = echo_evogan(tmp_path, 0)
    (run / "config.yaml").unlink()
    script = f'srun() {{ shift; "$@"; }}; export -f srun; bash {path} --set a=1 b=2'
    place = "CAMPAIGN" if path.name == "search.sbatch" else "RUN"
    env = {**mpi_env(), "EVOGAN": str(echo), "CONFIG": "my.yaml", place: str(run)}
    command = path.stem
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"evogan {command} my.yaml --run-dir {run} --set a=1 b=2" in done.stdout
    (run / "config.yaml").write_text("task: regressor\n")
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"evogan {command} --resume {run}"
    assert "with its own config.yaml, which holds --set a=1 b=2" in done.stdout
