"""GAN training as a long job under real mpirun: SIGTERM on one rank stops both ranks after a
checkpoint at the current step (exit 75), and the resumed run ends with exactly the weights of
an uninterrupted run (sync mode, its gradients averaged over gloo, whose weights equal the MPI
path's at two ranks: tests/test_gan_backend.py); resumes that would not continue the same
computation are refused in one line; a training that mpirun ended on its own SIGTERM resumes
without --force."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
from mpi4py import MPI

from evogan.cli import main
from evogan.config import load_config
from evogan.errors import EvoganError
from evogan.gan3d.training.trainer import train_gan3d
from evogan.store import load_weights, read_metrics

from .conftest import TINY_GAN, TINY_GAN_SIZE, launch, mpirun, wait_for
from .gan_fixtures import assert_same_weights, one_thread

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

SCRIPT, CONFIG = TINY_GAN
SIZE = TINY_GAN_SIZE
EVERY_STEP = ["--set", "checkpoint.every_seconds=0.001"]
GLOO = ["--set", "trainer.backend=gloo"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tiny_gan_run: Path) -> dict[str, Path]:
    """An uninterrupted 2-rank MPI run (shared), and one gloo run stopped twice, checkpointing
    after every step: first by SIGTERM on rank 0 while it writes the timed checkpoint after step
    1, then, resumed, by SIGTERM on rank 1 after its 4th step (epoch 2, step 1); an untouched
    copy of the run after each stop ("in-checkpoint", "copy")."""
    root = tmp_path_factory.mktemp("gan-stop")
    run = root / "run"
    args = [SCRIPT, CONFIG, "--run-dir", str(run), *SIZE, *EVERY_STEP, *GLOO]
    command = f"mpirun -n 2 --oversubscribe evogan train --resume {run}"
    for stop, copy in (
        (["--signal-in-checkpoint", "0"], "in-checkpoint"),
        (["--resume", "--signal-rank", "1", "--signal-step", "2"], "copy"),  # global step 4
    ):
        stopped = mpirun(2, [*args, *stop])
        assert stopped.returncode == 75, stopped.stderr[-3000:]
        assert command in stopped.stderr
        shutil.copytree(run, root / copy)
    names = ("run", "in-checkpoint", "copy")
    return {"root": root, "straight": tiny_gan_run, **{name: root / name for name in names}}


def test_a_stopped_run_holds_a_checkpoint_at_the_agreed_step_and_nothing_half_written(
    runs: dict[str, Path],
) -> None:
    run = runs["copy"]
    marker = json.loads((run / "checkpoint.json").read_text())
    assert (marker["epoch"], marker["step"], marker["format"]) == (1, 1, 2)
    assert [p.name for p in (run / "checkpoints").iterdir()] == [Path(marker["files"][0]).name]
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    assert not (run / "summary.json").exists() and not (run / "last_model.h5").exists()
    stops = read_metrics(run / "metrics.jsonl", "stop")
    assert [s["step"] for s in stops] == [2, 4]  # the first stop's, then this one's
    assert stops[1]["signal"] == "a signal on another rank"  # rank 1 got it
    assert json.loads((run / "status.json").read_text())["status"] == "stopped"


def test_a_signal_during_a_checkpoint_write_stops_after_it(runs: dict[str, Path]) -> None:
    """SIGTERM while rank 0 writes the timed checkpoint after step 1: that checkpoint
    completes, the ranks stop with a checkpoint of their own and nothing is half-written. The
    run's resume (stopped once more on the way) ends with the weights of the uninterrupted
    run: test_resume_completes_to_the_weights_of_an_uninterrupted_run."""
    run = runs["in-checkpoint"]
    marker = json.loads((run / "checkpoint.json").read_text())
    # serial 1: the timed checkpoint the signal interrupted, completed; serial 2: the stop's,
    # at the next step, when the ranks agree
    assert (marker["serial"], marker["epoch"], marker["step"]) == (2, 0, 2)
    assert [p.name for p in (run / "checkpoints").iterdir()] == [Path(marker["files"][0]).name]
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    (stop,) = read_metrics(run / "metrics.jsonl", "stop")
    assert (stop["step"], stop["signal"]) == (2, "SIGTERM")


def test_resume_completes_to_the_weights_of_an_uninterrupted_run(runs: dict[str, Path]) -> None:
    run, straight = runs["run"], runs["straight"]
    done = mpirun(2, ["-m", "evogan", "train", "--resume", str(run)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_weights(run, straight)
    losses = ("d_loss", "g_loss", "d_energy", "g_ecal_sum")
    mine = [[r[k] for k in losses] for r in read_metrics(run / "metrics.jsonl", "epoch")]
    theirs = [[r[k] for k in losses] for r in read_metrics(straight / "metrics.jsonl", "epoch")]
    assert mine == theirs  # both interrupted epochs' partial sums were checkpointed too
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["resumed_from_epoch"], summary["resumed_from_step"]) == (1, 1)
    assert json.loads((run / "manifest.json").read_text())["backend"] == "gloo"
    nets = ("generator", "discriminator")
    calls = [[r[net]["calls"] for net in nets] for r in summary["exchange"]]
    assert calls == [[4, 2], [4, 2]]  # the 2 steps after the resume: 2 G and 1 D update each


def _marked(runs: dict[str, Path], name: str, **changes: object) -> Path:
    """A copy of the stopped run whose checkpoint marker says ``changes``."""
    other = runs["root"] / name
    shutil.copytree(runs["copy"], other)
    marker = json.loads((other / "checkpoint.json").read_text())
    (other / "checkpoint.json").write_text(json.dumps({**marker, **changes}))
    return other


def _refusal(run: Path, *overrides: str) -> str:
    """Why ``train_gan3d(resume=True)`` in this process, one rank, refuses ``run``."""
    config = load_config(CONFIG, [SIZE[1], SIZE[3], *overrides])
    with pytest.raises(EvoganError) as error:
        train_gan3d(config, run, resume=True, world=MPI.COMM_SELF, signals=False)
    return str(error.value)


def test_resume_with_a_changed_spec_is_refused_in_one_line(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = runs["copy"]
    assert main(["train", "--resume", str(run), "--set", "spec.latent_size=8"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("evogan: error: --set spec.latent_size would change what")
    # The trainer's own check, for callers of train_gan3d(resume=True) with another config:
    # it comes after the rank count's, so on a copy whose marker says one rank.
    one_rank = _marked(runs, "one-rank", world_size=1)
    refusal = _refusal(one_rank, "spec.latent_size=8")
    assert refusal.startswith(f"{one_rank} was trained with a different spec;")


def test_resume_of_another_version_or_without_checkpoint_is_refused(
    runs: dict[str, Path],
) -> None:
    """Checked before the rank count, so in this one process (the error line and exit code of
    a refused launch: test_a_refused_gan_resume_leaves_the_run_as_it_was_and_the_right_one_runs
    in tests/test_state_damage.py)."""
    other = _marked(runs, "other", evogan="0.0.9")
    assert "was checkpointed by evogan 0.0.9 (checkpoint format 2); this is evogan" in _refusal(
        other
    )
    (other / "checkpoint.json").unlink()
    assert "holds no checkpoint (checkpoint.json missing)" in _refusal(other)


def test_arar_stop_checkpoints_every_rank_where_it_stopped_and_resumes(tmp_path: Path) -> None:
    """arar ranks never wait for each other mid-epoch, so each stops at its own step; the
    resumed run continues every rank from its own position to the end. The rings keep their
    buffers as torch tensors (``ring_buffers: device``, on the CPU here)."""
    run = tmp_path / "arar"
    arar = [*SIZE, "--set", "trainer.mode=arar", "--set", "trainer.ring_buffers=device"]
    arar += ["--slow-rank", "0", "--slow-seconds", "0.2"]
    args = [SCRIPT, CONFIG, "--run-dir", str(run), *arar]
    done = mpirun(2, [*args, "--signal-rank", "1", "--signal-step", "2"])
    assert done.returncode == 75, done.stderr[-3000:]
    marker = json.loads((run / "checkpoint.json").read_text())
    assert len(marker["files"]) == 2 and marker["epoch"] == 0  # one discriminator per rank
    assert json.loads((run / "manifest.json").read_text())["ring_buffers"] == "device"
    positions = [load_weights(run / name)[1]["ranks"] for name in marker["files"]]
    assert [list(p) for p in positions] == [["0"], ["1"]]
    # The signalled rank's flag rides the next agreement round: it stops one or two steps on.
    assert 2 <= positions[1]["1"]["step"] <= 3
    done = mpirun(2, ["-m", "evogan", "train", "--resume", str(run)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["epoch"] for r in read_metrics(run / "metrics.jsonl", "epoch")] == [1, 2]
    assert sorted(p.name for p in (run / "generators").iterdir()) == [
        "rank-00000.h5",
        "rank-00001.h5",
    ]


def test_timed_checkpoints_and_validations_and_a_stop_in_the_first_step(tmp_path: Path) -> None:
    """One rank: ``checkpoint.every_seconds`` and ``trainer.validate_every_seconds`` act after
    every step when they are shorter than a step; SIGTERM in the very first step still stops
    with a checkpoint at step 1."""
    run = tmp_path / "timed"
    timed = ["--set", "checkpoint.every_seconds=0.001", "--set", "trainer.epochs=1"]
    timed += ["--set", "trainer.steps_per_epoch=2", "--set", "trainer.validate_every_seconds=0.001"]
    timed += ["--set", "trainer.validation_events=24", "--set", "trainer.standing_batches=0"]
    with one_thread():  # in this process, as a launched training runs
        assert main(["train", CONFIG, "--run-dir", str(run), *timed]) == 0
    marker = json.loads((run / "checkpoint.json").read_text())
    assert marker["serial"] == 3 and (marker["epoch"], marker["step"]) == (1, 0)  # 2 timed + end
    assert len(list((run / "checkpoints").iterdir())) == 1
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl", "validation")] == [1, 2]
    first = tmp_path / "first"
    args = [SCRIPT, CONFIG, "--run-dir", str(first), "--signal-rank", "0", "--signal-step", "1"]
    done = mpirun(1, args)
    assert done.returncode == 75, done.stderr[-3000:]
    marker = json.loads((first / "checkpoint.json").read_text())
    assert (marker["epoch"], marker["step"]) == (0, 1)
    assert "resume with: mpirun -n 1 --oversubscribe evogan train --resume" in done.stderr


def test_sigterm_to_mpirun_leaves_a_training_that_resumes_without_force(tmp_path: Path) -> None:
    """A scheduler's SIGTERM to mpirun (or Ctrl-C): Open MPI ends the ranks 0.25 s after
    passing it on, here while rank 0 sleeps after its first step, so no stop is written; rank
    0 recorded the signal as it came, and the training resumes from the checkpoint of that
    step without --force."""
    run = tmp_path / "run"
    size = ["--set", "trainer.steps_per_epoch=2", "--set", "trainer.epochs=1"]
    every_step = ["--set", "checkpoint.every_seconds=0.001"]
    slow = ["--slow-rank", "0", "--slow-seconds", "3"]
    process = launch(2, [SCRIPT, CONFIG, "--run-dir", str(run), *size, *every_step, *slow])
    wait_for(run / "checkpoint.json", process, timeout=120)
    os.kill(process.pid, signal.SIGTERM)
    process.communicate(timeout=30)
    assert process.returncode == 1  # mpirun's own code for a job it ended
    status = json.loads((run / "status.json").read_text())
    assert (status["status"], status["signal"]) == ("running", "SIGTERM")
    marker = json.loads((run / "checkpoint.json").read_text())
    assert (marker["epoch"], marker["step"]) == (0, 1)
    done = mpirun(2, ["-m", "evogan", "train", "--resume", str(run)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "before its stop was written; it resumes from its last checkpoint" in done.stderr
    assert [r["epoch"] for r in read_metrics(run / "metrics.jsonl", "epoch")] == [1]
    assert json.loads((run / "status.json").read_text())["status"] == "finished"
