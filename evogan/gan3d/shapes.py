"""Shape arithmetic of a 3DGAN spec, block by block, without building anything.

The spec validator uses it to reject an impossible architecture before a single tensor is
allocated, and the benchmark uses the same layer list to count FLOPs, so the two can never
disagree about what the network is. Shapes are channels-first ``(C, X, Y, Z)``; convolutions
follow Keras semantics (``valid``: n - k + 1; ``same``: n, padded (k-1)//2 before and the rest
after), ``zero_pad`` is Keras ZeroPadding3D (symmetric, before the convolution), ``upsample``
is nearest-neighbour repetition before the padding, pooling floors like Keras ``valid``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evogan.errors import ConfigError

if TYPE_CHECKING:
    from evogan.config.gan import GanSpec

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


def _conv(net: str, index: int, count: int, block, shape: Shape) -> tuple[Layer, Shape]:
    c, *spatial = shape
    up = getattr(block, "upsample", (1, 1, 1))
    spatial = [n * u for n, u in zip(spatial, up, strict=True)]
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
    return Layer(net, f"block {index}", seen, out_shape, tuple(block.kernel)), out_shape


def _describe(block) -> str:
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
        layer, shape = _conv("generator", index, count, block, shape)
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
        layer, shape = _conv("discriminator", index, count, block, shape)
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
    heads = 1 + int(spec.heads.energy)
    layers.append(Layer("discriminator", "dense", (features,), (heads,)))
    return layers


def flatten_features(spec: GanSpec) -> int:
    """Number of features the discriminator's heads read (19,152 for the 51x51x25 model)."""
    return discriminator_layers(spec)[-1].in_shape[0]
