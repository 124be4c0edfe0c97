"""Specs written for a detector: the output shape from its grid, circular padding of a
cylinder's angular axis (rotation equivariance), and one-line refusals of specs that cannot be
trained for it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from evogan.config import load_config
from evogan.config.base import read_yaml, validate
from evogan.errors import ConfigError
from evogan.gan3d.model.losses import transverse_width
from evogan.gan3d.model.networks import build_models, parameter_count
from evogan.gan3d.model.spec import GanSpec, discriminator_layers, load_spec

REPO = Path(__file__).resolve().parents[1]
CC2 = REPO / "configs" / "gan3d_cc2_small.yaml"
ANGULAR = 3  # the angular axis of a (N, C, radial, angular, layer) tensor


def cc2_raw() -> dict:
    return copy.deepcopy(read_yaml(CC2)["spec"]) | {"detector": "calochallenge-2"}


def spec_of(raw: dict) -> GanSpec:
    return validate(GanSpec, raw, source="test spec")


def models(raw: dict) -> tuple[torch.nn.Module, torch.nn.Module]:
    generator, discriminator = build_models(spec_of(raw), torch.Generator().manual_seed(3))
    return generator.eval(), discriminator.eval()


def roll(x: torch.Tensor, bins: int = 1) -> torch.Tensor:
    return torch.roll(x, shifts=bins, dims=ANGULAR)


def blocks(discriminator: torch.nn.Module) -> torch.nn.Sequential:
    """The discriminator's convolution blocks (its features before pooling and flatten)."""
    return discriminator.features[:-2]


def test_the_cc2_spec_takes_its_shape_and_circular_padding_from_the_detector() -> None:
    spec = load_config(CC2).spec
    assert spec.detector == "calochallenge-2"
    assert spec.output_shape == (9, 16, 45)
    assert spec.cylindrical and spec.circular_axis == 1
    clic = load_config(REPO / "configs" / "gan3d_small.yaml").spec
    assert clic.detector == "clic-ecal" and clic.circular_axis is None


@pytest.mark.parametrize(
    ("config", "shape", "generator_params", "discriminator_params", "features"),
    [
        ("gan3d_cc2_small.yaml", (9, 16, 45), 573_969, 5_434, 864),
        ("gan3d_small.yaml", (51, 51, 25), None, None, None),
        ("gan3d_fixed25.yaml", (25, 25, 25), None, None, None),
    ],
)
def test_spec_shapes_and_parameter_counts_per_detector(
    config: str,
    shape: tuple,
    generator_params: int | None,
    discriminator_params: int | None,
    features: int | None,
) -> None:
    spec = load_config(REPO / "configs" / config).spec
    assert spec.output_shape == shape
    generator, discriminator = build_models(spec, torch.Generator().manual_seed(0))
    out = generator(torch.zeros(2, spec.latent_size))
    assert tuple(out.shape) == (2, 1, *shape)
    heads = discriminator(out, torch.ones(2))
    assert heads["real_fake"].shape == (2,)
    if generator_params is not None:
        # dense seed 32 -> 8x9x16x15 (+ bias), three 3x3x3 blocks, two BNs, one noise scale
        dense = 32 * 8 * 9 * 16 * 15 + 8 * 9 * 16 * 15
        convs = 2 * (8 * 8 * 27 + 8) + (8 * 27 + 1)
        assert parameter_count(generator) == generator_params == dense + convs + 2 * 16 + 8
        assert parameter_count(discriminator) == discriminator_params
        assert discriminator_layers(spec)[-1].in_shape == (features,)


