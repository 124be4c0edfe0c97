"""The regressor's gradient step on the fused C kernels: forward and backward without the
convolution output.

Torch's convolution and its backward took 4.4 of the 5.6 ms of an RMSprop step at batch 128
on one thread (the 51x25 projections, 8 filters of 5x5; docs/benchmarks.md), most of it
writing and reading the 8 x 47 x 21 outputs per event. Here the forward is the fused
evaluation kernel's pooled sums (the linear layer's input) and the backward recomputes the
convolution in registers for its sign and meets each input pixel once per tap
(``_fused_grad.c``). :func:`fused_forward` is a differentiable drop-in for the network's
forward wherever it applies (:func:`applies`); the torch layers serve everything else.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch
from torch import Tensor

from evogan import native
from evogan.regressor import fused_eval

SOURCE = Path(__file__).with_name("_fused_grad.c")


@functools.cache
def kernel() -> ctypes.CDLL | None:
    """The loaded gradient kernel, or None after one warning (then torch computes gradients)."""
    library = native.load(
        SOURCE,
        "the fused gradient kernel",
        "the regressor's gradient steps use torch's convolution",
    )
    if library is not None:
        pointer, count = ctypes.c_void_p, ctypes.c_long
        argtypes = [
            *(pointer, pointer, count, count),  # x, event rows of x or NULL, events, event stride
            *(pointer, pointer),  # weight [taps][rows], bias [rows]
            *(pointer, pointer, count),  # position offsets, their cells, positions
            *(pointer, count, count),  # tap offsets, taps, rows
            *(pointer, pointer, pointer, ctypes.c_int),  # coef, g, per-thread sums, threads
        ]
        native.declare(library.evogan_fused_grad, argtypes)
    return library


def applies(pooling: str, x: Tensor, *tensors: Tensor | None) -> bool:
    """Whether :func:`fused_forward` can run: average pooling, float32 CPU tensors, no
    gradient asked of the input, no ``torch.func`` transform (``vmap`` over a population, as
    :class:`~evogan.engine.ModuleProblem` runs it, needs torch's layers), and both kernels
    built."""
    given = [t for t in (x, *tensors) if t is not None]
    return (
        pooling == "avg"
        and not _transforms_active()
        and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in given)
        and not x.requires_grad
        and fused_eval.kernel() is not None
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
        views = _views(conv_weight, conv_bias)
        features = fused_eval.pooled_filters(views, x, pool)[0]
        out = features @ linear_weight.detach().reshape(-1)
        if linear_bias is not None:
            out = out + linear_bias.detach()
        ctx.save_for_backward(x, conv_weight, conv_bias, linear_weight, features)
        ctx.pool = pool
        ctx.linear_bias_shape = None if linear_bias is None else linear_bias.shape
        return out

    @staticmethod
    def backward(ctx, grad):
        x, conv_weight, conv_bias, linear_weight, features = ctx.saved_tensors  # version-checked
        needs = ctx.needs_input_grad
        grad_w = grad_b = grad_linear = grad_linear_bias = None
        if needs[1] or needs[2]:
            views = _views(conv_weight, conv_bias)
            grad_w, grad_b = conv_gradients(x, views, linear_weight, grad, ctx.pool)
        if needs[3]:
            grad_linear = (grad @ features).reshape(linear_weight.shape)
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


def _views(conv_weight: Tensor, conv_bias: Tensor | None) -> dict[str, Tensor]:
    """One candidate's convolution as :func:`fused_eval.every_filter_tables` reads it."""
    views = {"conv.weight": conv_weight.detach()[None]}
    if conv_bias is not None:
        views["conv.bias"] = conv_bias.detach()[None]
    return views


def conv_gradients(
    x: Tensor, views: dict[str, Tensor], linear_weight: Tensor, grad: Tensor, pool: int
) -> tuple[Tensor, Tensor]:
    """Gradients of the convolution's weight (F, C, k, k) and bias (F,) of the one candidate
    ``views`` from ``grad`` (B,), the loss's gradient for each prediction on x (B, C, H, W)."""
    library = kernel()
    if library is None:
        raise RuntimeError("the fused gradient kernel is not available")
    weight = views["conv.weight"][0]
    filters = weight.shape[0]
    if x.dim() != 4 or x.shape[1] != weight.shape[1] or grad.shape != (x.shape[0],):
        raise ValueError(
            f"x {tuple(x.shape)}, weight {tuple(weight.shape)} and grad {tuple(grad.shape)} "
            "do not fit together"
        )
    (cells_y, cells_x), tables, weight_t, bias = fused_eval.every_filter_tables(views, x, pool)
    positions, cells, taps = tables
    cell_count = cells_y * cells_x
    if linear_weight.numel() != filters * cell_count:
        raise ValueError(f"the linear layer must have {filters * cell_count} weights")
    rows = weight_t.shape[1]
    coef = x.new_zeros(cell_count + 1, rows)
    coef[:cell_count, :filters] = linear_weight.detach().reshape(filters, cell_count).T / pool**2
    threads = max(1, min(torch.get_num_threads(), fused_eval.MAX_THREADS, x.shape[0]))
    sums = x.new_zeros(threads, taps.shape[0] + 1, rows)
    x, grad = x.contiguous(), grad.to(torch.float32).contiguous()
    status = library.evogan_fused_grad(
        x.data_ptr(), None, x.shape[0], x[0].numel() if x.shape[0] else 0,
        weight_t.data_ptr(), bias.data_ptr(), positions.data_ptr(), cells.data_ptr(),
        positions.shape[0], taps.data_ptr(), taps.shape[0], rows,
        coef.data_ptr(), grad.data_ptr(), sums.data_ptr(), threads,
    )  # fmt: skip
    if status != 0:
        raise RuntimeError(f"evogan_fused_grad rejected its arguments (status {status})")
    total = sums[0] if threads == 1 else sums.sum(dim=0)
    return total[:-1, :filters].T.reshape(weight.shape), total[-1, :filters].clone()
