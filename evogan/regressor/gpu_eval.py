"""The regressor's batched evaluation as one Triton kernel on a CUDA GPU.

On a GPU the im2col + matmul path of :func:`evogan.regressor.network.batched_predict` is bound
by memory, not arithmetic: its matmul has an inner dimension of only C*k*k+1 (26 for the
shipped network), so every FLOP of it writes and re-reads convolution output. With thousands
of candidates per generation that output is gigabytes. This kernel keeps each tile of
convolution outputs in registers from the product of the kernels with the image patches
through the ReLU to the folded pooling + linear weight (the same fold as the C kernel), and
reads each tile of that weight once for a group of events. Sums are accumulated in a fixed
order, so a generation's fitness is the same on every run.

Triton is optional: where it is missing, or the tensors are not on a CUDA device (with
``TRITON_INTERPRET=1`` the kernel also runs on CPU tensors, slowly, which is how the tests
check it), :func:`available` says no and the torch path runs.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from evogan import triton_support

DEPTH = 32  # taps + bias row, padded: the inner dimension of the tile product
PRECISIONS = ("ieee", "tf32")  # tl.dot's input_precision: float32 multiply-adds, or TF32


def default_precision() -> str:
    """``tf32`` where torch lets float32 matmuls use TF32
    (``torch.set_float32_matmul_precision("high")``), else ``ieee``: the kernel follows the
    switch that governs every other float32 product in the program."""
    return "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"


# (rows, positions, events, warps) of one program, per precision. Fixed, not autotuned: the
# tile decides the order of the sums, and a generation's fitness must not depend on a timing
# race. Each the fastest of 16 compared on an H200 at 4,096 children (docs/history/benchmarks.md,
# "Compiled FFT steps, and a GA tile per precision").
TILES = {"ieee": (256, 32, 16, 8), "tf32": (128, 32, 16, 4)}


def available(*tensors: Tensor) -> bool:
    """Whether the kernel can score these tensors: Triton installed, float32, on a CUDA device
    (or on the CPU under ``TRITON_INTERPRET=1``)."""
    return triton_support.runs_on(*tensors) and all(t.dtype == torch.float32 for t in tensors)


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def fused_rows(
        weight_ptr,  # (rows, DEPTH): kernel taps, bias, zero padding
        patches_ptr,  # (events, DEPTH, positions): image patches, a row of ones, zero padding
        tail_ptr,  # (rows, positions): folded pooling + linear weight
        out_ptr,  # (rows, events)
        rows,
        events,
        positions: tl.constexpr,  # one value per network layout: compiled once per run
        DEPTH: tl.constexpr,
        ROWS: tl.constexpr,
        POSITIONS: tl.constexpr,
        EVENTS: tl.constexpr,
        PRECISION: tl.constexpr,
    ):
        row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        first_event = tl.program_id(1) * EVENTS
        tap = tl.arange(0, DEPTH)
        row_ok = row < rows
        weight = tl.load(weight_ptr + row[:, None] * DEPTH + tap[None, :], row_ok[:, None], 0.0)
        slot = tl.arange(0, EVENTS)
        total = tl.zeros((ROWS, EVENTS), dtype=tl.float32)
        for start in range(0, positions, POSITIONS):
            position = start + tl.arange(0, POSITIONS)
            position_ok = position < positions
            tail = tl.load(
                tail_ptr + row[:, None] * positions + position[None, :],
                row_ok[:, None] & position_ok[None, :],
                0.0,
            )
            for j in range(EVENTS):
                event = tl.minimum(first_event + j, events - 1)  # slots past the end: not stored
                patch = tl.load(
                    patches_ptr + (event * DEPTH + tap[:, None]) * positions + position[None, :],
                    position_ok[None, :],
                    0.0,
                )
                hidden = tl.dot(weight, patch, input_precision=PRECISION)
                part = tl.sum(tl.maximum(hidden, 0.0) * tail, axis=1)
                total += tl.where(slot[None, :] == j, part[:, None], 0.0)
        event = first_event + slot
        tl.store(
            out_ptr + row[:, None] * events + event[None, :],
            total,
            row_ok[:, None] & (event < events)[None, :],
        )

    return fused_rows


def fused_rows(
    weight: Tensor,
    patches: Tensor,
    tail: Tensor,
    precision: str | None = None,
) -> Tensor:
    """Per-row sums (rows, events) of ReLU(weight @ patches[e]) * tail over positions.

    ``weight`` (rows, DEPTH), ``patches`` (events, DEPTH, positions), ``tail`` (rows,
    positions), all float32 on one device. ``precision``: one of :data:`PRECISIONS` (``tf32``:
    about 6e-4 relative error of a prediction, 3x faster at 4,096 children; docs/performance.md),
    by default :func:`default_precision`.
    """
    precision = precision or default_precision()
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    rows, depth = weight.shape
    events, _, positions = patches.shape
    if depth != DEPTH or patches.shape[1] != DEPTH or tail.shape != (rows, positions):
        raise ValueError(
            f"shapes do not fit: weight {tuple(weight.shape)}, patches "
            f"{tuple(patches.shape)}, tail {tuple(tail.shape)} (inner dimension {DEPTH})"
        )
    if triton_support.interpreted():
        precision = "ieee"  # the interpreter computes float32 products whatever is asked
    tile_rows, tile_positions, tile_events, warps = TILES[precision]
    out = weight.new_empty(rows, events)
    grid = (-(-rows // tile_rows), -(-events // tile_events))
    _kernel()[grid](
        weight.contiguous(),
        patches.contiguous(),
        tail.contiguous(),
        out,
        rows,
        events,
        positions,
        DEPTH=DEPTH,
        ROWS=tile_rows,
        POSITIONS=tile_positions,
        EVENTS=tile_events,
        PRECISION=precision,
        num_warps=warps,
    )
    return out
