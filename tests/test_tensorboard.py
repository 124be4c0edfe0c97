"""TensorBoard events (``run.tensorboard: true``): read back with tensorboard's own reader, they
hold the same numbers as metrics.jsonl for GA, island, RMSprop and GAN runs and search tables.
One-rank runs go through the CLI's ``main`` in this process; the island run under real
``mpirun -n 2``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from evogan.cli import main
from evogan.store import read_metrics
from evogan.store.metrics import append_synced
from tests.conftest import REPO, mpi_env, mpirun

accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="the tensorboard package is not installed (pip install -e '.[test]')",
)

TINY = {
    "task": "regressor",
    "seed": 2,
    "data": {"synthetic": {"events": 300}, "train_events": 240, "test_events": 60},
    "ga": {"batch_size": 48, "epochs": 2},
    "train": {"batch_size": 48, "epochs": 2},
    "run": {"tensorboard": True, "progress_every": 1000},
}


def _scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    events = accumulator.EventAccumulator(str(logdir))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def _expect(records: list[dict], step: str, key: str) -> list[tuple[int, float]]:
    """What TensorBoard should hold for ``key``: float32 values at the record's step."""
    return [(r[step], float(np.float32(r[key]))) for r in records]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tensorboard")
    (root / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    return root


def _run(tiny: Path, *args: str) -> None:
    """``evogan ARGS`` through the CLI's ``main`` in this process (one rank)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(tiny / "cache"))
        assert main(list(args)) == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "kind", "scalar"), [("evolve", "generation", "best"), ("train", "step", "loss")]
)
def test_regressor_run_events_hold_every_metrics_record(
    tiny: Path, command: str, kind: str, scalar: str
) -> None:
    """The GA writes a record per generation, RMSprop one per optimiser step: TensorBoard holds
    each at its own step, and the epochs' test MAPE."""
    run = tiny / command
    _run(tiny, command, str(tiny / "tiny.yaml"), "--run-dir", str(run))
    scalars = _scalars(run)
    steps = read_metrics(run / "metrics.jsonl", kind)
    epochs = read_metrics(run / "metrics.jsonl", "epoch")
    assert len(steps) > 2 and len(epochs) == 2
    assert scalars[f"{kind}/{scalar}"] == _expect(steps, kind, scalar)
    assert scalars["epoch/test_mape"] == _expect(epochs, "epoch", "test_mape")
    assert f"{kind}/{kind}" not in scalars  # the step is the step, not a scalar
    if kind == "generation":
        assert scalars["generation/evaluations"] == _expect(steps, kind, "evaluations")


@pytest.mark.slow
def test_island_run_writes_one_tensorboard_run_per_island(tiny: Path) -> None:
    run = tiny / "islands"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(tiny / "cache"))
        done = mpirun(2, ["-m", "evogan", "evolve", str(tiny / "tiny.yaml"), "--run-dir", str(run)])
    assert done.returncode == 0, done.stderr[-2000:]
    for island in ("island-0000", "island-0001"):
        folder = run / "islands" / island
        records = read_metrics(folder / "metrics.jsonl", "generation")
        assert _scalars(folder)["generation/best"] == _expect(records, "generation", "best")


@pytest.mark.slow
def test_gan_run_events_hold_the_losses(tiny: Path) -> None:
    run = tiny / "gan"
    _run(
        tiny,
        "train",
        str(REPO / "configs" / "gan3d_tiny.yaml"),
        "--run-dir",
        str(run),
        *("--set", "trainer.epochs=2", "--set", "trainer.steps_per_epoch=1"),
        *("--set", "run.tensorboard=true"),
    )
    epochs = read_metrics(run / "metrics.jsonl", "epoch")
    scalars = _scalars(run)
    assert scalars["epoch/d_loss"] == _expect(epochs, "epoch", "d_loss")
    assert scalars["epoch/g_loss"] == _expect(epochs, "epoch", "g_loss")
    validations = read_metrics(run / "metrics.jsonl", "validation")
    if validations:  # contract 4: scored during training, stepped by optimiser step
        assert scalars["validation/score"] == _expect(validations, "step", "score")


def test_search_table_rows_become_candidate_scalars(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("task: search\ncampaign: {tensorboard: true}\n")
    table = tmp_path / "table" / "island-000.jsonl"
    rows = [{"id": f"c{i}", "fitness": 3.0 - i, "genome": {"latent_size": 8 * i}} for i in range(3)]
    for row in rows:
        append_synced(table, row, kind="candidate")
    assert read_metrics(table) == rows
    scalars = _scalars(tmp_path / "table" / "island-000")
    assert scalars["candidate/fitness"] == [(0, 3.0), (1, 2.0), (2, 1.0)]
    assert scalars["candidate/genome/latent_size"] == [(0, 0.0), (1, 8.0), (2, 16.0)]


@pytest.mark.slow
def test_runs_without_the_key_write_no_events(tiny: Path) -> None:
    plain = {**TINY, "run": {"progress_every": 1000}, "ga": {"batch_size": 48, "epochs": 1}}
    (tiny / "plain.yaml").write_text(yaml.safe_dump(plain))
    run = tiny / "plain"
    _run(tiny, "evolve", str(tiny / "plain.yaml"), "--run-dir", str(run))
    assert read_metrics(run / "metrics.jsonl")
    assert not list(run.rglob("events.out.tfevents.*"))


def test_missing_package_is_one_line_before_the_run_starts(tiny: Path) -> None:
    """``sys.modules[name] = None`` is how Python marks a package as not importable."""
    run = tiny / "refused"
    code = (
        "import sys; sys.modules['tensorboard'] = None; from evogan.cli import main; "
        f"sys.exit(main(['evolve', {str(tiny / 'tiny.yaml')!r}, '--run-dir', {str(run)!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=mpi_env(), cwd=REPO
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "run.tensorboard" in lines[0], done.stderr
    assert "pip install 'evogan[tensorboard]'" in lines[0]
    assert not run.exists()
