"""The :class:`GanSpec`, written for a detector, and its shape arithmetic: what each layer sees
and makes (MACs for the benchmark) and the check of a data window against the spec."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, PositiveInt, model_validator

from evogan.config.base import StrictModel, read_yaml, validate
from evogan.detectors import Detector, detector_for
from evogan.detectors.shipped import DEFAULT
from evogan.errors import ConfigError
from evogan.gan3d.model.spec.sections import (
    ConditioningSpec,
    DiscriminatorBlock,
    GeneratorBlock,
    HeadsSpec,
    LossWeights,
    PoolingSpec,
    Triple,
)

ANGULAR_AXIS = 1
"""The angular axis of a cylindrical detector's grid ``(radial, angular, layer)``."""


class GanSpec(StrictModel):
    """A complete, shape-checked 3DGAN architecture with its training hyper-parameters,
    written for a detector (without one: a Cartesian window of ``output_shape`` cells, as
    specs were before detectors were values)."""

    name: str = Field(default="gan3d", description="the architecture's name in files and tables")
    detector: str | None = Field(
        default=None,
        description="the calorimeter the generator fills (name or XML); null: data.detector's",
    )
    output_shape: Triple = Field(description="the generated cell grid; left out: the detector's")
    circular_padding: bool | None = Field(
        default=None, description="pad the angular axis circularly; null: on a cylinder"
    )
    latent_size: PositiveInt = Field(description="length of the latent vector with its conditions")
    conditioning: ConditioningSpec = Field(
        default_factory=ConditioningSpec, description="how energy and angle enter the latent"
    )
    dense_seed: tuple[PositiveInt, PositiveInt, PositiveInt, PositiveInt] = Field(
        description="(C, X, Y, Z) of the dense layer's output, the first block's input"
    )
    generator: list[GeneratorBlock] = Field(
        min_length=1, description="the generator's convolution blocks; the last has 1 filter"
    )
    discriminator: list[DiscriminatorBlock] = Field(
        min_length=1, description="discriminator blocks"
    )
    pooling: PoolingSpec = Field(
        default_factory=PoolingSpec, description="pooling after the discriminator's blocks"
    )
    heads: HeadsSpec = Field(default_factory=HeadsSpec, description="the discriminator's outputs")
    loss_weights: LossWeights = Field(default_factory=LossWeights, description="the loss terms")
    leaky_slope: float = Field(default=0.3, ge=0, description="leaky_relu's negative slope")
    batch_norm_eps: float = Field(default=1e-3, gt=0, description="batch normalisation epsilon")
    batch_norm_momentum: float = Field(
        default=0.01, gt=0, le=1, description="batch normalisation momentum (PyTorch convention)"
    )
    g_lr: float = Field(default=1e-3, gt=0, description="the generator's learning rate")
    d_lr: float = Field(default=1e-3, gt=0, description="the discriminator's learning rate")
    rmsprop_alpha: float = Field(default=0.9, gt=0, lt=1, description="RMSprop's decay (Keras rho)")
    rmsprop_eps: float = Field(default=1e-7, gt=0, description="RMSprop's epsilon")
    batch_size: PositiveInt = Field(
        default=64, description="showers per rank and step, unless trainer.batch_size"
    )
    label_flip: float = Field(
        default=0.05, ge=0, lt=0.5, description="probability a real/fake label is flipped for D"
    )
    generator_steps: PositiveInt = Field(
        default=2, description="generator updates per discriminator update"
    )
    cell_scale: float = Field(
        default=1.0, gt=0, description="network cell = (cell_scale x GeV) ** cell_power"
    )
    cell_power: float | None = Field(default=None, gt=0, description="see cell_scale; null: 1")

    @model_validator(mode="before")
    @classmethod
    def _shape_from_detector(cls, raw: Any) -> Any:
        """``output_shape`` from the detector when left out; refused when it is not the
        detector's grid (or the detector has none)."""
        if not isinstance(raw, dict):
            return raw
        name = raw.get("detector")
        if name is None and raw.get("output_shape") is None:
            name = DEFAULT
            raw = {**raw, "detector": name}
        if name is None:
            return raw
        if not isinstance(name, str):
            return raw  # the field's own check names the type
        grid = require_grid(detector_for(name), "spec")
        given = raw.get("output_shape")
        if given is None:
            return {**raw, "output_shape": list(grid)}
        if _as_shape(given) not in (None, grid):
            raise ConfigError(
                f"spec: output_shape {_cells(_as_shape(given))} is not the cell grid of detector "
                f"{name} ({_cells(grid)}); leave output_shape out to take the detector's, or "
                "write the spec for that detector"
            )
        return raw

    @model_validator(mode="after")
    def _consistent(self) -> GanSpec:
        cond = self.conditioning
        if self.circular_padding and not self.cylindrical:
            raise ConfigError(
                f"spec: circular_padding closes a cylinder's angular axis on itself, but "
                f"{self.detector or 'this Cartesian window'} is a Cartesian grid, whose x and y "
                "end at the calorimeter's edge; remove circular_padding"
            )
        if self.cylindrical and (cond.angle or self.heads.angle):
            raise ConfigError(
                f"spec: conditioning.angle and heads.angle need showers with an incident angle "
                f"in a Cartesian grid; detector {self.detector} is cylindrical around the "
                "particle's axis: set both to false"
            )
        for slot in ("angle", "log_energy"):
            if cond.mode == "multiply" and getattr(cond, slot):
                raise ConfigError(
                    f"spec: conditioning.{slot} needs conditioning.mode = 'concat', got 'multiply'"
                )
        if cond.mode == "concat" and self.latent_size <= cond.slots:
            raise ConfigError(
                f"spec: latent_size must leave room for noise after the {cond.slots} "
                f"condition slot(s), got {self.latent_size}"
            )
        if self.heads.angle and not cond.angle:
            raise ConfigError(
                "spec: heads.angle needs conditioning.angle = true (the angle is its target)"
            )
        if self.generator[-1].filters != 1:
            raise ConfigError(
                f"spec: the last generator block must have 1 filter (one energy per cell), "
                f"got {self.generator[-1].filters}"
            )
        generator_layers(self)
        discriminator_layers(self)
        return self

    @property
    def cylindrical(self) -> bool:
        """The grid is ``(radial, angular, layer)`` around the particle's axis."""
        return self.detector is not None and detector_for(self.detector).geometry.kind == (
            "cylindrical"
        )

    @property
    def circular_axis(self) -> int | None:
        """The grid axis padded circularly in every convolution, or None."""
        on = self.cylindrical if self.circular_padding is None else self.circular_padding
        return ANGULAR_AXIS if on else None

    @property
    def noise_size(self) -> int:
        """Normal draws in the latent vector (the rest are condition slots)."""
        if self.conditioning.mode == "multiply":
            return self.latent_size
        return self.latent_size - self.conditioning.slots


