"""Validation during GAN training: scores on held-out showers at every ``validate_every``
epochs, the best generator kept as best_model.h5, a learning curve; bad settings refused."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from evogan.cli import main
from evogan.config import load_config
from evogan.distributed.signals import StopFlag
from evogan.errors import RunStopped
from evogan.gan3d import GanTrainer
from evogan.gan3d.training import epoch_loop
from evogan.store import load_weights, read_metrics
from tests.gan_fixtures import one_thread

CONFIG = "configs/gan3d_tiny.yaml"


@pytest.mark.slow
def test_validation_during_training_scores_logs_and_keeps_the_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``evogan train`` in this process (on one thread, as a launched one), twice: validated,
    and not."""
    run = tmp_path / "run"
    size = ["--set", "trainer.epochs=3", "--set", "trainer.steps_per_epoch=2"]
    validation = ["--set", "trainer.validate_every=1", "--set", "trainer.validation_events=24"]
    validation += ["--set", "trainer.standing_batches=4"]  # 100 by default: seconds on a CPU
    with one_thread():
        assert main(["train", CONFIG, "--run-dir", str(run), *size, *validation]) == 0
    said = capsys.readouterr().out
    records = read_metrics(run / "metrics.jsonl", "validation")
    assert [(r["epoch"], r["step"]) for r in records] == [(1, 2), (2, 4), (3, 6)]
    scores = [r["score"] for r in records]
    assert all(s == s and s > 0 for s in scores) and records[0]["floor"] > 0
    targets = [r["targets"] for r in records]  # 4 quantities x 5 energy bins (the default)
    assert all(t["cells"] == 20 and t["within"] + len(t["misses"]) == 20 for t in targets)
    assert said.count("within tolerance") == 3
    running = [min(scores[: i + 1]) for i in range(len(scores))]
    assert [r["best"] for r in records] == [s == m for s, m in zip(scores, running, strict=True)]
    best, meta = load_weights(run / "best_model.h5")
    assert meta["score"] == min(scores) and meta["kind"] == "gan3d-generator"
    last, _ = load_weights(run / "last_model.h5")
    same = all(best[k].equal(last[k]) for k in best)
    assert same == (scores[-1] == min(scores))
    assert (run / "learning_curve.png").stat().st_size > 10_000
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best_score"] == min(scores)
    # Validating does not disturb training: the same run without it ends with the same weights;
    # only the saved batch-norm statistics differ (standing statistics, trainer.standing_batches).
    plain = tmp_path / "plain"
    with one_thread():
        assert main(["train", CONFIG, "--run-dir", str(plain), *size]) == 0
    expected, _ = load_weights(plain / "last_model.h5")
    means = [k for k in expected if k.endswith("running_mean")]
    assert means and all(not last[k].equal(expected[k]) for k in means)
    statistics = ("running_mean", "running_var", "num_batches_tracked")
    assert all(last[k].equal(expected[k]) for k in expected if not k.endswith(statistics))


VALIDATE_EACH_STEP = ["trainer.steps_per_epoch=1", "trainer.validate_every=1"]
VALIDATE_EACH_STEP += ["trainer.validation_events=24", "trainer.standing_batches=0"]
VALIDATE_EACH_STEP += ["trainer.epochs=4", "run.progress_every=1000"]


@pytest.mark.slow
def test_the_learning_curve_is_redrawn_after_a_validation_at_most_once_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(The end of a training always draws it: the test above.)"""
    drawn = []
    monkeypatch.setattr(epoch_loop, "draw_learning_curve", lambda run: drawn.append(run.metrics()))
    with GanTrainer.open(load_config(CONFIG, VALIDATE_EACH_STEP), tmp_path / "run") as trainer:
        trainer.train(epochs=2)  # two validations within seconds: the first one draws
        assert len(drawn) == 1
        assert [r["kind"] for r in drawn[0]].count("validation") == 1
        monkeypatch.setattr(epoch_loop, "CURVE_REDRAW_SECONDS", 0.0)
        trainer.train(epochs=2)
        assert len(drawn) == 3
        assert [r["kind"] for r in drawn[-1]].count("validation") == 4


@pytest.mark.slow
def test_a_stop_draws_the_validations_the_learning_curve_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn = []
    monkeypatch.setattr(epoch_loop, "draw_learning_curve", lambda run: drawn.append(run.metrics()))
    stop = StopFlag()
    config = load_config(CONFIG, VALIDATE_EACH_STEP)
    with GanTrainer.open(config, tmp_path / "run", stop=stop) as trainer:
        trainer.train(epochs=2)  # the second validation came too soon after the first draw
        assert [r["kind"] for r in drawn[-1]].count("validation") == 1
        stop.set(signal.SIGTERM)
        with pytest.raises(RunStopped):
            trainer.train(epochs=1)
    assert len(drawn) == 2
    assert [r["kind"] for r in drawn[-1]].count("validation") == 2
    assert drawn[-1][-1]["kind"] == "stop"


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ("trainer.validate_every=3", "trainer.validate_every = 3 is larger than trainer.epochs"),
        ("trainer.validation_events=4", "raise trainer.validation_events or data.test_fraction"),
    ],
)
def test_validation_settings_that_cannot_work_are_refused_before_a_run_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, key: str
) -> None:
    run = tmp_path / "run"
    args = ["--set", "trainer.validate_every=1", "--set", setting]
    assert main(["train", CONFIG, "--run-dir", str(run), *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("evogan: error:") and key in line
    assert not run.exists()


def test_more_validation_events_than_the_test_split_holds_are_noted(capsys) -> None:
    from mpi4py import MPI

    from evogan.gan3d.training.setup import load_data

    config = load_config(CONFIG, ["trainer.validation_events=5000"])
    _, held_out = load_data(config.data, config.trainer, MPI.COMM_SELF)
    held = len(held_out)
    assert 0 < held < 5000
    assert (
        f"note: trainer.validation_events = 5000, but the test split holds {held} showers; "
        f"validating on all {held}"
    ) in capsys.readouterr().out
