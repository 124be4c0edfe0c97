"""The regressor's gradient step on the fused C kernels: forward and backward without the
convolution output.

Torch's convolution and its backward took 4.4 of the 5.6 ms of an RMSprop step at batch 128
on one thread (the 51x25 projections, 8 filters of 5x5; docs/history/benchmarks.md,
"Gradient steps on fused C kernels"), most of it
writing and reading the 8 x 47 x 21 outputs per event. Here the forward sums the rectified
convolution into its pooling cells in registers and keeps one bit per output (whether the
ReLU passed it); the backward reads those bits and meets each input pixel once per tap
(``_fused_grad.c``). :func:`fused_forward` is a differentiable drop-in for the network's
forward wherever it applies (:func:`applies`); the torch layers serve everything else.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from evogan import native
from evogan.regressor import fused_eval

SOURCE = Path(__file__).with_name("_fused_grad.c")


@functools.cache
def kernel() -> ctypes.CDLL | None:
    """The loaded kernels, or None after one warning (then torch computes gradients)."""
    pointer, count = ctypes.c_void_p, ctypes.c_long
    x = (pointer, count, count)  # x, events, event stride
    signatures = {
        "evogan_fused_forward": [
            *x,
            *(pointer, pointer),  # weight [taps][rows], bias [rows]
            *(pointer, pointer, count, count),  # position offsets, their cells, counts
            *(pointer, count, count),  # tap offsets, taps, rows
            *(pointer, pointer, ctypes.c_int),  # cell sums, ReLU bits, threads
        ],
        "evogan_fused_grad": [
            *x,
            *(pointer, pointer, count),  # position offsets, their cells, positions
            *(pointer, count, count),  # tap offsets, taps, rows
            *(pointer, pointer, pointer, pointer, ctypes.c_int),  # bits, coef, g, sums
        ],
    }
    return native.load(
        SOURCE,
        "the fused gradient kernel",
        "the regressor's gradient steps use torch's convolution",
        signatures,
    )


def applies(pooling: str, x: Tensor, *tensors: Tensor | None) -> bool:
    """Whether :func:`fused_forward` can run: average pooling, float32 CPU tensors, no
    gradient asked of the input, no ``torch.func`` transform (``vmap`` over a population, as
    :class:`~evogan.engine.ModuleProblem` runs it, needs torch's layers), and the kernels
    built."""
    given = [t for t in (x, *tensors) if t is not None]
    return (
        pooling == "avg"
        and not _transforms_active()
        and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in given)
        and not x.requires_grad
        and kernel() is not None
    )


def _transforms_active() -> bool:
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    return bool(active()) if active is not None else False


def fused_forward(
    x: Tensor,
    conv_weight: Tensor,
    conv_bias: Tensor | None,
    linear_weight: Tensor,
    linear_bias: Tensor | None,
    pool: int,
) -> Tensor:
    """Predictions (B,) of the network on x (B, C, H, W): differentiable in its weights."""
    return _FusedForward.apply(x, conv_weight, conv_bias, linear_weight, linear_bias, pool)


class _FusedForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, conv_weight, conv_bias, linear_weight, linear_bias, pool):
        step = forward_pass(x, conv_weight, conv_bias, linear_weight, pool)
        out = step.sums.reshape(x.shape[0], -1) @ step.coef.reshape(-1)
        if linear_bias is not None:
            out = out + linear_bias.detach()
        ctx.save_for_backward(x, conv_weight, conv_bias, linear_weight)  # version-checked
        ctx.step = step
        ctx.linear_bias_shape = None if linear_bias is None else linear_bias.shape
        return out

    @staticmethod
    def backward(ctx, grad):
        _, conv_weight, _, linear_weight = ctx.saved_tensors  # raises if changed in place
        step, needs = ctx.step, ctx.needs_input_grad
        grad_w = grad_b = grad_linear = grad_linear_bias = None
        if needs[1] or needs[2]:
            grad_w, grad_b = conv_gradients(step, grad)
            grad_w = grad_w.reshape(conv_weight.shape)
        if needs[3]:
            per_cell = (grad @ step.sums.reshape(grad.shape[0], -1)).reshape(step.coef.shape)
            grad_linear = per_cell[: step.cells, : step.filters].T.div(step.area)
            grad_linear = grad_linear.reshape(linear_weight.shape)
        if needs[4]:
            grad_linear_bias = grad.sum().reshape(ctx.linear_bias_shape)
        return (
            None,
            grad_w if needs[1] else None,
            grad_b if needs[2] else None,
            grad_linear,
            grad_linear_bias,
            None,
        )


@dataclass(frozen=True)
class ForwardPass:
    """What the forward kernel leaves for the backward: the input, the offset tables, the
    pooling cells' sums (events, cells + 1, rows) of the rectified convolution, its ReLU bits
    (events, rows / LANES, positions) and the linear weights by cell and row over the pool
    area (cells + 1, rows; zero for the padding cell and rows)."""

    x: Tensor
    tables: tuple[Tensor, Tensor, Tensor]
    sums: Tensor
    passed: Tensor
    coef: Tensor
    filters: int
    cells: int
    area: int


def forward_pass(
    x: Tensor,
    conv_weight: Tensor,
    conv_bias: Tensor | None,
    linear_weight: Tensor,
    pool: int,
) -> ForwardPass:
    """The forward kernel on x (B, C, H, W) for one network; the prediction is the sums'
    product with ``coef``, plus the linear bias."""
    library = kernel()
    if library is None:
        raise RuntimeError("the fused gradient kernel is not available")
    filters = conv_weight.shape[0]
    if x.dim() != 4 or conv_weight.dim() != 4 or x.shape[1] != conv_weight.shape[1]:
        raise ValueError(
            f"x {tuple(x.shape)} and the filters {tuple(conv_weight.shape)} do not fit together"
        )
    views = {"conv.weight": conv_weight.detach()[None]}
    if conv_bias is not None:
        views["conv.bias"] = conv_bias.detach()[None]
    (cells_y, cells_x), tables, weight_t, bias = fused_eval.every_filter_tables(views, x, pool)
    positions, cell_of, taps = tables
    cells, rows, events = cells_y * cells_x, weight_t.shape[1], x.shape[0]
    if linear_weight.numel() != filters * cells:
        raise ValueError(f"the linear layer must have {filters * cells} weights")
    coef = x.new_zeros(cells + 1, rows)
    coef[:cells, :filters] = linear_weight.detach().reshape(filters, cells).T / pool**2
    x = x.contiguous()
    sums = x.new_zeros(events, cells + 1, rows)
    passed = torch.empty(events, rows // fused_eval.LANES, positions.shape[0], dtype=torch.uint8)
    status = library.evogan_fused_forward(
        x.data_ptr(), events, x[0].numel() if events else 0,
        weight_t.data_ptr(), bias.data_ptr(), positions.data_ptr(), cell_of.data_ptr(),
        positions.shape[0], cells, taps.data_ptr(), taps.shape[0], rows,
        sums.data_ptr(), passed.data_ptr(), _threads(events),
    )  # fmt: skip
    if status != 0:
        raise RuntimeError(f"evogan_fused_forward rejected its arguments (status {status})")
    return ForwardPass(x, tables, sums, passed, coef, filters, cells, pool**2)


def conv_gradients(step: ForwardPass, grad: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of the convolution's taps (filters, C * k * k) and bias (filters,) from
    ``grad`` (B,), the loss's gradient for each prediction of ``step``."""
    library = kernel()
    if library is None:
        raise RuntimeError("the fused gradient kernel is not available")
    x, (positions, cell_of, taps) = step.x, step.tables
    if grad.shape != (x.shape[0],):
        raise ValueError(
            f"grad must be ({x.shape[0]},), one value per event, got {tuple(grad.shape)}"
        )
    rows, threads = step.coef.shape[1], _threads(x.shape[0])
    sums = x.new_zeros(threads, taps.shape[0] + 1, rows)
    grad = grad.to(torch.float32).contiguous()
    status = library.evogan_fused_grad(
        x.data_ptr(), x.shape[0], x[0].numel() if x.shape[0] else 0,
        positions.data_ptr(), cell_of.data_ptr(), positions.shape[0],
        taps.data_ptr(), taps.shape[0], rows,
        step.passed.data_ptr(), step.coef.data_ptr(), grad.data_ptr(), sums.data_ptr(), threads,
    )  # fmt: skip
    if status != 0:
        raise RuntimeError(f"evogan_fused_grad rejected its arguments (status {status})")
    total = sums[0] if threads == 1 else sums.sum(dim=0)
    return total[:-1, : step.filters].T, total[-1, : step.filters].clone()


def _threads(events: int) -> int:
    return max(1, min(torch.get_num_threads(), fused_eval.MAX_THREADS, events))
