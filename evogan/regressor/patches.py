"""The im2col paths of the regressor's batched evaluation, and the fold they share.

Average pooling followed by the linear layer is one linear map of the convolution output:
:func:`folded_tail` spreads each pooled weight over its pooling window, so a network's
prediction is a product of the rectified convolution with one weight per (filter, position).
The single-network forward uses it on the gradient path; the torch path (image patches and
one matmul per chunk of events) and the Triton path of
:func:`evogan.regressor.network.batched_predict` use it for all candidates of a generation.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from evogan.regressor import gpu_eval
from evogan.regressor.layout import RegressorLayout


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
    tail = folded_tail(layout, linear).reshape(rows, conv_h * conv_w)
    return gpu_eval.fused_rows(weight, patches, tail, precision)


def torch_filter_sums(
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
        linear = folded_tail(layout, linear)
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


def folded_tail(layout: RegressorLayout, linear: Tensor) -> Tensor:
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
