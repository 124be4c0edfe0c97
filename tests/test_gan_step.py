"""The 3DGAN training step: losses, gradient split for data parallelism, reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evogan.errors import EvoganError
from evogan.gan3d.model.losses import flipped_labels, mae, mape
from evogan.gan3d.model.networks import (
    EMPTY_ANGLE,
    build_models,
    measured_angle,
    to_gev,
    to_network,
)
from evogan.gan3d.training.step import GanStep
from tests.gan_fixtures import tiny_spec, toy_showers


def _step(seed: int = 0) -> GanStep:
    spec = tiny_spec()
    generator, discriminator = build_models(spec, torch.Generator().manual_seed(seed))
    return GanStep(spec, generator, discriminator, torch.Generator().manual_seed(seed + 1))


def _batch(n: int = 8, seed: int = 0):
    ecal, energy, theta = toy_showers(n, seed)
    return torch.from_numpy(ecal), torch.from_numpy(energy), torch.from_numpy(theta)


def test_losses_have_their_keras_definitions() -> None:
    assert float(mape(torch.tensor([1.1, 1.8]), torch.tensor([1.0, 2.0]))) == pytest.approx(10.0)
    assert float(mae(torch.tensor([1.0, 3.0]), torch.tensor([2.0, 2.0]))) == pytest.approx(1.0)
    labels = flipped_labels(1.0, 20_000, 0.05, torch.Generator().manual_seed(0), "cpu")
    assert set(labels.unique().tolist()) == {0.0, 1.0}
    assert abs(float((labels == 0).float().mean()) - 0.05) < 0.01
    assert torch.equal(flipped_labels(0.0, 5, 0.0, torch.Generator(), "cpu"), torch.zeros(5))


@pytest.mark.slow
def test_losses_fall_on_a_tiny_dataset() -> None:
    step = _step()
    real, energy, theta = _batch(4)
    history = [step.train_step(real, energy, theta) for _ in range(6)]
    for key in ("d_loss", "g_loss", "d_energy"):
        first = np.mean([h[key] for h in history[:2]])
        last = np.mean([h[key] for h in history[-2:]])
        assert last < first, (key, [round(h[key], 3) for h in history])
    assert all(math.isfinite(v) for h in history for v in h.values())


def test_gradient_methods_fill_grads_without_stepping() -> None:
    step = _step()
    real, energy, theta = _batch(8)
    before_g = [p.detach().clone() for p in step.generator.parameters()]
    before_d = [p.detach().clone() for p in step.discriminator.parameters()]
    metrics = step.discriminator_grads(real, energy, theta)
    assert {"d_loss", "d_real_fake", "d_energy", "d_ecal_sum", "d_angle"} <= set(metrics)
    assert all(p.grad is None for p in step.generator.parameters())
    assert all(p.grad is not None for p in step.discriminator.parameters())
    d_grads = [p.grad.clone() for p in step.discriminator.parameters()]
    metrics = step.generator_grads(8, energy, theta)
    assert {"g_loss", "g_real_fake", "g_energy", "g_ecal_sum", "g_angle"} <= set(metrics)
    assert all(p.grad is not None for p in step.generator.parameters())
    assert any(float(p.grad.abs().sum()) > 0 for p in step.generator.parameters())
    for grad, p in zip(d_grads, step.discriminator.parameters(), strict=True):
        assert torch.equal(grad, p.grad)  # the generator pass leaves D's gradients alone
        assert p.requires_grad
    for old, p in zip(
        before_g + before_d,
        [*step.generator.parameters(), *step.discriminator.parameters()],
        strict=True,
    ):
        assert torch.equal(old, p.detach())


@pytest.mark.slow
def test_same_seeds_give_the_same_training() -> None:
    real, energy, theta = _batch(4)
    a = _step(3).train_step(real, energy, theta)
    b = _step(3).train_step(real, energy, theta)
    assert a == b
    assert _step(4).train_step(real, energy, theta) != a


def test_generator_grads_need_real_sums_and_angles() -> None:
    step = _step()
    real, energy, theta = _batch(8)
    with pytest.raises(EvoganError, match="call discriminator_grads first"):
        step.generator_grads(8, energy, theta)
    ecal_sum = torch.full((8,), 50.0)
    assert math.isfinite(step.generator_grads(8, energy, theta, ecal_sum=ecal_sum)["g_loss"])
    # numpy arrays straight from the reader's chunks work too; their sums become the targets.
    from_numpy = step.discriminator_grads(real.numpy(), energy.numpy(), theta.numpy())
    assert math.isfinite(from_numpy["d_loss"])
    assert math.isfinite(step.generator_grads(8, energy, theta)["g_loss"])
    with pytest.raises(EvoganError, match="real batch of the same size"):
        step.generator_grads(4, energy[:4], theta[:4])
    with pytest.raises(EvoganError, match="conditioned on the angle but no theta"):
        step.generator_grads(8, energy, None, ecal_sum=ecal_sum)
    with pytest.raises(EvoganError, match=r"one value per shower \(8\), got 7"):
        step.generator_grads(8, energy[:7], theta, ecal_sum=ecal_sum)


def test_cell_transform_round_trips() -> None:
    spec = tiny_spec()  # cells x 50, power 0.85
    cells = torch.tensor([[[[0.0, 1e-3, 0.5, 2.0]]]])
    net = to_network(spec, cells)
    assert net.shape == (1, 1, 1, 1, 4)
    assert float(net[0, 0, 0, 0, 2]) == pytest.approx(25.0**0.85)
    torch.testing.assert_close(to_gev(spec, net), cells)


def _track(theta_deg: float) -> torch.Tensor:
    """A straight track in the y-z plane, energy split linearly between neighbouring rows."""
    slope = 1.0 / math.tan(math.radians(theta_deg))
    cells = torch.zeros(1, 51, 51, 25, dtype=torch.float64)
    for z in range(25):
        y = 25.0 + (z - 12) * slope
        low = math.floor(y)
        cells[0, 25, low, z] += 1 - (y - low)
        cells[0, 25, low + 1, z] += y - low
    return cells


def test_measured_angle_of_straight_tracks() -> None:
    assert math.degrees(float(measured_angle(_track(90.0)))) == pytest.approx(90.0)
    measured = [math.degrees(float(measured_angle(_track(t)))) for t in (60, 75, 105, 120)]
    # The layer at the barycentre counts as 90 degrees (as in the original), pulling by < 2.
    for true, got in zip((60, 75, 105, 120), measured, strict=True):
        assert abs(got - true) < 2.0
    assert measured == sorted(measured)
    assert float(measured_angle(torch.zeros(2, 5, 5, 5))[0]) == EMPTY_ANGLE


def test_a_conditional_discriminator_judges_a_shower_against_its_energy() -> None:
    """The projection head makes the real/fake logit depend on the energy a shower is paired
    with; the unconditional head ignores it (and a conditional one refuses to guess it)."""
    spec = tiny_spec()
    conditional = spec.model_copy(
        update={"heads": spec.heads.model_copy(update={"conditional": True})}
    )
    ecal, energy, theta = toy_showers(4)
    image = to_network(spec, torch.from_numpy(ecal))
    low, high = torch.full((4,), 0.2), torch.full((4,), 1.5)
    _, plain = build_models(spec, torch.Generator().manual_seed(0))
    _, judge = build_models(conditional, torch.Generator().manual_seed(0))
    plain.eval(), judge.eval()
    with torch.no_grad():
        assert torch.equal(plain(image, low)["real_fake"], plain(image, high)["real_fake"])
        assert not torch.allclose(judge(image, low)["real_fake"], judge(image, high)["real_fake"])
        with pytest.raises(ValueError, match="needs the energy"):
            judge(image)
    step = GanStep(conditional, *build_models(conditional), torch.Generator().manual_seed(1))
    metrics = step.train_step(*(torch.from_numpy(a) for a in (ecal, energy, theta)))
    assert math.isfinite(metrics["d_loss"]) and math.isfinite(metrics["g_loss"])


def test_the_width_term_measures_the_validation_width_and_pulls_the_generator() -> None:
    """``transverse_width`` is the validation's width (mm / cell size) and differentiable; with
    ``loss_weights.width`` on, the generator's loss gains the batch-mean width gap."""
    from evogan.detectors import detector_for

    CELL_MM = detector_for("clic-ecal").geometry.cell_mm
    from evogan.gan3d.model.losses import transverse_width
    from evogan.physics.features import shower_features

    ecal, energy, _ = toy_showers(6, seed=3)
    table = shower_features(ecal, energy)
    expected = 0.5 * (table.scalars["width_x_mm"] + table.scalars["width_y_mm"]) / CELL_MM
    cells = torch.from_numpy(ecal).double().requires_grad_(True)
    widths = transverse_width(cells)
    assert np.allclose(widths.detach().numpy(), expected, rtol=1e-9)
    widths.sum().backward()
    assert torch.isfinite(cells.grad).all() and cells.grad.abs().sum() > 0

    spec = tiny_spec()
    weighted = spec.model_copy(
        update={"loss_weights": spec.loss_weights.model_copy(update={"width": 0.1})}
    )
    step = GanStep(weighted, *build_models(weighted), torch.Generator().manual_seed(1))
    with pytest.raises(EvoganError, match="real batch"):
        step.generator_grads(4, torch.full((4,), 50.0), torch.full((4,), 1.5))
    metrics = step.train_step(*_batch(4))
    assert metrics["g_width"] > 0 and math.isfinite(metrics["g_loss"])
    assert "g_width" not in _step().train_step(*_batch(4))


