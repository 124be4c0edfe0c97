"""The data-parallel 3DGAN trainer end to end under real mpirun (configs/gan3d_tiny.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

from evogan.cli import main
from evogan.config import load_config
from evogan.data.reader import open_dataset
from evogan.errors import EvoganError
from evogan.gan3d.training.trainer import train_gan3d
from evogan.store import load_weights, read_metrics

from .conftest import REPO, TINY_GAN, mpirun
from .data_fixtures import write_layout
from .gan_fixtures import assert_same_weights, one_thread

pytestmark = pytest.mark.mpi

SCRIPT, CONFIG = TINY_GAN
SIZE = ["--set", "trainer.steps_per_epoch=3", "--set", "trainer.backend=mpi"]
"""The steps and backend of the shared uninterrupted run (conftest's ``tiny_gan_run``)."""
SHORT = ["--set", "trainer.steps_per_epoch=2", "--set", "run.progress_every=1"]


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first of the two epochs of ``tiny_gan_run``, on 2 ranks through the CLI."""
    run = tmp_path_factory.mktemp("gan") / "sync"
    args = ["-m", "evogan", "train", CONFIG, "--run-dir", str(run), *SIZE]
    done = mpirun(2, [*args, "--set", "run.progress_every=1", "--set", "trainer.epochs=1"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "epoch 1/1: d_loss" in done.stdout
    return run


@pytest.mark.slow
def test_sync_run_writes_config_manifest_metrics_checkpoint_and_generator(sync_run: Path) -> None:
    manifest = json.loads((sync_run / "manifest.json").read_text())
    assert manifest["world_size"] == 2 and manifest["mode"] == "sync"
    assert [r["group"] for r in manifest["ranks"]] == [0, 0]
    (epoch,) = read_metrics(sync_run / "metrics.jsonl", "epoch")
    assert epoch["epoch"] == 1 and epoch["ranks"] == 2 and epoch["steps"] == 3
    summary = json.loads((sync_run / "summary.json").read_text())
    assert epoch["samples"] == 2 * 3 * summary["batch_per_rank"]  # ranks x steps x batch
    assert epoch["samples_per_s"] > 0 and 0 < epoch["comm_share"] < 1
    assert summary["epochs_done"] == 1 and summary["ranks"] == 2
    assert all(s["generator"]["calls"] == 3 * 2 for s in summary["exchange"])  # 2 G steps/step
    marker = json.loads((sync_run / "checkpoint.json").read_text())
    assert (marker["epoch"], marker["step"]) == (1, 0)
    assert marker["files"] == ["checkpoints/ckpt-000001-rank-00000.h5"]
    best, meta = load_weights(sync_run / "best_model.h5")
    assert meta["kind"] == "gan3d-generator" and meta["spec"]["name"] == "gan3d-tiny-51x51x25"
    last, _ = load_weights(sync_run / "last_model.h5")  # no validation: the last is the best
    assert all(best[k].equal(last[k]) for k in best)
    # The conditions trained on: the range over both ranks' shards, not rank 0's alone.
    train, _ = open_dataset(load_config(CONFIG).data, announce=lambda _line: None)
    energy, theta = train.conditions()
    shard, _ = train.shard(0, 2).conditions()
    assert (shard.min(), shard.max()) != (energy.min(), energy.max())
    assert meta["trained_on"]["energy_gev"] == pytest.approx([energy.min(), energy.max()], 1e-5)
    assert meta["trained_on"]["theta_deg"] == pytest.approx(np.degrees([theta.min(), theta.max()]))


@pytest.mark.slow
def test_resume_continues_from_the_checkpointed_epoch_exactly(
    sync_run: Path, tiny_gan_run: Path
) -> None:
    """A finished run continued for one more epoch through ``train_gan3d(resume=True)``."""
    before, _ = load_weights(sync_run / "best_model.h5")
    args = [SCRIPT, CONFIG, "--run-dir", str(sync_run), "--resume"]
    done = mpirun(2, [*args, *SIZE, "--set", "trainer.epochs=2"])
    assert done.returncode == 0, done.stderr[-3000:]
    records = read_metrics(sync_run / "metrics.jsonl")
    assert [(r["kind"], r["epoch"]) for r in records] == [
        ("epoch", 1),
        ("resume", 1),
        ("epoch", 2),
    ]
    marker = json.loads((sync_run / "checkpoint.json").read_text())
    assert marker["epoch"] == 2
    assert sorted(p.name for p in (sync_run / "checkpoints").iterdir()) == [
        "ckpt-000002-rank-00000.h5"
    ]
    summary = json.loads((sync_run / "summary.json").read_text())
    assert summary["resumed_from_epoch"] == 1 and summary["epochs_done"] == 2
    after, _ = load_weights(sync_run / "best_model.h5")
    assert any(not before[k].equal(after[k]) for k in before)
    # Exactly what an uninterrupted 2-epoch run gives (optimiser and random states restored).
    assert_same_weights(sync_run, tiny_gan_run)


@pytest.mark.slow
def test_resume_refuses_a_different_rank_count(sync_run: Path) -> None:
    """In this one process, a world of one rank (a refused launch's error line and exit code:
    test_data_of_another_window_ends_every_rank_before_a_run_directory)."""
    config = load_config(CONFIG, [SIZE[1], SIZE[3], "trainer.epochs=9"])
    with pytest.raises(EvoganError) as error:
        train_gan3d(config, sync_run, resume=True, world=MPI.COMM_SELF, signals=False)
    assert str(error.value) == (
        f"{sync_run} was trained on 2 ranks and must be resumed on as many: run mpirun -n 2 (got 1)"
    )


def test_settings_this_machine_cannot_run_are_refused_before_a_run_directory_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    run = tmp_path / "run"
    bad = {"trainer.device=cuda": "torch sees no GPU", "trainer.batch_size=100000": "at least one"}
    if torch.cuda.is_available():
        del bad["trainer.device=cuda"]
    for setting, message in bad.items():
        assert main(["train", CONFIG, "--run-dir", str(run), "--set", setting]) == 2
        err = capsys.readouterr().err
        assert message in err.strip().splitlines()[-1]
        assert "Traceback" not in err and not run.exists()


@pytest.mark.slow
def test_data_of_another_window_ends_every_rank_before_a_run_directory(tmp_path: Path) -> None:
    """Public 25x25x25 files with the 51x51x25 spec are refused on every rank in one line
    before a run directory exists, not at the first matrix product (a search's refusal:
    tests/test_search_startup.py)."""
    data = write_layout(tmp_path / "EleEscan_1_1.h5", "fixed25", events=40)
    work = tmp_path / "work"
    work.mkdir()
    args = ["-m", "evogan", "train", str(REPO / CONFIG)]
    args += ["--set", f"data.files=[{data}]", "--set", f"run.root={work / 'populations'}"]
    done = mpirun(2, args, timeout=120, cwd=work)
    assert done.returncode == 2, done.stderr[-3000:]
    assert [line for line in done.stderr.splitlines() if line.startswith("evogan:")] == [
        "evogan: error: the data (EleEscan_1_1.h5) hold showers of 25x25x25 cells but "
        "spec.output_shape is 51x51x25; give data.files of the spec's window, or a spec with "
        "output_shape [25, 25, 25] (configs/gan3d_fixed25.yaml is one for 25x25x25)"
    ]
    assert "Traceback" not in done.stderr and "MPI_ABORT" not in done.stderr
    assert list(work.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("validate", [False, True])
def test_a_diverged_generator_is_never_saved_as_the_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], validate: bool
) -> None:
    """Finite but huge learning rates train to NaN within two steps: last_model.h5 keeps the
    diverged generator, best_model.h5 is not written (neither by a validation nor at the end)
    and the run says why."""
    run = tmp_path / "run"
    args = ["--set", "spec.g_lr=1e30", "--set", "spec.d_lr=1e30", *SHORT]
    if validate:
        args += ["--set", "trainer.validate_every=1", "--set", "trainer.validation_events=24"]
        args += ["--set", "trainer.standing_batches=0"]
    with one_thread():  # as a launched training runs
        assert main(["train", CONFIG, "--run-dir", str(run), *args]) == 0
    said = capsys.readouterr().out
    assert "d_loss nan" in said
    assert (run / "last_model.h5").is_file() and not (run / "best_model.h5").exists()
    assert ("no best_model.h5 is written" in said) != validate
    if validate:
        (record,) = read_metrics(run / "metrics.jsonl", "validation")
        assert record["best"] is False


@pytest.mark.slow
def test_grouped_rma_arar_on_four_ranks_with_a_slow_rank(tmp_path: Path) -> None:
    """RMA inner rings {0, 1}, {2, 3}, point-to-point outer ring {0, 2}; rank 3 sleeps."""
    run = tmp_path / "arar"
    trainer = {
        "mode": "arar",
        "rma": "true",
        "group_size": 2,
        "epochs": 2,
        "steps_per_epoch": 3,
        "outer_every": 1,
    }
    args = [SCRIPT, CONFIG, "--run-dir", str(run)]
    args += [item for key, value in trainer.items() for item in ("--set", f"trainer.{key}={value}")]
    done = mpirun(4, [*args, "--slow-rank", "3", "--slow-seconds", "0.3"])
    assert done.returncode == 0, done.stderr[-3000:]
    stats = [s["generator"] for s in json.loads((run / "summary.json").read_text())["exchange"]]
    assert all(s["calls"] == 2 * 3 * 2 for s in stats)  # epochs x steps x generator steps
    for rank, left in ((0, 1), (1, 0), (2, 3), (3, 2)):
        assert stats[rank]["received"] + stats[rank]["late"] == stats[left]["sent"]
    assert sum(s["received"] for s in stats) > 0
    assert stats[0]["outer_sent"] == stats[2]["outer_sent"] == 2  # once per epoch
    epochs = read_metrics(run / "metrics.jsonl", "epoch")
    assert [len(e["gradients_received"]) for e in epochs] == [4, 4]
    marker = json.loads((run / "checkpoint.json").read_text())
    assert marker["epoch"] == 2 and len(marker["files"]) == 4  # one discriminator per rank
    members = [load_weights(run / "generators" / f"rank-{r:05d}.h5") for r in range(4)]
    assert all(meta["kind"] == "gan3d-generator" for _, meta in members)
    first = members[0][0]
    assert any(not first[k].equal(members[2][0][k]) for k in first)  # asynchronous replicas
