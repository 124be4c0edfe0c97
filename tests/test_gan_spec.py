"""3DGAN specs: shipped architectures, Keras padding semantics, shape checks before allocation."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from evogan.config import load_config
from evogan.config.base import read_yaml, validate
from evogan.config.gan import Gan3dConfig
from evogan.errors import ConfigError
from evogan.gan3d.model import spec as gan_shapes
from evogan.gan3d.model.blocks import conv_block
from evogan.gan3d.model.model_file import load_generator, save_generator
from evogan.gan3d.model.networks import (
    build_models,
    keras_parameter_count,
    make_latent,
    parameter_count,
)
from evogan.gan3d.model.spec import GanSpec, load_spec

REPO = Path(__file__).resolve().parents[1]
VARANGLE = REPO / "configs" / "gan3d.yaml"
FIXED = REPO / "configs" / "gan3d_fixed25.yaml"
TINY = REPO / "configs" / "gan3d_tiny.yaml"
SMALL = REPO / "configs" / "gan3d_small.yaml"


@pytest.mark.parametrize(
    ("path", "gen_ref", "disc_ref", "features", "shape"),
    [
        (VARANGLE, 1.37e6, 87e3, 19_152, (51, 51, 25)),
        (FIXED, 873e3, 73e3, 10_648, (25, 25, 25)),
    ],
)
def test_shipped_specs_match_the_keras_models(path, gen_ref, disc_ref, features, shape) -> None:
    spec = load_spec(path)
    generator, discriminator = build_models(spec, torch.Generator().manual_seed(0))
    # Keras summary() counts BN moving statistics too; both counts are within 1%.
    for count in (keras_parameter_count(generator), parameter_count(generator)):
        assert abs(count - gen_ref) / gen_ref < 0.01
    for count in (keras_parameter_count(discriminator), parameter_count(discriminator)):
        assert abs(count - disc_ref) / disc_ref < 0.01
    assert gan_shapes.flatten_features(spec) == features
    generator.eval()
    discriminator.eval()
    with torch.no_grad():
        image = generator(torch.randn(1, spec.latent_size))
        heads = discriminator(image)
    assert image.shape == (1, 1, *shape)
    expected = {"real_fake", "energy", "ecal_sum"} | ({"angle"} if spec.heads.angle else set())
    assert set(heads) == expected
    assert all(value.shape == (1,) for value in heads.values())


def test_exact_keras_counts_of_the_variable_angle_model() -> None:
    generator, discriminator = build_models(load_spec(VARANGLE))
    assert keras_parameter_count(generator) == 1_365_047
    assert keras_parameter_count(discriminator) == 87_402


@pytest.mark.parametrize("path", [VARANGLE, FIXED, TINY, SMALL])
def test_shape_arithmetic_matches_the_built_modules(path) -> None:
    spec = load_spec(path)
    generator, discriminator = build_models(spec)
    seen: list[tuple[int, ...]] = []
    hooks = [
        m.register_forward_hook(lambda _m, _i, out: seen.append(tuple(out.shape[1:])))
        for m in [*generator.blocks, *discriminator.features[: len(spec.discriminator) + 1]]
    ]
    generator.eval()
    discriminator.eval()
    with torch.no_grad():
        discriminator(generator(torch.randn(1, spec.latent_size)), torch.ones(1))
    for hook in hooks:
        hook.remove()
    layers = gan_shapes.generator_layers(spec)[1:] + gan_shapes.discriminator_layers(spec)[:-1]
    assert seen == [layer.out_shape for layer in layers]


def test_same_padding_puts_the_extra_cell_after_the_data_like_keras() -> None:
    assert gan_shapes.same_padding(6) == (2, 3)
    assert gan_shapes.same_padding(5) == (2, 2)
    spec = load_spec(VARANGLE)
    block = spec.discriminator[0].model_copy(update={"kernel": (6, 1, 1), "dropout": 0.0})
    module = conv_block(block, 1, slope=0.3, bn_eps=1e-3, bn_momentum=0.01, rng=None)
    conv = next(m for m in module if isinstance(m, torch.nn.Conv3d))
    with torch.no_grad():
        conv.weight.fill_(1.0)
        conv.bias.zero_()
        x = torch.zeros(1, 1, 10, 1, 1)
        x[0, 0, 0] = 1.0
        out = module(x)[0, 0, :, 0, 0]  # LeakyReLU of non-negative values is the identity
    assert out.shape == (10,)
    # Output i sees inputs i-2 .. i+3, so the delta at 0 reaches outputs 0, 1, 2 only.
    assert out.nonzero().flatten().tolist() == [0, 1, 2]


def _raw(path: Path) -> dict:
    return read_yaml(path)


def test_a_generator_block_that_collapses_is_named_with_its_shape() -> None:
    raw = _raw(VARANGLE)
    raw["spec"]["generator"][1]["kernel"] = [60, 4, 6]
    with pytest.raises(ConfigError) as info:
        validate(Gan3dConfig, raw)
    message = str(info.value)
    assert "\n" not in message
    assert "generator block 2 of 7" in message and "(6, -6, 50, 38)" in message


def test_a_generator_that_misses_the_output_shape_names_its_last_block() -> None:
    raw = _raw(VARANGLE)["spec"]
    raw["generator"][-1]["kernel"] = [1, 2, 2]
    with pytest.raises(ConfigError, match=r"generator block 7 of 7 .* produces \(1, 52, 51, 25\)"):
        GanSpec.model_validate(raw)


def test_discriminator_blocks_and_pooling_are_checked() -> None:
    raw = _raw(FIXED)["spec"]
    raw["discriminator"][3]["zero_pad"] = [0, 0, 0]
    raw["discriminator"][3]["kernel"] = [26, 5, 5]
    expected = r"discriminator block 4 of 4 .* produces \(8, 0, 21, 21\)"
    with pytest.raises(ConfigError, match=expected):
        GanSpec.model_validate(raw)
    raw = _raw(FIXED)["spec"]
    raw["pooling"]["size"] = [30, 2, 2]
    expected = r"discriminator pooling \(30, 2, 2\) .* \(8, 0, 11, 11\)"
    with pytest.raises(ConfigError, match=expected):
        GanSpec.model_validate(raw)


def test_inconsistent_conditioning_is_rejected(tmp_path: Path) -> None:
    raw = _raw(TINY)
    raw["spec"]["conditioning"]["angle"] = False
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"heads\.angle needs conditioning\.angle"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"unknown key spec\.pooling\.sizes; did you mean"):
        load_config(TINY, ["spec.pooling.sizes=[2, 2, 2]"])


def test_small_spec_counts_follow_from_its_blocks() -> None:
    """Dense seed from the latent, then each convolution (weights + bias) and batch norm."""
    spec = load_spec(SMALL)
    generator, discriminator = build_models(spec)
    seed_cells = torch.Size(spec.dense_seed).numel()
    expected, channels = (spec.latent_size + 1) * seed_cells, spec.dense_seed[0]
    for block in spec.generator:
        taps = torch.Size(block.kernel).numel()
        expected += block.filters * (channels * taps + 1) + 2 * block.filters * block.batch_norm
        channels = block.filters
    assert parameter_count(generator) == expected
    assert parameter_count(generator) < 1.0e6 and parameter_count(discriminator) < 5.0e4
    plain = spec.model_copy(update={"heads": spec.heads.model_copy(update={"conditional": False})})
    _, unconditional = build_models(plain)
    projection = 2 * discriminator.projection.in_features  # (e, ln e) . V h, no bias
    assert parameter_count(discriminator) - parameter_count(unconditional) == projection


@pytest.mark.parametrize(("path", "blocky"), [(TINY, True), (SMALL, False)])
def test_only_a_full_resolution_output_path_can_make_a_one_cell_core(path, blocky) -> None:
    """Nearest upsampling followed by 1x1x1 convolutions repeats each value over its upsampled
    block (the tiny spec: 3x3x5 blocks); the small spec's 3x3 convolutions at full resolution
    make every cell its own, which a shower core one cell wide needs."""
    spec = load_spec(path)
    generator, _ = build_models(spec, torch.Generator().manual_seed(1))
    generator.eval()
    with torch.no_grad():
        image = generator(torch.randn(4, spec.latent_size, generator=torch.Generator()))[:, 0]
    factor = [1, 1, 1]
    for block in spec.generator:
        factor = [f * u for f, u in zip(factor, block.upsample, strict=True)]
    n, (x, y, z), (ux, uy, uz) = image.shape[0], spec.output_shape, factor
    blocks = image.reshape(n, x // ux, ux, y // uy, uy, z // uz, uz)
    assert torch.isfinite(image).all() and (image > 0).float().mean() > 0.05
    assert bool(torch.all(blocks == blocks[:, :, :1, :, :1, :, :1])) is blocky


def test_full_configs_load_as_gan3d_tasks() -> None:
    for path in (VARANGLE, FIXED, TINY, SMALL):
        cfg = load_config(path)
        assert isinstance(cfg, Gan3dConfig) and cfg.task == "gan3d"
    assert load_config(VARANGLE).spec == load_spec(VARANGLE)


def test_generator_files_are_self_describing(tmp_path: Path) -> None:
    spec = load_spec(TINY)
    generator, _ = build_models(spec, torch.Generator().manual_seed(3))
    generator.eval()
    path = save_generator(tmp_path / "g.h5", spec, generator, {"epoch": 4})
    loaded_spec, loaded, meta = load_generator(path)
    assert loaded_spec == spec and meta["epoch"] == 4
    z = torch.randn(3, spec.latent_size)
    with torch.no_grad():
        assert torch.equal(loaded(z), generator(z))


def test_data_of_another_window_is_refused_naming_both_and_the_fix() -> None:
    spec = load_config(TINY).spec
    gan_shapes.check_window(spec, (51, 51, 25), [Path("a.h5")])
    gan_shapes.check_window(spec, (0, 0, 0), [])  # no showers: nothing to check
    files = [Path("/data/EleEscan_1_1.h5"), Path("/data/EleEscan_1_2.h5"), Path("x.h5")]
    with pytest.raises(ConfigError) as info:
        gan_shapes.check_window(spec, (25, 25, 25), files)
    assert str(info.value) == (
        "the data (EleEscan_1_1.h5, EleEscan_1_2.h5 ...) hold showers of 25x25x25 cells but "
        "spec.output_shape is 51x51x25; give data.files of the spec's window, or a spec with "
        "output_shape [25, 25, 25] (configs/gan3d_fixed25.yaml is one for 25x25x25)"
    )


def test_generation_bytes_count_the_largest_layer_and_the_shower() -> None:
    """The tiny generator's peak is its last block: the 4-channel input upsampled to 51x51x25
    and the 1-channel output, beside the float32 shower they are written into."""
    spec = load_config(TINY).spec
    cells = 51 * 51 * 25
    assert gan_shapes.generation_bytes(spec) == 4 * (4 * cells + cells) + 4 * cells
    assert gan_shapes.generation_bytes(spec, 2) == 2 * (4 * cells + cells) + 4 * cells
    assert gan_shapes.generation_bytes(spec, 0) == 4 * cells


def test_a_log_energy_slot_follows_the_energy_and_takes_one_noise_entry() -> None:
    raw = _raw(TINY)["spec"]
    plain = GanSpec.model_validate(raw)
    raw["conditioning"]["log_energy"] = True
    logged = GanSpec.model_validate(raw)
    assert logged.noise_size == plain.noise_size - 1
    energy = torch.tensor([1.0, 10.0, 1000.0])
    theta = torch.full((3,), 1.2)
    latent = make_latent(logged, energy, theta, torch.Generator().manual_seed(0))
    scaled = energy / logged.conditioning.energy_scale
    assert torch.allclose(latent[:, 0], scaled)
    assert torch.allclose(latent[:, 1], scaled.log())
    assert torch.allclose(latent[:, 2], theta)
    assert latent.shape == (3, logged.latent_size)
    raw["conditioning"].update(mode="multiply", angle=False)
    raw["heads"]["angle"] = False
    with pytest.raises(ConfigError, match=r"conditioning\.log_energy needs conditioning\.mode"):
        GanSpec.model_validate(raw)
