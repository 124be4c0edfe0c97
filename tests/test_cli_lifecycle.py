"""How commands begin and end, as a user sees it: the ``--resume RUN`` grammar, resume-safe
``--set``, the run lock and status, run names that cannot escape the run root, and signals that
stop a command without leaving temporary files (exit 75, one line)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evogan.config.base import read_yaml
from evogan.config.resume import check_resume_overrides, extending_keys, is_resume_safe
from evogan.errors import EXIT_STOPPED, EXIT_USER_ERROR, ConfigError, EvoganError
from evogan.store.lock import FAILED, FINISHED, check_resumable, write_status
from tests.conftest import REPO, evogan, evogan_here, mpi_env, write_config
from tests.test_islands_mpi import TINY

CONFIGS = REPO / "configs"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_config(tmp_path_factory, "lifecycle", TINY)


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a refused command (exit 2, no traceback)."""
    assert done.returncode == EXIT_USER_ERROR, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("evogan: error: ")
    return lines[0]


def fake_run(root: Path, name: str, config: Path) -> Path:
    """A run directory holding only a config (enough for the resume grammar's checks)."""
    run = root / name
    run.mkdir()
    shutil.copy(config, run / "config.yaml")
    return run


def launch(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "evogan", *args],
        cwd=REPO,
        env=env or mpi_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(found, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not found():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"condition never met: {process.communicate()[1][-2000:]}")
        time.sleep(0.05)


def test_config_and_resume_together_are_refused_for_every_command(tmp_path) -> None:
    for command, config in (
        ("evolve", CONFIGS / "regressor_ga.yaml"),
        ("train", CONFIGS / "regressor_rmsprop.yaml"),
        ("search", CONFIGS / "arch_search_ga.yaml"),
    ):
        run = fake_run(tmp_path, command, config)
        line = one_error(evogan_here(command, str(config), "--resume", str(run)))
        assert f"continues with the run's own config ({run / 'config.yaml'}); drop CONFIG" in line
    assert "needs a CONFIG file, or --resume RUN" in one_error(evogan_here("evolve"))


@pytest.mark.parametrize(
    ("command", "config", "key"),
    [
        ("evolve", "regressor_ga.yaml", "seed"),
        ("evolve", "regressor_ga.yaml", "model.filters"),
        ("evolve", "regressor_ga.yaml", "data.train_events"),
        ("train", "gan3d_tiny.yaml", "spec.latent_size"),
        ("train", "gan3d_tiny.yaml", "trainer.mode"),
        ("search", "arch_search_ga.yaml", "budget.amount"),
    ],
)
def test_resume_refuses_overrides_that_change_the_computation(tmp_path, command, config, key):
    run = fake_run(tmp_path, "run", CONFIGS / config)
    line = one_error(evogan_here(command, "--resume", str(run), "--set", f"{key}=7"))
    assert f"--set {key} would change what the resumed run computes" in line
    assert f"start a new run to change {key}" in line


def test_resume_safe_keys_per_task() -> None:
    check_resume_overrides("regressor", ["ga.epochs=40", "run.progress_every=5"])
    check_resume_overrides("gan3d", ["trainer.epochs=9", "checkpoint.every_seconds=60"])
    check_resume_overrides("search", ["candidates=64", "campaign.tensorboard=true"])
    with pytest.raises(ConfigError, match="--set run would change"):
        check_resume_overrides("gan3d", ["run=1"])
    with pytest.raises(ConfigError, match=r"--set runner\.x would change"):
        check_resume_overrides("gan3d", ["runner.x=1"])


def test_rmsprop_runs_and_finished_or_failed_runs_are_not_resumed_blindly(tmp_path) -> None:
    run = fake_run(tmp_path, "my rmsprop", CONFIGS / "regressor_rmsprop.yaml")
    line = one_error(evogan_here("train", "--resume", str(run)))
    assert "evogan train (RMSprop) keep no checkpoints" in line
    assert f"evogan train '{run}/config.yaml' (a GA run resumes with" in line
    run = fake_run(tmp_path, "my ga", CONFIGS / "regressor_ga.yaml")
    write_status(run, FINISHED)
    assert one_error(evogan_here("evolve", "--resume", str(run))).endswith(
        "already finished (status.json); nothing to resume unless you extend it with a larger "
        "--set ga.epochs"
    )
    write_status(run, FAILED, "RuntimeError: disk full")
    line = one_error(evogan_here("evolve", "--resume", str(run)))
    assert f"{run} failed (RuntimeError: disk full); fix the cause, then resume it" in line
    assert line.endswith(f"--resume '{run}' --force")
    assert json.loads((run / "status.json").read_text())["status"] == FAILED  # unchanged


@pytest.mark.parametrize(
    ("config", "keys"),
    [
        ("gan3d_tiny.yaml", "trainer.epochs"),
        ("arch_search_ga.yaml", "candidates, final.top or final.retrain_seeds"),
        ("arch_search_pbt.yaml", "final.top or final.retrain_seeds"),
    ],
)
def test_a_finished_run_names_the_keys_that_extend_its_task(tmp_path, config, keys) -> None:
    run = fake_run(tmp_path, "run", CONFIGS / config)
    write_status(run, FINISHED)
    with pytest.raises(EvoganError) as info:
        check_resumable(run, extending=extending_keys(run))
    assert str(info.value).endswith(f"extend it with a larger --set {keys}")
    task = read_yaml(run / "config.yaml")["task"]
    assert all(is_resume_safe(task, key) for key in keys.replace(" or", ",").split(", "))


