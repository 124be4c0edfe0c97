"""The 2D energy regressor of the GA study: Conv2d -> ReLU -> pooling -> Linear -> energy/100.

A weight genome is one flat float32 vector; :class:`RegressorLayout` says which slice of it is
which tensor, so the same genome drives the ``nn.Module`` (gradient training), the functional
forward (hybrid steps) and :func:`batched_predict` (all candidates of a generation at once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from evogan.config.regressor import RegressorModelConfig
from evogan.errors import ConfigError, DataError
from evogan.regressor import fused_eval, gpu_eval


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
        _, height, width = layout.input_shape
        if cfg.kernel > min(height, width):
            raise ConfigError(
                f"model.kernel must not exceed the input size {height}x{width}, got {cfg.kernel}"
            )
        conv_h, conv_w = layout.conv_shape
        if cfg.pool > min(conv_h, conv_w):
            raise ConfigError(
                f"model.pool must not exceed the convolution output {conv_h}x{conv_w} "
                f"(input {height}x{width}, kernel {cfg.kernel}), got {cfg.pool}"
            )
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


def unflatten(layout: RegressorLayout, genomes: Tensor) -> dict[str, Tensor]:
    """Views of a (P, size) genome tensor as (P, *shape) tensors, one per network tensor."""
    if genomes.dim() != 2 or genomes.shape[1] != layout.size:
        raise ValueError(f"genomes must be (P, {layout.size}), got {tuple(genomes.shape)}")
    views, start = {}, 0
    for name, shape in layout.shapes.items():
        count = math.prod(shape)
        views[name] = genomes[:, start : start + count].reshape(genomes.shape[0], *shape)
        start += count
    return views


def flatten(layout: RegressorLayout, tensors: dict[str, Tensor]) -> Tensor:
    """One genome (size,) from named tensors (a state dict of :class:`RegressorNet`)."""
    return torch.cat([tensors[name].reshape(-1).float() for name in layout.shapes])


def initial_weights(layout: RegressorLayout, count: int, generator: torch.Generator) -> Tensor:
    """``count`` genomes (count, size): each weight from U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    biases 0 (Table 1 of the GA study), drawn tensor by tensor in genome order."""
    genomes = torch.zeros(count, layout.size)
    for name, view in unflatten(layout, genomes).items():
        if name.endswith(".bias"):
            continue
        bound = layout.fan_in(name) ** -0.5
        view.copy_(torch.rand(view.shape, generator=generator) * (2 * bound) - bound)
    return genomes


class RegressorNet(nn.Module):
    """The network as an ordinary module: RMSprop baseline, inference of a saved model."""

    def __init__(self, layout: RegressorLayout) -> None:
        super().__init__()
        self.layout = layout
        channels = layout.input_shape[0]
        self.conv = nn.Conv2d(channels, layout.filters, layout.kernel, bias=layout.bias)
        self.linear = nn.Linear(layout.features, 1, bias=layout.bias)

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.relu(self.conv(x))
        return _pool_and_linear(self.layout, hidden, self.linear.weight, self.linear.bias)

    @classmethod
    def from_genome(cls, layout: RegressorLayout, genome: Tensor) -> RegressorNet:
        net = cls(layout)
        views = unflatten(layout, genome.detach().reshape(1, -1))
        net.load_state_dict({name: view[0] for name, view in views.items()})
        return net

    def genome(self) -> Tensor:
        return flatten(self.layout, dict(self.state_dict())).detach().clone()


def _tensors(layout: RegressorLayout, genome: Tensor) -> dict[str, Tensor]:
    """Views of one genome (size,) as the network's tensors."""
    return {name: view[0] for name, view in unflatten(layout, genome.reshape(1, -1)).items()}


def _pooled(layout: RegressorLayout, tensors: dict[str, Tensor], x: Tensor) -> Tensor:
    hidden = F.relu(F.conv2d(x, tensors["conv.weight"], tensors.get("conv.bias")))
    pool = F.avg_pool2d if layout.pooling == "avg" else F.max_pool2d
    return pool(hidden, layout.pool).flatten(1)


def pooled_features(layout: RegressorLayout, genome: Tensor, x: Tensor) -> Tensor:
    """The linear layer's input (B, features) of one genome (size,) on x (B, C, H, W)."""
    return _pooled(layout, _tensors(layout, genome), x)


def batched_features(layout: RegressorLayout, genomes: Tensor, x: Tensor) -> Tensor:
    """The linear layer's inputs (P, B, features) of P genomes on x (B, C, H, W): from one call
    of the fused C kernel where it applies (average pooling, float32, no gradient), else one
    torch forward per genome."""
    if _fused_applies(layout, genomes, x):
        return fused_eval.pooled_filters(unflatten(layout, genomes), x, layout.pool)
    return torch.stack([pooled_features(layout, genome, x) for genome in genomes])


def functional_forward(layout: RegressorLayout, genome: Tensor, x: Tensor) -> Tensor:
    """Differentiable forward of one genome (size,) on x (B, C, H, W) -> (B,)."""
    tensors = _tensors(layout, genome)
    hidden = F.relu(F.conv2d(x, tensors["conv.weight"], tensors.get("conv.bias")))
    return _pool_and_linear(layout, hidden, tensors["linear.weight"], tensors.get("linear.bias"))


