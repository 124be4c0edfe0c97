"""Which slice of a regressor genome is which tensor, for one input shape.

A weight genome is one flat float32 vector; the layout gives the network's shapes, the
genome's size and the convolution and pooling grids, checked against the input before
anything is allocated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evogan.config.regressor import RegressorModelConfig
from evogan.errors import ConfigError


@dataclass(frozen=True)
class RegressorLayout:
    """Shapes of the network for one input shape; checked before anything is allocated."""

    input_shape: tuple[int, int, int]
    filters: int = 8
    kernel: int = 5
    pool: int = 2
    pooling: str = "avg"
    bias: bool = True

    @classmethod
    def from_config(
        cls, cfg: RegressorModelConfig, input_shape: tuple[int, ...]
    ) -> RegressorLayout:
        """Build and check the layout; a network that does not fit the input is a ConfigError."""
        if len(input_shape) != 3:
            raise ConfigError(f"regressor input must be (channels, H, W), got {tuple(input_shape)}")
        layout = cls(
            tuple(int(n) for n in input_shape),
            cfg.filters,
            cfg.kernel,
            cfg.pool,
            cfg.pooling,
            cfg.bias,
        )
        cfg.check_fits(*layout.input_shape[1:])
        return layout

    @property
    def conv_shape(self) -> tuple[int, int]:
        _, height, width = self.input_shape
        return height - self.kernel + 1, width - self.kernel + 1

    @property
    def pooled_shape(self) -> tuple[int, int]:
        conv_h, conv_w = self.conv_shape
        return conv_h // self.pool, conv_w // self.pool

    @property
    def features(self) -> int:
        pooled_h, pooled_w = self.pooled_shape
        return self.filters * pooled_h * pooled_w

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Tensor name -> shape, in genome order (names match :class:`RegressorNet`)."""
        channels = self.input_shape[0]
        shapes: dict[str, tuple[int, ...]] = {
            "conv.weight": (self.filters, channels, self.kernel, self.kernel)
        }
        if self.bias:
            shapes["conv.bias"] = (self.filters,)
        shapes["linear.weight"] = (1, self.features)
        if self.bias:
            shapes["linear.bias"] = (1,)
        return shapes

    @property
    def size(self) -> int:
        """Number of weights in a genome."""
        return sum(math.prod(shape) for shape in self.shapes.values())

    def fan_in(self, name: str) -> int:
        """Inputs feeding one unit of the layer that owns tensor ``name`` (for initialisation)."""
        if name.startswith("conv."):
            return self.input_shape[0] * self.kernel * self.kernel
        return self.features

    def flops_per_sample(self) -> int:
        """Multiply-adds x 2 of the convolution and the linear layer for one event."""
        conv_h, conv_w = self.conv_shape
        conv = 2 * self.filters * self.input_shape[0] * self.kernel**2 * conv_h * conv_w
        return conv + 2 * self.features

    def to_meta(self) -> dict:
        return {
            "input_shape": list(self.input_shape),
            "filters": self.filters,
            "kernel": self.kernel,
            "pool": self.pool,
            "pooling": self.pooling,
            "bias": self.bias,
        }

    @classmethod
    def from_meta(cls, meta: dict) -> RegressorLayout:
        return cls(
            tuple(meta["input_shape"]),
            meta["filters"],
            meta["kernel"],
            meta["pool"],
            meta["pooling"],
            meta["bias"],
        )
