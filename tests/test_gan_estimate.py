"""A CPU training says after its first step how long an epoch will take when that is long, and
points a spec sized for GPUs at the small one of its detector; a search's short trainings do
not say it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from evogan.config import load_config
from evogan.gan3d import GanTrainer
from evogan.gan3d.training import estimate
from evogan.gan3d.training.estimate import SMALL_SPECS, cpu_estimate
from tests.conftest import REPO

SHORT = ["trainer.steps_per_epoch=2", "trainer.epochs=1", "run.progress_every=1000"]


def test_a_long_cpu_epoch_is_estimated_and_points_at_the_small_spec() -> None:
    line = cpu_estimate(40.0, 75, 64, "clic-ecal", "gan3d-varangle-51x51x25")
    assert line == (
        "on this CPU the first step of 64 showers took 40.0 s: about 50m00s per epoch of 75 "
        "steps, and a stop waits for the step in flight; this spec is sized for GPUs, "
        "configs/gan3d_small.yaml for CPUs (docs/tutorials/gan.md)"
    )
    assert cpu_estimate(2.0, 300, 16, "clic-ecal", "gan3d-small-51x51x25").endswith("in flight")
    assert "gan3d_cc2_small.yaml" in cpu_estimate(9.0, 100, 8, "calochallenge-2", "mine")
    assert cpu_estimate(9.0, 100, 8, "calochallenge-3", "mine").endswith("in flight")
    assert cpu_estimate(0.5, 75, 64, "clic-ecal", "gan3d-varangle-51x51x25") is None


def test_the_small_specs_named_are_the_shipped_ones() -> None:
    for detector, (path, name) in SMALL_SPECS.items():
        raw = yaml.safe_load((REPO / path).read_text())
        assert raw["spec"]["name"] == name
        assert raw.get("data", {}).get("detector", "clic-ecal") == detector


@pytest.mark.parametrize("announce", [True, False])
@pytest.mark.slow
def test_the_trainer_says_it_after_the_first_step(
    tmp_path: Path, monkeypatch, caplog, announce: bool
) -> None:
    monkeypatch.setattr(estimate, "LONG_EPOCH_S", 0.0)  # every epoch counts as long
    config = load_config(REPO / "configs" / "gan3d_tiny.yaml", SHORT)
    logs = caplog.at_level(logging.WARNING, logger="evogan")
    with logs, GanTrainer.open(config, tmp_path / "run", announce=announce) as trainer:
        trainer.train()
    said = [
        r.getMessage() for r in caplog.records if "on this CPU the first step" in r.getMessage()
    ]
    if not announce:
        assert said == []
        return
    assert len(said) == 1
    assert "showers took " in said[0] and "per epoch of 2 steps" in said[0]
    assert said[0].endswith("configs/gan3d_small.yaml for CPUs (docs/tutorials/gan.md)")