def test_rotating_a_shower_by_one_angular_bin_rotates_features_and_output_alike() -> None:
    generator, discriminator = models(cc2_raw())
    shower = torch.rand(2, 1, 9, 16, 45, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        features = blocks(discriminator)(shower)
        assert torch.allclose(blocks(discriminator)(roll(shower)), roll(features), atol=1e-6)
        seed = torch.rand(2, *generator.seed_shape, generator=torch.Generator().manual_seed(2))
        made = generator.blocks(seed)
        assert made.abs().sum() > 0
        assert torch.allclose(generator.blocks(roll(seed)), roll(made), atol=1e-6)
        assert not torch.allclose(roll(made), made, atol=1e-6)  # the rotation is seen


def test_without_circular_padding_the_seam_breaks_the_rotation() -> None:
    _, discriminator = models(cc2_raw() | {"circular_padding": False})
    shower = torch.rand(2, 1, 9, 16, 45, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        features = blocks(discriminator)(shower)
        assert not torch.allclose(blocks(discriminator)(roll(shower)), roll(features), atol=1e-4)


@pytest.mark.slow
def test_circular_padding_runs_the_same_in_the_fft_form() -> None:
    from evogan.gan3d.kernels import set_convolution

    _, discriminator = models(cc2_raw())
    shower = torch.rand(2, 1, 9, 16, 45, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        direct = blocks(discriminator)(shower)
        set_convolution(discriminator, "fft")
        for block in blocks(discriminator):
            block.fft_min_taps = 1
        assert torch.allclose(blocks(discriminator)(shower), direct, atol=1e-5)


def test_the_cylindrical_width_ignores_rotation_and_grows_with_radius() -> None:
    cells = torch.zeros(1, 9, 16, 45)
    cells[0, 0, :, 10] = 1.0  # a ring in the first radial bin
    wide = torch.zeros(1, 9, 16, 45)
    wide[0, 6, :, 10] = 1.0
    assert transverse_width(wide, cylindrical=True) > 5 * transverse_width(cells, True)
    blob = torch.rand(1, 9, 16, 45, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(
        transverse_width(torch.roll(blob, 4, dims=2), True), transverse_width(blob, True)
    )


def test_a_spec_of_another_shape_is_refused_naming_both() -> None:
    raw = cc2_raw() | {"output_shape": [51, 51, 25]}
    with pytest.raises(ConfigError, match=r"output_shape 51x51x25 .* calochallenge-2 \(9x16x45\)"):
        spec_of(raw)


def test_a_config_whose_synthetic_detector_does_not_fit_the_spec_is_refused(
    tmp_path: Path,
) -> None:
    raw = read_yaml(REPO / "configs" / "gan3d_small.yaml")
    raw["data"]["detector"] = "calochallenge-2"
    path = tmp_path / "mixed.yaml"
    import yaml

    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"51x51x25 does not fit data.detector calochallenge-2"):
        load_config(path)


def test_circular_padding_on_a_cartesian_grid_is_refused() -> None:
    raw = read_yaml(REPO / "configs" / "gan3d_small.yaml")["spec"] | {"circular_padding": True}
    with pytest.raises(ConfigError, match="Cartesian grid, whose x and y end"):
        spec_of(raw)


def test_an_irregular_detector_is_refused_for_gan_training() -> None:
    raw = cc2_raw() | {"detector": "calochallenge-1-photons"}
    raw.pop("output_shape", None)
    with pytest.raises(ConfigError, match=r"bins its layers differently .* no 3D convolutional"):
        spec_of(raw)


def test_an_angle_on_a_cylindrical_detector_is_refused() -> None:
    raw = cc2_raw()
    raw["heads"] = {**raw["heads"], "angle": True}
    raw["conditioning"] = {**raw["conditioning"], "angle": True}
    with pytest.raises(ConfigError, match="detector calochallenge-2 is cylindrical"):
        spec_of(raw)


def test_a_block_that_shrinks_the_ring_is_refused() -> None:
    raw = cc2_raw()
    raw["discriminator"][1] = {**raw["discriminator"][1], "padding": "valid"}
    with pytest.raises(ConfigError, match="circular angular axis of 16 cells into 14"):
        spec_of(raw)


def test_a_bare_spec_file_reads_for_the_data_it_is_given(tmp_path: Path) -> None:
    import yaml

    bare = tmp_path / "spec.yaml"
    raw = read_yaml(CC2)["spec"]
    bare.write_text(yaml.safe_dump(raw))
    assert load_spec(bare, data={"detector": "calochallenge-2"}).output_shape == (9, 16, 45)
    with pytest.raises(ConfigError, match=r"generator block .* produces"):
        load_spec(bare)  # no detector: the CLIC ECAL's 51x51x25, which these blocks cannot make