def test_the_sampling_fraction_term_is_zero_at_the_data_scale_and_pulls_the_generator() -> None:
    """The sampling-fraction term is the percentage gap of batch-mean ECAL sum / energy: zero
    for the real sums themselves, 10 for sums 10% high; on in the step, it joins g_loss and
    the step reports the signed generated / real ratio."""
    from evogan.gan3d.model.losses import batch_features, batch_mean_gap

    energy = torch.tensor([10.0, 50.0, 150.0])
    real = torch.tensor([0.21, 1.02, 2.9])
    cells = real[:, None, None, None] * torch.tensor([0.25, 0.75]).reshape(1, 2, 1, 1)
    fraction = batch_features(cells, energy, ("sampling_fraction",))["sampling_fraction"]
    assert torch.allclose(fraction, real / energy)
    for scale, gap in ((1.0, 0.0), (1.1, 10.0), (0.8, 20.0)):
        assert float(batch_mean_gap(scale * real / energy, real / energy)) == pytest.approx(gap)

    spec = tiny_spec()
    weighted = spec.model_copy(
        update={"loss_weights": spec.loss_weights.model_copy(update={"sampling_fraction": 0.5})}
    )
    step = GanStep(weighted, *build_models(weighted), torch.Generator().manual_seed(1))
    metrics = step.train_step(*_batch(4))
    assert metrics["g_sampling_fraction"] > 0 and math.isfinite(metrics["g_loss"])
    ratio = metrics["g_sampling_fraction_ratio"]
    assert metrics["g_sampling_fraction"] == pytest.approx(100 * abs(ratio - 1), rel=1e-4)
    assert "g_sampling_fraction" not in _step().train_step(*_batch(4))


