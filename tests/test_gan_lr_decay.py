"""The linear learning-rate decay over the end of a GAN training: its factor, the rates a
training leaves in its checkpoint, and a resume that would stretch the decay refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from evogan.cli import main
from evogan.config import load_config
from evogan.gan3d.training.lr_decay import lr_factor
from evogan.store import load_weights
from tests.gan_fixtures import one_thread

CONFIG = "configs/gan3d_tiny.yaml"
DECAYED = ["--set", "trainer.steps_per_epoch=4", "--set", "trainer.lr_decay_from=0.5"]


def test_the_factor_is_one_then_falls_linearly_without_reaching_zero() -> None:
    factors = [lr_factor(step, 8, 0.5) for step in range(8)]
    assert factors == [1.0, 1.0, 1.0, 1.0, 1.0, 0.75, 0.5, 0.25]
    assert lr_factor(12, 8, 0.5) == 0.25  # past the planned length: the last step's rate
    assert [lr_factor(step, 4, 0.0) for step in range(4)] == [1.0, 0.75, 0.5, 0.25]
    assert {lr_factor(step, 5, 1.0) for step in range(5)} == {1.0}
    assert {lr_factor(step, 5, 0.95) for step in range(5)} == {1.0}  # no step left to decay


@pytest.mark.slow
def test_a_training_ends_at_its_last_steps_rates_and_refuses_a_longer_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``evogan train`` in this process (on one thread, as a launched one), then its resume."""
    run = tmp_path / "run"
    train = ["train", CONFIG, *DECAYED, "--set", "trainer.epochs=2", "--run-dir", str(run)]
    with one_thread():
        assert main(train) == 0
    spec = load_config(Path(CONFIG)).spec
    (checkpoint,) = (run / "checkpoints").iterdir()
    _, meta = load_weights(checkpoint)
    groups = meta["param_groups"]
    assert groups["g_optimizer"][0]["lr"] == pytest.approx(spec.g_lr * 0.25)
    assert groups["d_optimizer"][0]["lr"] == pytest.approx(spec.d_lr * 0.25)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--set", "trainer.epochs=3"]) != 0
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "trainer.lr_decay_from = 0.5" in line and "start a new run" in line
