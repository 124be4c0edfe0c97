"""The fused C kernel of the regressor's batched evaluation: compiled on first use, then cached.

The im2col + matmul path of :func:`evogan.regressor.network.batched_predict` writes the whole
convolution output to memory and reads it back three times (ReLU, tail, sum); on a CPU that
costs half the FLOP rate. ``_fused_eval.c`` keeps each block of convolution outputs in vector
registers from the first tap to the folded pooling + linear weight, and skips the positions
that floor-mode pooling drops. It is built by :mod:`evogan.native` on first use.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from evogan import native

SOURCE = Path(__file__).with_name("_fused_eval.c")
LANES = 8  # rows per vector register (must match LANES in the C source)
POSITION_BLOCK = 12  # position counts are padded to a multiple of this (ditto)
MAX_THREADS = 256  # ditto


@functools.cache
def kernel() -> ctypes.CDLL | None:
    """The loaded kernel library, or None (then callers use the torch path).

    Built at most once per process; a failure is one warning naming the cause and the fix.
    """
    library = native.load(
        SOURCE,
        "the fused evaluation kernel",
        "the regressor's batched evaluation uses the slower torch path",
    )
    if library is None:
        return None
    function = library.evogan_fused_eval
    function.restype = ctypes.c_int
    pointer, count = ctypes.c_void_p, ctypes.c_long
    function.argtypes = [
        *(pointer, pointer, count, count),  # x, event rows of x or NULL, events, event stride
        *(pointer, pointer, pointer),  # weight [taps][rows], bias [rows], tail [positions][rows]
        *(pointer, count, pointer, count),  # position offsets, positions, tap offsets, taps
        *(count, pointer, ctypes.c_int),  # rows, out [events][rows], threads
    ]
    return library


@functools.lru_cache(maxsize=32)
def offsets(
    input_shape: tuple[int, int, int], kernel_size: int, pool: int, pooled: tuple[int, int]
) -> tuple[Tensor, Tensor, Tensor]:
    """Offset tables of one layout (cached: never modify them).

    Returns the input offsets of the convolution positions that floor-mode pooling keeps
    (row-major, padded with offset 0 to a multiple of POSITION_BLOCK), the pooled cell each
    position feeds (padding points at cell ``pooled_h * pooled_w``, meant to be a zero row) and
    the input offsets of the kernel taps.
    """
    channels, height, width = input_shape
    rows, columns = np.meshgrid(
        np.arange(pooled[0] * pool), np.arange(pooled[1] * pool), indexing="ij"
    )
    used = rows.size
    padded = -(-used // POSITION_BLOCK) * POSITION_BLOCK
    positions = np.zeros(padded, dtype=np.int32)
    positions[:used] = (rows * width + columns).reshape(-1)
    cells = np.full(padded, pooled[0] * pooled[1], dtype=np.int64)
    cells[:used] = (rows // pool * pooled[1] + columns // pool).reshape(-1)
    c, ky, kx = np.meshgrid(
        np.arange(channels), np.arange(kernel_size), np.arange(kernel_size), indexing="ij"
    )
    taps = (c * height * width + ky * width + kx).reshape(-1).astype(np.int32)
    return torch.from_numpy(positions), torch.from_numpy(cells), torch.from_numpy(taps)


def fused_rows(
    x: Tensor,
    weight: Tensor,
    bias: Tensor,
    tail: Tensor,
    positions: Tensor,
    taps: Tensor,
    index: Tensor | None = None,
) -> Tensor:
    """Per-row sums (events, rows) of relu(conv + bias) x tail over the listed positions, for
    the events ``x[index]`` (read in place, no gathered copy) or all of ``x``.

    ``weight`` (taps, rows), ``bias`` (rows,) and ``tail`` (positions, rows) are float32 with
    rows a multiple of LANES (zero rows as padding); ``x`` is (events, C, H, W) float32.
    """
    library = kernel()
    if library is None:
        raise RuntimeError("the fused evaluation kernel is not available")
    rows, count = weight.shape[1], positions.shape[0]
    if rows % LANES or count % POSITION_BLOCK:
        raise ValueError(f"rows and positions must be padded, got {rows} and {count}")
    shapes = (x.dim(), weight.shape[0], bias.shape, tail.shape)
    if shapes != (4, taps.shape[0], (rows,), (count, rows)):
        raise ValueError(f"inconsistent shapes (x dims, taps, bias, tail): {shapes}")
    floats = (x, weight, bias, tail)
    if any(t.dtype != torch.float32 or t.device.type != "cpu" for t in floats) or any(
        t.dtype != torch.int32 for t in (positions, taps)
    ):
        raise ValueError("the fused kernel takes float32 CPU tensors and int32 offset tables")
    stride = x[0].numel() if x.shape[0] else 0
    if x.shape[0] and int(positions.max()) + int(taps.max()) >= stride:
        raise ValueError(f"offset tables reach beyond an event of {tuple(x.shape[1:])}")
    x = x.contiguous()
    tensors = (weight, bias, tail, positions, taps)
    weight, bias, tail, positions, taps = (t.contiguous() for t in tensors)
    events = x.shape[0]
    rows_of_x = None
    if index is not None:
        index = index.to(torch.int64).contiguous()
        if index.numel() and not 0 <= int(index.min()) <= int(index.max()) < x.shape[0]:
            raise ValueError(f"event index reaches outside the {x.shape[0]} events of x")
        events, rows_of_x = index.numel(), index.data_ptr()
    out = x.new_empty(events, rows)
    threads = max(1, min(torch.get_num_threads(), MAX_THREADS))
    status = library.evogan_fused_eval(
        x.data_ptr(), rows_of_x, events, stride,
        weight.data_ptr(), bias.data_ptr(), tail.data_ptr(),
        positions.data_ptr(), positions.shape[0], taps.data_ptr(), taps.shape[0],
        rows, out.data_ptr(), threads,
    )  # fmt: skip
    if status != 0:
        raise RuntimeError(f"evogan_fused_eval rejected its arguments (status {status})")
    return out
