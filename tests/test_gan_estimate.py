"""A CPU training says before its first step how long an epoch will take when that is long,
estimated from a probe step, and points a spec sized for GPUs at the small one of its
detector; the first step's own time only where nothing was said or the estimate was far off;
a search's short trainings say nothing. The probe leaves the training's random streams alone."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import yaml

from evogan.config import load_config
from evogan.distributed.mpi import MPI
from evogan.distributed.signals import StopFlag
from evogan.gan3d.model.precision import ForwardOptions
from evogan.gan3d.training.estimate import SMALL_SPECS, EpochEstimate, probe_seconds
from evogan.gan3d.training.trainer import GanTrainer, Opening
from tests.conftest import REPO, mpirun

SHORT = ["trainer.steps_per_epoch=2", "trainer.epochs=1", "run.progress_every=1000"]
START = "will take about"
MEASURED = "the first step of"


def _estimate(spec: str, steps: int, batch: int, detector: str = "clic-ecal") -> EpochEstimate:
    config = load_config(REPO / "configs" / spec)
    return EpochEstimate(config.spec, ForwardOptions(), batch, steps, 1, detector)


def test_a_long_epoch_is_estimated_at_the_start_and_points_at_the_small_spec() -> None:
    estimate = _estimate("gan3d.yaml", 75, 64)
    assert estimate.start_line(1.25) == (
        "on this CPU a step of 64 showers will take about 40.0 s (estimated from a step of 2): "
        "about 50m00s per epoch of 75 steps, and a stop waits for the step in flight; this "
        "spec is sized for GPUs, configs/gan3d_small.yaml for CPUs (docs/tutorials/gan.md)"
    )
    assert estimate.measured_line(30.0) is None  # within a factor 2 of the estimate
    assert estimate.measured_line(90.0) == (
        "on this CPU the first step of 64 showers took 90.0 s: about 1h52m per epoch of 75 "
        "steps, not the 40.0 s estimated at the start"
    )
    assert _estimate("gan3d.yaml", 75, 64).start_line(0.01) is None  # a short epoch
    small = _estimate("gan3d_small.yaml", 300, 16)
    assert small.start_line(1.0).endswith("in flight")  # already the small spec
    assert "gan3d_cc2_small.yaml" in _estimate("gan3d.yaml", 100, 8, "calochallenge-2").start_line(
        9.0
    )
    assert _estimate("gan3d.yaml", 100, 8, "calochallenge-3").start_line(9.0).endswith("flight")


def test_the_first_step_is_said_where_nothing_was_said_at_the_start() -> None:
    estimate = _estimate("gan3d.yaml", 75, 64)
    assert estimate.start_line(0.01) is None
    assert estimate.measured_line(40.0) == (
        "on this CPU the first step of 64 showers took 40.0 s: about 50m00s per epoch of 75 "
        "steps, and a stop waits for the step in flight; this spec is sized for GPUs, "
        "configs/gan3d_small.yaml for CPUs (docs/tutorials/gan.md)"
    )
    assert estimate.measured_line(1.0) is None


def test_the_small_specs_named_are_the_shipped_ones() -> None:
    for detector, (path, name) in SMALL_SPECS.items():
        raw = yaml.safe_load((REPO / path).read_text())
        assert raw["spec"]["name"] == name
        assert raw.get("data", {}).get("detector", "clic-ecal") == detector


def test_the_probe_times_a_step_and_leaves_the_global_stream_alone() -> None:
    spec = load_config(REPO / "configs" / "gan3d_tiny.yaml").spec
    state = torch.get_rng_state()
    assert probe_seconds(spec, ForwardOptions()) > 0
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("announce", [True, False])
@pytest.mark.slow
def test_the_trainer_says_it_before_the_first_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, announce: bool
) -> None:
    """Every epoch counts as long (``long_epoch_s`` 0): the estimate is said once, before the
    first step ends; not at all in a training that announces nothing (a search's)."""
    config = load_config(REPO / "configs" / "gan3d_tiny.yaml", SHORT)
    said_by_first_step: list[list[str]] = []

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if "on this CPU" in r.getMessage()]

    def on_step(_info: object) -> None:
        if not said_by_first_step:
            said_by_first_step.append(said())

    opening = Opening(tmp_path / "run", announce=announce, long_epoch_s=0.0)
    logs = caplog.at_level(logging.WARNING, logger="evogan")
    with logs, GanTrainer(config, opening, MPI.COMM_WORLD, StopFlag(), on_step) as trainer:
        trainer.train()
    if not announce:
        assert said() == []
        return
    [before] = said_by_first_step
    assert len(before) == 1 and START in before[0]
    assert "showers will take about " in before[0] and "per epoch of 2 steps" in before[0]
    assert before[0].endswith("configs/gan3d_small.yaml for CPUs (docs/tutorials/gan.md)")
    assert all(START not in line for line in said()[1:])  # said once
    assert all(MEASURED in line for line in said()[1:])


def test_only_rank_0_says_it(tmp_path: Path) -> None:
    script = ["tests/mpi_scripts/estimate_check.py", "configs/gan3d_tiny.yaml"]
    done = mpirun(2, [*script, "--run-dir", str(tmp_path / "run")])
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if START in line]
    assert len(lines) == 1 and "a step of 16 showers" in lines[0]  # 8 per rank