def require_grid(detector: Detector, purpose: str) -> tuple[int, int, int]:
    """``detector``'s 3D cell grid; refused in one line for a geometry that has none."""
    grid = detector.grid_shape
    if grid is None:
        raise ConfigError(
            f"{purpose}: detector {detector.name} bins its layers differently ({detector.voxels} "
            "voxels in no 3D grid), so no 3D convolutional GAN can be trained for it; evogan data "
            "inspect and evogan validate read it; use a detector with a regular grid"
        )
    return grid


def fit_to_data(raw_spec: Any, data: Any) -> Any:
    """A raw spec with ``detector`` taken from a config's raw ``data`` section where the spec
    names none. Synthetic showers are made in ``data.detector``, so a spec of another shape is
    refused here, naming both; files hold their own detector and are checked when read
    (:func:`check_window`)."""
    if not isinstance(raw_spec, dict) or raw_spec.get("detector") is not None:
        return raw_spec
    data = data if isinstance(data, dict) else {}
    name = data.get("detector", DEFAULT)
    try:
        detector = detector_for(name)
    except (ConfigError, TypeError):
        return raw_spec  # the data section's own check names the problem
    shape, grid = _as_shape(raw_spec.get("output_shape")), detector.grid_shape
    if shape is None or grid is None or shape == grid:
        return {**raw_spec, "detector": name}
    if not data.get("files"):
        raise ConfigError(
            f"spec.output_shape {_cells(shape)} does not fit data.detector {name} "
            f"({_cells(grid)} cells), in which the synthetic showers are made; leave "
            "spec.output_shape out to take the detector's, or set data.detector to the spec's"
        )
    return raw_spec


