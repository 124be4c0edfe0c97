"""The fused C kernel of the regressor's batched evaluation: compiled on first use, then cached.

The im2col + matmul path of :func:`evogan.regressor.network.batched_predict` writes the whole
convolution output to memory and reads it back three times (ReLU, tail, sum); on a CPU that
costs half the FLOP rate. ``_fused_eval.c`` keeps each block of convolution outputs in vector
registers from the first tap to its pooling cell, skips the positions that floor-mode pooling
drops, and convolves a filter that several candidates share once (the children of a
generation keep most of their elite's filters). It is built by :mod:`evogan.native` on first
use.
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
LANES = 8  # rows per tail vector, and the rows' padding (must match LANES in the C source)
POSITION_BLOCK = 12  # position counts are padded to a multiple of this (ditto)
MAX_THREADS = 256  # ditto


@functools.cache
def kernel() -> ctypes.CDLL | None:
    """The loaded kernel library, or None (then callers use the torch path).

    Built at most once per process; a failure is one warning naming the cause and the fix.
    """
    pointer, count = ctypes.c_void_p, ctypes.c_long
    argtypes = [
        *(pointer, pointer, count, count),  # x, event rows of x or NULL, events, event stride
        *(pointer, pointer),  # weight [taps][rows], bias [rows]
        *(pointer, pointer, ctypes.c_int),  # position offsets, their cells, runs of 4 per cell
        *(count, count),  # positions, cells
        *(pointer, count, count),  # tap offsets, taps, rows
        *(pointer, pointer, count),  # tail [tails][cells][LANES], tail vectors, tails
        *(pointer, pointer, ctypes.c_int),  # out, pooled sums or NULL, threads
    ]
    return native.load(
        SOURCE,
        "the fused evaluation kernel",
        "the regressor's batched evaluation uses the slower torch path",
        {"evogan_fused_eval": argtypes},
    )


@functools.lru_cache(maxsize=32)
def offsets(
    input_shape: tuple[int, int, int], kernel_size: int, pool: int, pooled: tuple[int, int]
) -> tuple[Tensor, Tensor, Tensor]:
    """Offset tables of one layout (cached: never modify them).

    Returns the input offsets of the convolution positions that floor-mode pooling keeps
    (cell by cell, each cell's window row-major, padded with offset 0 to a multiple of
    POSITION_BLOCK), the pooling cell each position feeds (padding positions feed cell
    ``pooled_h * pooled_w``, which nothing reads) and the input offsets of the kernel taps.
    """
    channels, height, width = input_shape
    cell_y, cell_x, dy, dx = np.meshgrid(
        np.arange(pooled[0]), np.arange(pooled[1]), np.arange(pool), np.arange(pool), indexing="ij"
    )
    used = cell_y.size
    padded = -(-used // POSITION_BLOCK) * POSITION_BLOCK
    positions = np.zeros(padded, dtype=np.int32)
    positions[:used] = ((cell_y * pool + dy) * width + cell_x * pool + dx).reshape(-1)
    cells = np.full(padded, pooled[0] * pooled[1], dtype=np.int32)
    cells[:used] = (cell_y * pooled[1] + cell_x).reshape(-1)
    c, ky, kx = np.meshgrid(
        np.arange(channels), np.arange(kernel_size), np.arange(kernel_size), indexing="ij"
    )
    taps = (c * height * width + ky * width + kx).reshape(-1).astype(np.int32)
    return torch.from_numpy(positions), torch.from_numpy(cells), torch.from_numpy(taps)


def fused_sums(
    x: Tensor,
    weight: Tensor,
    bias: Tensor,
    positions: Tensor,
    cells: Tensor,
    taps: Tensor,
    tail: Tensor,
    tail_vector: Tensor,
    index: Tensor | None = None,
    cell_out: Tensor | None = None,
) -> Tensor:
    """Tail sums (events, tails, LANES) of the events ``x[index]`` (read in place, no gathered
    copy) or all of ``x``: lane by lane, the pooled relu(conv + bias) of the rows in vector
    ``tail_vector[t]`` weighted by ``tail[t]`` and summed over the pooling cells. Given
    ``cell_out`` (events, rows, pooling cells), the pooled sums themselves are written there.

    ``weight`` (taps, rows) and ``bias`` (rows,) hold one filter per row, rows a multiple of
    LANES (zero rows as padding); ``cells`` (positions,) names each position's pooling cell
    (``tail.shape[1]`` for padding positions); ``tail`` is (tails, pooling cells, LANES) and
    ``tail_vector`` (tails,) ascending; ``x`` is (events, C, H, W) float32. Long because
    the C kernel reads every table without bounds checks, so each is checked here first.
    """
    library = kernel()
    if library is None:
        raise RuntimeError("the fused evaluation kernel is not available")
    rows, count = weight.shape[1], positions.shape[0]
    if rows % LANES or count % POSITION_BLOCK:
        raise ValueError(f"rows and positions must be padded, got {rows} and {count}")
    shapes = (x.dim(), weight.shape[0], bias.shape, cells.shape, tail.dim(), tail_vector.dim())
    if shapes != (4, taps.shape[0], (rows,), (count,), 3, 1) or tail.shape[::2] != (
        tail_vector.shape[0],
        LANES,
    ):
        raise ValueError(f"inconsistent shapes (x dims, taps, bias, cells, tail): {shapes}")
    floats = (x, weight, bias, tail)
    if any(t.dtype != torch.float32 or t.device.type != "cpu" for t in floats) or any(
        t.dtype != torch.int32 for t in (positions, cells, taps, tail_vector)
    ):
        raise ValueError("the fused kernel takes float32 CPU tensors and int32 offset tables")
    stride = x[0].numel() if x.shape[0] else 0
    if x.shape[0] and int(positions.max()) + int(taps.max()) >= stride:
        raise ValueError(f"offset tables reach beyond an event of {tuple(x.shape[1:])}")
    pooled = tail.shape[1]
    if count and not 0 <= int(cells.min()) <= int(cells.max()) <= pooled:
        raise ValueError(f"pooling cells must lie in [0, {pooled}]")
    vectors = tail_vector.to(torch.int64)
    if vectors.numel() and (
        int(vectors.min()) < 0
        or int(vectors.max()) >= rows // LANES
        or bool((vectors.diff() < 0).any())
    ):
        raise ValueError(f"tail vectors must be ascending and below {rows // LANES}")
    quads = _in_runs_of_four(cells, pooled)
    x = x.contiguous()
    tensors = (weight, bias, positions, cells, taps, tail, tail_vector)
    weight, bias, positions, cells, taps, tail, tail_vector = (t.contiguous() for t in tensors)
    events = x.shape[0]
    rows_of_x = None
    if index is not None:
        index = index.to(torch.int64).contiguous()
        if index.numel() and not 0 <= int(index.min()) <= int(index.max()) < x.shape[0]:
            raise ValueError(f"event index reaches outside the {x.shape[0]} events of x")
        events, rows_of_x = index.numel(), index.data_ptr()
    out = x.new_empty(events, tail.shape[0], LANES)
    if cell_out is not None and (
        cell_out.shape != (events, rows, pooled)
        or cell_out.dtype != torch.float32
        or not cell_out.is_contiguous()
    ):
        raise ValueError(f"cell_out must be contiguous float32 {(events, rows, pooled)}")
    threads = max(1, min(torch.get_num_threads(), MAX_THREADS))
    status = library.evogan_fused_eval(
        x.data_ptr(), rows_of_x, events, stride,
        weight.data_ptr(), bias.data_ptr(), positions.data_ptr(), cells.data_ptr(), int(quads),
        count, pooled, taps.data_ptr(), taps.shape[0], rows,
        tail.data_ptr(), tail_vector.data_ptr(), tail.shape[0], out.data_ptr(),
        None if cell_out is None else cell_out.data_ptr(), threads,
    )  # fmt: skip
    if status == -2:
        raise MemoryError("evogan_fused_eval could not allocate its pooling scratch")
    if status != 0:
        raise RuntimeError(f"evogan_fused_eval rejected its arguments (status {status})")
    return out


def _in_runs_of_four(cells: Tensor, pooled: int) -> bool:
    """Whether every pooling cell's positions are one aligned run of four (2 x 2 pooling in
    :func:`offsets` order): the kernel then sums a cell in registers and stores it once."""
    if cells.numel() % 4:
        return False
    runs = cells.view(-1, 4)
    first = runs[:, 0]
    distinct = (first[1:] > first[:-1]) | (first[1:] == pooled)
    return bool((runs == first[:, None]).all() and distinct.all())


def filter_sums(
    views: dict[str, Tensor], x: Tensor, pool: int, index: Tensor | None = None
) -> Tensor:
    """Per-(candidate, filter) sums (P*filters, B) of the regressor's candidates ``views``
    (:func:`evogan.regressor.network.unflatten`) with average pooling over ``pool`` x ``pool``.

    A filter equal in every tap and bias to the first candidate's filter of the same index is
    convolved once: the children of a (1+lambda) generation, scored after their elite, change
    a few weights each, so most of their filters are the elite's. The first candidate's filters
    are the first rows, then every other filter of its own; each (candidate, filter) pair gets
    its lane in one tail, a tail being one candidate's filters that share a vector of rows.
    """
    weight = views["conv.weight"]
    count, filters = weight.shape[:2]
    pairs, lanes = count * filters, LANES
    filter_rows = _filter_rows(views)
    own = (filter_rows != filter_rows[:1]).any(dim=2).reshape(-1)
    row = torch.where(own, own.cumsum(0) - 1 + filters, torch.arange(pairs) % filters)
    distinct = torch.cat([filter_rows[0], filter_rows.reshape(pairs, -1)[own]])
    pooled, (positions, cells, taps) = _layout_tables(weight, x, pool)
    weight_t, bias = _row_tables(distinct, taps.shape[0], "conv.bias" in views)
    lane = row % lanes
    key = row // lanes * count + torch.arange(pairs) // filters
    tail_keys, tail_of = torch.unique(key, return_inverse=True)
    cell_count = pooled[0] * pooled[1]
    tail = weight.new_zeros(tail_keys.shape[0], cell_count, lanes)
    linear = views["linear.weight"].reshape(pairs, cell_count)
    tail[tail_of, :, lane] = linear * (1 / pool**2)
    tail_vector = (tail_keys // count).to(torch.int32)
    tables = (positions, cells, taps)
    sums = fused_sums(x, weight_t, bias, *tables, tail, tail_vector, index)
    return sums.flatten(1).index_select(1, tail_of * lanes + lane).T


def pooled_filters(views: dict[str, Tensor], x: Tensor, pool: int) -> Tensor:
    """Average-pooled relu(conv + bias) (P, events, filters * pooling cells) of the candidates
    ``views`` on ``x``, in the order of ``avg_pool2d(...).flatten(1)``: the linear layer's
    input, as a least-squares readout fit wants it. Every filter is convolved (no sharing);
    a view of one (events, P, features) tensor."""
    count, filters = views["conv.weight"].shape[:2]
    pooled, tables, weight_t, bias = every_filter_tables(views, x, pool)
    cell_count, events = pooled[0] * pooled[1], x.shape[0]
    sums = x.new_empty(events, weight_t.shape[1], cell_count)
    no_tails = x.new_empty(0, cell_count, LANES), torch.empty(0, dtype=torch.int32)
    fused_sums(x, weight_t, bias, *tables, *no_tails, cell_out=sums)
    per_candidate = sums[:, : count * filters].div_(pool**2)
    return per_candidate.reshape(events, count, filters * cell_count).transpose(0, 1)


def every_filter_tables(
    views: dict[str, Tensor], x: Tensor, pool: int
) -> tuple[tuple[int, int], tuple[Tensor, Tensor, Tensor], Tensor, Tensor]:
    """The pooled grid, the offset tables (positions, cells, taps) and the weight (taps, rows)
    and bias (rows,) tables of the candidates ``views`` on ``x``, one row per filter of every
    candidate (no sharing): what the pooled sums and the gradient kernel read."""
    weight = views["conv.weight"]
    pooled, tables = _layout_tables(weight, x, pool)
    filter_rows = _filter_rows(views).reshape(weight.shape[0] * weight.shape[1], -1)
    weight_t, bias = _row_tables(filter_rows, tables[2].shape[0], "conv.bias" in views)
    return pooled, tables, weight_t, bias


def _filter_rows(views: dict[str, Tensor]) -> Tensor:
    """(P, filters, taps [+ 1]): each filter's taps, then its bias where the network has one."""
    weight = views["conv.weight"]
    rows = weight.reshape(*weight.shape[:2], -1)
    if "conv.bias" in views:
        rows = torch.cat([rows, views["conv.bias"].unsqueeze(2)], dim=2)
    return rows


def _layout_tables(
    weight: Tensor, x: Tensor, pool: int
) -> tuple[tuple[int, int], tuple[Tensor, Tensor, Tensor]]:
    """The pooled grid of ``weight``'s filters on ``x`` and the kernel's offset tables for it."""
    kernel_size, (_, height, width) = weight.shape[-1], x.shape[1:]
    pooled = ((height - kernel_size + 1) // pool, (width - kernel_size + 1) // pool)
    return pooled, offsets(tuple(x.shape[1:]), kernel_size, pool, pooled)


def _row_tables(filter_rows: Tensor, taps: int, bias: bool) -> tuple[Tensor, Tensor]:
    """The kernel's weight (taps, rows) and bias (rows,) of ``filter_rows`` (rows, taps [+ 1]),
    rows padded with zeros to a multiple of LANES."""
    padded = -(-filter_rows.shape[0] // LANES) * LANES
    weight_t = filter_rows.new_zeros(taps, padded)
    weight_t[:, : filter_rows.shape[0]] = filter_rows[:, :taps].T
    bias_row = filter_rows.new_zeros(padded)
    if bias:
        bias_row[: filter_rows.shape[0]] = filter_rows[:, -1]
    return weight_t, bias_row