def _pool_and_linear(
    layout: RegressorLayout, hidden: Tensor, weight: Tensor, bias: Tensor | None
) -> Tensor:
    """Pooling, then the linear layer, of the rectified convolution ``hidden`` -> (B,).

    Average pooling followed by the linear layer is one linear map of ``hidden``, so it runs
    as a matrix-vector product with the folded weight: no pooled tensor, and a backward pass
    of one outer product. An RMSprop step then takes about 0.6-0.7x the time it takes through
    ``avg_pool2d`` (docs/benchmarks.md).
    """
    if layout.pooling == "max":
        pooled = F.max_pool2d(hidden, layout.pool).flatten(1)
        return F.linear(pooled, weight, bias).squeeze(1)
    folded = _folded_tail(layout, weight.reshape(1, layout.filters, *layout.pooled_shape))
    out = hidden.flatten(1) @ folded.flatten()
    return out if bias is None else out + bias


def batched_predict(
    layout: RegressorLayout,
    genomes: Tensor,
    x: Tensor,
    chunk: int = 4,
    index: Tensor | None = None,
) -> Tensor:
    """Predictions (P, B) of P genomes on x (B, C, H, W), or on the B events ``x[index]``,
    without a loop over genomes.

    With average pooling, pooling followed by the linear layer is itself linear, so it folds
    into one weight per (candidate, filter, convolution position). On a CPU with float32 and
    no gradient wanted, the fused C kernel (:mod:`evogan.regressor.fused_eval`) then computes
    every (event, candidate, filter) in one pass from the input; on a CUDA GPU with Triton the
    same fold runs as one Triton kernel (:mod:`evogan.regressor.gpu_eval`); otherwise (max
    pooling, autograd, no C compiler or Triton) the torch path below runs with ``chunk`` events
    per block.
    """
    views = unflatten(layout, genomes)
    if x.dim() != 4 or tuple(x.shape[1:]) != layout.input_shape:
        raise ValueError(
            f"x must be (B, {', '.join(map(str, layout.input_shape))}), got {tuple(x.shape)}"
        )
    if genomes.shape[0] == 0:  # an island rank whose share of the candidates is empty
        return x.new_zeros(0, x.shape[0] if index is None else index.numel())
    if _fused_applies(layout, genomes, x):
        per_filter = fused_eval.filter_sums(views, x, layout.pool, index)  # x[index] in place
    elif _gpu_applies(layout, genomes, x):
        x = x if index is None else x.index_select(0, index)
        per_filter = gpu_filter_sums(layout, views, x)
    else:
        x = x if index is None else x.index_select(0, index)
        per_filter = _torch_predict(layout, views, x, chunk)
    count, events = genomes.shape[0], x.shape[0] if index is None else index.numel()
    prediction = per_filter.reshape(count, layout.filters, events).sum(dim=1)
    if "linear.bias" in views:
        prediction += views["linear.bias"].reshape(count, 1)
    return prediction


def evaluation_path(layout: RegressorLayout, genomes: Tensor, x: Tensor) -> str:
    """Which implementation :func:`batched_predict` takes for these arguments (for reports)."""
    if _fused_applies(layout, genomes, x):
        return "fused C kernel"
    return "fused Triton kernel" if _gpu_applies(layout, genomes, x) else "torch im2col + matmul"


def _fused_applies(layout: RegressorLayout, genomes: Tensor, x: Tensor) -> bool:
    wants_grad = torch.is_grad_enabled() and (genomes.requires_grad or x.requires_grad)
    return (
        layout.pooling == "avg"
        and not wants_grad
        and all(t.device.type == "cpu" and t.dtype == torch.float32 for t in (genomes, x))
        and fused_eval.kernel() is not None
    )


def _gpu_applies(layout: RegressorLayout, genomes: Tensor, x: Tensor) -> bool:
    wants_grad = torch.is_grad_enabled() and (genomes.requires_grad or x.requires_grad)
    taps = layout.input_shape[0] * layout.kernel**2
    return (
        layout.pooling == "avg"
        and not wants_grad
        and taps < gpu_eval.DEPTH
        and gpu_eval.available(genomes, x)
    )


def gpu_filter_sums(
    layout: RegressorLayout,
    views: dict[str, Tensor],
    x: Tensor,
    precision: str | None = None,
) -> Tensor:
    """Per-(candidate, filter) sums (P*filters, B) from the Triton kernel: image patches with a
    row of ones (the bias) padded to the kernel's inner dimension, and the folded tail.
    ``precision``: the kernel's (:func:`evogan.regressor.gpu_eval.fused_rows`)."""
    weight_view = views["conv.weight"]
    count, rows = weight_view.shape[0], weight_view.shape[0] * layout.filters
    kernel, taps = layout.kernel, layout.input_shape[0] * layout.kernel**2
    conv_h, conv_w = layout.conv_shape
    patches = x.new_zeros(x.shape[0], gpu_eval.DEPTH, conv_h * conv_w)
    windows = x.unfold(2, kernel, 1).unfold(3, kernel, 1)  # (n, C, h, w, k, k)
    patches[:, :taps].view(x.shape[0], -1, kernel, kernel, conv_h, conv_w).copy_(
        windows.permute(0, 1, 4, 5, 2, 3)
    )
    patches[:, taps] = 1
    weight = _kernel_matrix(views, gpu_eval.DEPTH)
    pooled_h, pooled_w = layout.pooled_shape
    linear = views["linear.weight"].reshape(count, layout.filters, pooled_h, pooled_w)
    tail = _folded_tail(layout, linear).reshape(rows, conv_h * conv_w)
    return gpu_eval.fused_rows(weight, patches, tail, precision)


