"""The generator's weight average: its arithmetic, and a training that keeps one (validated,
saved and checkpointed with it) under real mpirun."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evogan.gan3d.training.weight_average import WARMUP_STEPS, WeightAverage
from evogan.store import load_weights
from tests.gan_fixtures import tiny_generator

from .conftest import mpirun

CONFIG = "configs/gan3d_tiny.yaml"
AVERAGED = ["--set", "trainer.steps_per_epoch=2", "--set", "trainer.generator_average=0.9"]


def _fill(generator: torch.nn.Module, value: float) -> None:
    with torch.no_grad():
        for p in generator.parameters():
            p.fill_(value)


def test_the_average_is_an_exponential_moving_average_with_a_warmup() -> None:
    generator = tiny_generator(0)
    _fill(generator, 0.0)
    average = WeightAverage(generator, decay=0.9)
    expected = 0.0
    for step, value in enumerate([1.0, 2.0, 4.0, -3.0, 5.0, 0.5] * 4, start=1):
        _fill(generator, value)
        average.update(generator)
        decay = min(0.9, (1 + step) / (WARMUP_STEPS + step))
        expected = decay * expected + (1 - decay) * value
    averaged = average.applied(generator)
    for p in averaged.parameters():
        assert torch.allclose(p, torch.full_like(p, expected), atol=1e-5)
    # the training generator keeps its own weights
    assert all(float(p.detach().flatten()[0]) == 0.5 for p in generator.parameters())


def test_a_restored_average_continues_where_the_saved_one_was() -> None:
    generator = tiny_generator(0)
    first = WeightAverage(generator, decay=0.99)
    for value in (1.0, 3.0):
        _fill(generator, value)
        first.update(generator)
    second = WeightAverage(tiny_generator(1), decay=0.99)
    second.load({k: v.clone() for k, v in first.tensors().items()})
    for average in (first, second):
        average.update(generator)
    assert second.updates == first.updates == 3
    assert all(a.equal(b) for a, b in zip(first.params, second.params, strict=True))


def test_a_decay_outside_the_unit_interval_is_refused() -> None:
    with pytest.raises(ValueError, match=r"decay must lie in \(0, 1\), got 1.0"):
        WeightAverage(tiny_generator(0), decay=1.0)


@pytest.mark.mpi
@pytest.mark.slow
def test_saved_generators_carry_the_average_and_a_resumed_run_continues_it_exactly(
    tmp_path: Path,
) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    args = ["-m", "evogan", "train", CONFIG, *AVERAGED]
    for run, epochs in ((straight, 2), (resumed, 1)):
        done = mpirun(2, [*args, "--run-dir", str(run), "--set", f"trainer.epochs={epochs}"])
        assert done.returncode == 0, done.stderr[-3000:]
    done = mpirun(
        2, ["-m", "evogan", "train", "--resume", str(resumed), "--set", "trainer.epochs=2"]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    expected, _ = load_weights(straight / "best_model.h5")
    got, _ = load_weights(resumed / "best_model.h5")
    assert all(got[k].equal(expected[k]) for k in expected)
    (checkpoint,) = (straight / "checkpoints").iterdir()
    state, _ = load_weights(checkpoint)
    assert int(state["generator_average/updates"]) == 2 * 2
    # the saved generator is the average, not the last step's weights
    weights = [k for k in expected if k.endswith(".weight")]
    assert weights and any(not expected[k].equal(state[f"generator/{k}"]) for k in weights)