def load_spec(path: str | Path, data: dict | None = None) -> GanSpec:
    """A spec from YAML: either a bare spec or a full ``task: gan3d`` config's ``spec``, for
    the detector of ``data`` (a raw ``data`` section; default the file's own, if any)."""
    raw = read_yaml(path)
    if "spec" in raw:
        data = raw.get("data") if data is None else data
        raw = raw["spec"]
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: spec must be a mapping, got {type(raw).__name__}")
    return validate(GanSpec, fit_to_data(raw, data), source=str(path))


def _as_shape(value: Any) -> tuple[int, ...] | None:
    """A shape given as a list of integers, or None for anything else."""
    if isinstance(value, list | tuple) and all(isinstance(n, int) for n in value):
        return tuple(value)
    return None


Shape = tuple[int, int, int, int]


@dataclass(frozen=True)
class Layer:
    """One weighted (or pooling) layer: where it is, what it sees and what it makes."""

    net: str  # "generator" or "discriminator"
    name: str  # "dense", "block 3", "pooling"
    in_shape: tuple[int, ...]  # what the convolution sees (after upsampling and padding)
    out_shape: tuple[int, ...]
    kernel: tuple[int, int, int] | None = None

    @property
    def macs(self) -> int:
        """Multiply-accumulates per sample of the forward pass (0 for pooling)."""
        if self.name == "dense":
            return self.in_shape[0] * self.out_shape[0]
        if self.kernel is None:
            return 0
        return math.prod(self.out_shape) * self.in_shape[0] * math.prod(self.kernel)


def same_padding(kernel: int) -> tuple[int, int]:
    """Keras/TensorFlow ``same`` padding of one axis (stride 1): extra cell goes after."""
    before = (kernel - 1) // 2
    return before, kernel - 1 - before


def _conv(
    net: str,
    index: int,
    count: int,
    block: GeneratorBlock | DiscriminatorBlock,
    shape: Shape,
    circular: int | None,
) -> tuple[Layer, Shape]:
    c, *spatial = shape
    up = getattr(block, "upsample", (1, 1, 1))
    spatial = [n * u for n, u in zip(spatial, up, strict=True)]
    ring = None if circular is None else spatial[circular]
    spatial = [n + 2 * p for n, p in zip(spatial, block.zero_pad, strict=True)]
    seen = (c, *spatial)
    if block.padding == "same":
        out = list(spatial)
    else:
        out = [n - k + 1 for n, k in zip(spatial, block.kernel, strict=True)]
    out_shape = (block.filters, *out)
    if min(out) < 1 or min(spatial) < 1:
        raise ConfigError(
            f"spec: {net} block {index} of {count} ({_describe(block)}) produces {out_shape}: "
            f"every side must stay >= 1; enlarge its zero_pad or shrink its kernel"
        )
    if ring is not None:
        where = f"{net} block {index} of {count} ({_describe(block)})"
        _check_ring(where, block, circular, ring, out[circular])
    return Layer(net, f"block {index}", seen, out_shape, tuple(block.kernel)), out_shape


def _check_ring(
    where: str, block: GeneratorBlock | DiscriminatorBlock, axis: int, ring: int, out: int
) -> None:
    """A circular axis keeps its cells (a ring of n cells has no edge to lose), and is padded
    by at most its own cells on each side (one wrap)."""
    kernel, zero = block.kernel[axis], block.zero_pad[axis]
    before, after = same_padding(kernel) if block.padding == "same" else (0, 0)
    if out != ring:
        raise ConfigError(
            f"spec: {where} turns the circular angular axis of {ring} cells into {out}; give "
            f"it padding: same (or zero_pad {(kernel - 1) // 2} with an odd kernel) on that axis"
        )
    if max(before, after) + zero > ring:
        raise ConfigError(
            f"spec: {where} pads the circular angular axis of {ring} cells by more than one "
            f"turn; use a kernel of at most {ring} cells on that axis"
        )