def _torch_predict(
    layout: RegressorLayout, views: dict[str, Tensor], x: Tensor, chunk: int
) -> Tensor:
    """Per-(candidate, filter) sums (P*filters, B) through im2col and one matmul per chunk.

    Every genome sees the same input, so the image patches of a chunk of events are built once
    and shared: the P x filters kernels (bias as an extra column against a row of ones) form one
    (P*filters, C*k*k+1) matrix and the convolution of all candidates is one matmul. With
    average pooling the tail is one multiply-and-sum with the folded weight. Chunks are small
    enough that the convolution output stays in cache between the matmul, the ReLU and the
    reduction.
    """
    weight_view = views["conv.weight"]
    count = weight_view.shape[0]
    rows = count * layout.filters
    channels, kernel = layout.input_shape[0], layout.kernel
    conv_h, conv_w = layout.conv_shape
    positions, depth = conv_h * conv_w, channels * kernel * kernel
    bias = int("conv.bias" in views)
    weight = _kernel_matrix(views, depth + bias)
    pooled_h, pooled_w = layout.pooled_shape
    linear = views["linear.weight"].reshape(count, layout.filters, pooled_h, pooled_w)
    if layout.pooling == "avg":
        linear = _folded_tail(layout, linear)
    tail = linear.reshape(rows, 1, -1)
    events = x.shape[0]
    chunk = max(1, min(chunk, events))
    patches = x.new_empty(depth + bias, chunk * positions)
    if bias:
        patches[depth] = 1
    per_filter = x.new_empty(rows, events)
    for start in range(0, events, chunk):
        part = x[start : start + chunk]
        size = part.shape[0]
        block = patches[:, : size * positions]
        windows = part.unfold(2, kernel, 1).unfold(3, kernel, 1)  # (n, C, h, w, k, k)
        block[:depth].view(channels, kernel, kernel, size, conv_h, conv_w).copy_(
            windows.permute(1, 4, 5, 0, 2, 3)
        )
        hidden = torch.mm(weight, block).relu_().view(rows, size, positions)
        if layout.pooling == "max":
            hidden = F.max_pool2d(hidden.view(rows, size, conv_h, conv_w), layout.pool)
            hidden = hidden.view(rows, size, -1)
        torch.sum(hidden.mul_(tail), dim=2, out=per_filter[:, start : start + size])
    return per_filter


def _kernel_matrix(views: dict[str, Tensor], columns: int) -> Tensor:
    """Every candidate's kernels as rows (P*filters, columns): the taps, then the bias (if
    any) as the column that meets a row of ones in the patches, then zeros."""
    weight_view = views["conv.weight"]
    rows, taps = weight_view.shape[0] * weight_view.shape[1], math.prod(weight_view.shape[2:])
    weight = weight_view.new_zeros(rows, columns)
    weight[:, :taps] = weight_view.reshape(rows, taps)
    if "conv.bias" in views:
        weight[:, taps] = views["conv.bias"].reshape(rows)
    return weight


def _folded_tail(layout: RegressorLayout, linear: Tensor) -> Tensor:
    """Average pooling + linear as one weight over the full convolution output (cropped rows and
    columns that floor-mode pooling drops get weight zero)."""
    count, filters, pooled_h, pooled_w = linear.shape
    conv_h, conv_w = layout.conv_shape
    pool = layout.pool
    used_h, used_w = pooled_h * pool, pooled_w * pool
    folded = linear.new_empty(count, filters, conv_h, conv_w)
    folded[:, :, used_h:].zero_()
    folded[:, :, :used_h, used_w:].zero_()
    # one strided copy: every pooling window's cells read its pooled weight (a broadcast view)
    spread = (linear / pool**2)[:, :, :, None, :, None]
    folded[:, :, :used_h, :used_w].view(count, filters, pooled_h, pool, pooled_w, pool).copy_(
        spread.expand(-1, -1, -1, pool, -1, pool)
    )
    return folded


def load_regressor(path: str | Path) -> RegressorNet:
    """A :class:`RegressorNet` from a ``best_model.h5`` written by any regressor run."""
    from evogan.store.weights import load_weights

    tensors, meta = load_weights(path)
    if "model" not in meta:
        raise DataError(f"{path} holds no regressor model description (meta.model missing)")
    net = RegressorNet(RegressorLayout.from_meta(meta["model"]))
    net.load_state_dict(tensors)
    return net
