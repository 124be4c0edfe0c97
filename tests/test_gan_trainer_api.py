"""GanTrainer in process (one rank): training epoch by epoch in one trainer, as the search does
on a seconds budget, ends with exactly the weights of one training of as many epochs, and a
resumed trainer continues a saved run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evogan.config import load_config
from evogan.gan3d import GanTrainer
from evogan.store import load_weights

CONFIG = "configs/gan3d_tiny.yaml"
SHORT = ["trainer.steps_per_epoch=2", "run.progress_every=1000"]


def _weights(run: Path) -> dict:
    return load_weights(run / "last_model.h5")[0]


@pytest.mark.slow
def test_train_one_epoch_at_a_time_equals_one_training_and_resume_continues(
    tmp_path: Path,
) -> None:
    config = load_config(CONFIG, [*SHORT, "trainer.epochs=2"])
    with GanTrainer.open(config, tmp_path / "straight") as trainer:
        trainer.train()
        assert trainer.losses_finite()
        trainer.save()
    one = load_config(CONFIG, [*SHORT, "trainer.epochs=1"])
    with GanTrainer.open(one, tmp_path / "steps") as trainer:
        records = trainer.train()
        assert [r["epoch"] for r in records] == [1]
        assert [r["epoch"] for r in trainer.train(epochs=1)] == [1, 2]
        trainer.save()
    straight, steps = _weights(tmp_path / "straight"), _weights(tmp_path / "steps")
    assert all(straight[k].equal(steps[k]) for k in straight)
    summary = json.loads((tmp_path / "steps" / "summary.json").read_text())
    assert summary["epochs_done"] == 2
    assert load_config(tmp_path / "steps" / "config.yaml").trainer.epochs == 2

    with GanTrainer.resume(tmp_path / "steps") as trainer:  # the run's own config: 2 epochs
        trainer.train(epochs=1)
        trainer.save()
    summary = json.loads((tmp_path / "steps" / "summary.json").read_text())
    assert (summary["resumed_from_epoch"], summary["epochs_done"]) == (2, 3)