def test_run_names_cannot_escape_the_run_root(tiny, tmp_path) -> None:
    for name in ("../../escaped", "/tmp/escaped-absolute", "..", "a/b"):
        done = evogan_here(
            "evolve",
            str(tiny),
            "--set",
            f"run.root={tmp_path}",
            "--set",
            f"run.name={name}",
        )
        assert f"run.name = {name!r} must be a plain directory name" in one_error(done)
    assert not (tmp_path.parent.parent / "escaped").exists()
    assert not Path("/tmp/escaped-absolute").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_file_where_a_run_directory_belongs_is_named_before_the_data_is_read(
    tiny, tmp_path
) -> None:
    """The first refusal in a process of its own, as a user meets it; the others through the
    CLI's ``main`` in this process."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    started = evogan("evolve", str(tiny), "--run-dir", str(a_file))
    assert f"run directory {a_file} is a file, not a directory" in one_error(started)
    assert "data:" not in started.stdout and a_file.read_text() == "mine"
    for command in ("evolve", "train", "search"):
        line = one_error(evogan_here(command, "--resume", str(a_file)))
        assert f"--resume: run directory {a_file} is a file" in line, command
    absent = ["report", str(tmp_path / "absent"), "--out", str(tmp_path / "report")]
    line = one_error(evogan_here(*absent))
    assert f"campaign directory {tmp_path / 'absent'} is missing" in line


@pytest.mark.slow
def test_a_second_process_on_a_live_run_fails_and_a_stop_resumes(tiny, tmp_path) -> None:
    run = tmp_path / "run"
    first = launch(
        "evolve",
        str(tiny),
        "--run-dir",
        str(run),
        "--set",
        "ga.epochs=2000",
        "--set",
        "checkpoint.every=4",
    )
    # keep: 3 prunes a checkpoint a few generations after it is written: wait for any of them
    wait_until(lambda: any((run / "checkpoints/island-0000").glob("gen-*.h5")), first)
    line = one_error(evogan_here("evolve", "--resume", str(run)))
    assert f"run directory {run} is in use by pid {first.pid} on " in line
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=60)
    assert first.returncode == EXIT_STOPPED, err
    assert err.strip().splitlines()[-1] == (
        f"evogan: stopped by a signal; resume with: evogan evolve --resume {run}"
    )
    assert json.loads((run / "status.json").read_text())["status"] == "stopped"
    done = evogan_here("evolve", "--resume", str(run), "--set", "ga.epochs=4")
    assert done.returncode == 0, done.stderr
    assert "resumed" in done.stdout and (run / "summary.json").is_file()
    assert json.loads((run / "status.json").read_text())["status"] == FINISHED
    before = json.loads((run / "summary.json").read_text())
    # the stop may come after epoch 4, and a stop on an epoch's last generation leaves that
    # epoch's record to the resumed run: two more epochs always run new generations
    more = before["epochs"] + 2
    done = evogan_here("evolve", "--resume", str(run), "--set", f"ga.epochs={more}")
    assert done.returncode == 0, done.stderr
    after = json.loads((run / "summary.json").read_text())
    assert after["epochs"] == more and after["generations"] > before["generations"]


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


def test_sigterm_during_data_synth_leaves_no_temporary_file(tmp_path) -> None:
    target = tmp_path / "big.h5"
    process = launch("data", "synth", "--out", str(target), "--events", "20000")
    wait_until(lambda: temporaries(tmp_path), process)
    time.sleep(0.5)  # well inside the writing of events
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_STOPPED
    assert err.strip().splitlines() == [
        "evogan: stopped by SIGTERM before anything resumable was written; start the command again"
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_sigterm_while_the_default_data_set_is_generated_leaves_no_temporary_file(
    tiny, tmp_path
) -> None:
    cache = tmp_path / "cache"
    env = {**mpi_env(), "EVOGAN_CACHE_DIR": str(cache)}
    process = launch(
        "evolve",
        str(tiny),
        "--run-dir",
        str(tmp_path / "run"),
        "--set",
        "data.synthetic.events=20000",
        env=env,
    )
    wait_until(lambda: cache.is_dir() and temporaries(cache), process)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_STOPPED, err
    assert "stopped by SIGTERM" in err.strip().splitlines()[-1]
    assert temporaries(cache) == [] and not list(cache.glob("*.h5"))
    assert not (tmp_path / "run").exists()  # stopped before the run was made


@pytest.mark.slow
def test_sigterm_stops_an_rmsprop_run_with_75_and_its_resume_is_refused(tiny, tmp_path) -> None:
    run = tmp_path / "run"
    process = launch("train", str(tiny), "--run-dir", str(run), "--set", "train.epochs=5000")
    wait_until(lambda: (run / "metrics.jsonl").is_file(), process)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_STOPPED, err
    assert err.strip().splitlines()[-1].startswith("evogan: stopped by SIGTERM")
    assert json.loads((run / "status.json").read_text())["status"] == "stopped"
    assert "keep no checkpoints" in one_error(evogan_here("train", "--resume", str(run)))


@pytest.mark.slow
def test_a_reader_that_goes_away_does_not_end_the_run(tiny, tmp_path) -> None:
    """``evogan evolve ... | head -1``: the display is gone, the run is not."""
    run = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "evogan", "evolve", str(tiny), "--run-dir", str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=mpi_env(),
        cwd=REPO,
    )
    process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert json.loads((run / "status.json").read_text())["status"] == FINISHED
    assert (run / "summary.json").is_file()