@pytest.mark.slow
def test_the_soft_hit_count_follows_the_validation_hits_and_the_term_pulls_the_generator() -> None:
    """``soft_hit_count`` tracks the validation's hard count (cells > 3e-4 GeV) within 15% and
    moves with it when cells fall below the threshold; it passes gradient to cells near the
    threshold. With ``loss_weights.hits`` on, the generator's loss gains the batch-mean gap,
    and a generator step without a real batch is refused."""
    from evogan.gan3d.model.losses import batch_mean_gap, soft_hit_count
    from evogan.physics.observables import hit_count

    ecal, _, _ = toy_showers(6, seed=3)
    hard = hit_count(ecal).astype(float)
    soft = soft_hit_count(torch.from_numpy(ecal)).numpy()
    assert np.all(np.abs(soft / hard - 1.0) < 0.15)
    dimmed = soft_hit_count(torch.from_numpy(0.05 * ecal)).numpy()
    assert np.all(dimmed < 0.8 * soft) and np.all(hit_count(0.05 * ecal) < hard)

    cells = torch.from_numpy(ecal).clone().requires_grad_(True)
    real = soft_hit_count(cells).detach()
    matched = batch_mean_gap(soft_hit_count(cells), real).detach()
    assert float(matched) == pytest.approx(0.0, abs=1e-9)
    batch_mean_gap(soft_hit_count(0.5 * cells), real).backward()
    near = (cells > 1e-4) & (cells < 1e-3)
    assert (cells.grad[near] < 0).all()  # raising a dimmed cell near the threshold lowers the gap

    spec = tiny_spec()
    weighted = spec.model_copy(
        update={"loss_weights": spec.loss_weights.model_copy(update={"hits": 0.2})}
    )
    step = GanStep(weighted, *build_models(weighted), torch.Generator().manual_seed(1))
    with pytest.raises(EvoganError, match="hits of a real batch"):
        step.generator_grads(4, torch.full((4,), 50.0), torch.full((4,), 1.5), torch.ones(4))
    metrics = step.train_step(*_batch(4))
    assert metrics["g_hits"] > 0 and math.isfinite(metrics["g_loss"])
    assert metrics["g_hits_ratio"] > 0
    assert "g_hits" not in _step().train_step(*_batch(4))


def test_a_cylinder_hit_term_counts_above_the_voxel_threshold_its_features_count_at() -> None:
    """A cylindrical detector's hits are voxels above 1 keV (the CaloChallenge spectrum's
    start), not the Cartesian 3e-4 GeV: the batch term follows the detector's count."""
    from evogan.data.synthetic import synthesize
    from evogan.detectors import detector_for
    from evogan.gan3d.model.losses import batch_features
    from evogan.physics.features import VOXEL_HIT_THRESHOLD

    detector = detector_for("calochallenge-2")
    ecal, energy, _ = next(synthesize(6, (1.0, 1000.0), 5, detector=detector, log_uniform=True))
    cells = torch.from_numpy(ecal.reshape(6, *detector.grid_shape)).float()
    hard = (ecal.reshape(6, -1) > VOXEL_HIT_THRESHOLD).sum(axis=1).astype(float)
    found = batch_features(cells, torch.from_numpy(energy).float(), ("hits",), cylindrical=True)
    assert np.all(np.abs(found["hits"].numpy() / hard - 1.0) < 0.15)
    cartesian = batch_features(cells, torch.from_numpy(energy).float(), ("hits",))
    assert np.all(cartesian["hits"].numpy() < found["hits"].numpy())