def _describe(block: GeneratorBlock | DiscriminatorBlock) -> str:
    parts = []
    if tuple(getattr(block, "upsample", (1, 1, 1))) != (1, 1, 1):
        parts.append(f"upsample {tuple(block.upsample)}")
    if tuple(block.zero_pad) != (0, 0, 0):
        parts.append(f"zero_pad {tuple(block.zero_pad)}")
    parts.append(f"Conv3D {block.filters} filters kernel {tuple(block.kernel)} {block.padding}")
    return ", ".join(parts)


def generator_layers(spec: GanSpec) -> list[Layer]:
    """Dense seed then every generator block; raises ConfigError at the first bad block."""
    seed = tuple(spec.dense_seed)
    layers = [Layer("generator", "dense", (spec.latent_size,), (math.prod(seed),))]
    shape: Shape = seed  # type: ignore[assignment]
    count = len(spec.generator)
    for index, block in enumerate(spec.generator, start=1):
        layer, shape = _conv("generator", index, count, block, shape, spec.circular_axis)
        layers.append(layer)
    target = (1, *spec.output_shape)
    if shape != target:
        raise ConfigError(
            f"spec: generator block {count} of {count} ({_describe(spec.generator[-1])}) "
            f"produces {shape} but output_shape needs {target}; change the blocks' kernels, "
            f"zero_pad, upsample or filters"
        )
    return layers


def discriminator_layers(spec: GanSpec) -> list[Layer]:
    """Every discriminator block, the pooling and the two trainable heads."""
    shape: Shape = (1, *spec.output_shape)  # type: ignore[assignment]
    layers: list[Layer] = []
    count = len(spec.discriminator)
    for index, block in enumerate(spec.discriminator, start=1):
        layer, shape = _conv("discriminator", index, count, block, shape, spec.circular_axis)
        layers.append(layer)
    size = tuple(spec.pooling.size)
    pooled = (shape[0], *(n // s for n, s in zip(shape[1:], size, strict=True)))
    if min(pooled[1:]) < 1:
        raise ConfigError(
            f"spec: discriminator pooling {size} after block {count} of {count} produces "
            f"{pooled} from {shape}; use a smaller pooling.size or less shrinking blocks"
        )
    layers.append(Layer("discriminator", "pooling", shape, pooled))
    features = math.prod(pooled)
    heads = 1 + int(spec.heads.energy) + 2 * int(spec.heads.conditional)
    layers.append(Layer("discriminator", "dense", (features,), (heads,)))
    return layers


def check_window(spec: GanSpec, cells: tuple[int, ...], files: list[Path]) -> None:
    """Refuse data whose cell window is not ``spec.output_shape`` before anything is trained or
    written: the first sign of it would otherwise be a matrix product deep in the
    discriminator. ``cells``: the data's (X, Y, Z), (0, 0, 0) for no showers (nothing to
    check); ``files``: where they come from."""
    window, wanted = tuple(int(n) for n in cells), tuple(spec.output_shape)
    if window in (wanted, (0, 0, 0)):
        return
    names = ", ".join(path.name for path in files[:2]) + (" ..." if len(files) > 2 else "")
    if len(window) != 3:
        raise ConfigError(
            f"the data ({names}) hold rows of {_cells(window)} voxels binned differently from "
            "layer to layer (no 3D grid), so no 3D convolutional GAN can be trained on them; "
            "evogan data inspect and evogan validate read them"
        )
    raise ConfigError(
        f"the data ({names}) hold showers of {_cells(window)} cells but spec.output_shape is "
        f"{_cells(wanted)}; give data.files of the spec's window, or a spec with output_shape "
        f"{list(window)} (configs/gan3d_fixed25.yaml is one for 25x25x25)"
    )


def _cells(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def generation_bytes(spec: GanSpec, itemsize: int = 4) -> int:
    """Bytes one shower holds at least at the peak of a generator pass without gradients: the
    largest layer's input (upsampled and padded) and output (``itemsize`` bytes a value: 2
    under bf16 autocast) and the float32 shower it is written into."""
    layers = generator_layers(spec)
    peak = max(math.prod(layer.in_shape) + math.prod(layer.out_shape) for layer in layers)
    return itemsize * peak + 4 * math.prod(spec.output_shape)


def flatten_features(spec: GanSpec) -> int:
    """Number of features the discriminator's heads read (19,152 for the 51x51x25 model)."""
    return discriminator_layers(spec)[-1].in_shape[0]
