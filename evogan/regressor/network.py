"""The 2D energy regressor of the GA study: Conv2d -> ReLU -> pooling -> Linear -> energy/100.

A weight genome is one flat float32 vector; :class:`RegressorLayout` says which slice of it is
which tensor, so the same genome drives the ``nn.Module`` (gradient training), the functional
forward (hybrid steps) and :func:`batched_predict` (all candidates of a generation at once).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from evogan.errors import DataError
from evogan.regressor import fused_eval, fused_grad, gpu_eval, patches
from evogan.regressor.layout import RegressorLayout


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
        conv, linear = self.conv, self.linear
        return _forward(self.layout, x, conv.weight, conv.bias, linear.weight, linear.bias)

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
    conv_weight, linear_weight = tensors["conv.weight"], tensors["linear.weight"]
    conv_bias, linear_bias = tensors.get("conv.bias"), tensors.get("linear.bias")
    return _forward(layout, x, conv_weight, conv_bias, linear_weight, linear_bias)


def _forward(
    layout: RegressorLayout,
    x: Tensor,
    conv_weight: Tensor,
    conv_bias: Tensor | None,
    linear_weight: Tensor,
    linear_bias: Tensor | None,
) -> Tensor:
    """The network's differentiable forward -> (B,): on the fused C kernels where they apply
    (:mod:`evogan.regressor.fused_grad`, about 2x faster steps), else torch's layers."""
    tensors = (conv_weight, conv_bias, linear_weight, linear_bias)
    if fused_grad.applies(layout.pooling, x, *tensors):
        return fused_grad.fused_forward(x, *tensors, layout.pool)
    hidden = F.relu(F.conv2d(x, conv_weight, conv_bias))
    return _pool_and_linear(layout, hidden, linear_weight, linear_bias)


def _pool_and_linear(
    layout: RegressorLayout, hidden: Tensor, weight: Tensor, bias: Tensor | None
) -> Tensor:
    """Pooling, then the linear layer, of the rectified convolution ``hidden`` -> (B,).

    Average pooling followed by the linear layer is one linear map of ``hidden``, so it runs
    as a matrix-vector product with the folded weight: no pooled tensor, and a backward pass
    of one outer product. An RMSprop step then takes about 0.6-0.7x the time it takes through
    ``avg_pool2d`` (docs/history/benchmarks.md, "Average pooling folded into the linear layer").
    """
    if layout.pooling == "max":
        pooled = F.max_pool2d(hidden, layout.pool).flatten(1)
        return F.linear(pooled, weight, bias).squeeze(1)
    folded = patches.folded_tail(layout, weight.reshape(1, layout.filters, *layout.pooled_shape))
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
    pooling, autograd, no C compiler or Triton) the torch path (:mod:`evogan.regressor.patches`)
    runs with ``chunk`` events per block.
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
        per_filter = patches.gpu_filter_sums(layout, views, x)
    else:
        x = x if index is None else x.index_select(0, index)
        per_filter = patches.torch_filter_sums(layout, views, x, chunk)
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


def load_regressor(path: str | Path) -> RegressorNet:
    """A :class:`RegressorNet` from a ``best_model.h5`` written by any regressor run."""
    from evogan.store.weights import load_weights

    tensors, meta = load_weights(path)
    if "model" not in meta:
        raise DataError(f"{path} holds no regressor model description (meta.model missing)")
    net = RegressorNet(RegressorLayout.from_meta(meta["model"]))
    net.load_state_dict(tensors)
    return net
