"""Dropout keep-masks on the CPU from a C kernel: a counter hash split over threads.

torch draws a CPU generator's numbers on one thread; for the discriminator of the 51x51x25
spec that was 8% of a bf16 training step on two cores, and it would be most of a step on a
node of many cores (docs/history/benchmarks.md, "Dropout masks on every CPU thread").
``_keep_mask.c`` hashes each element's index with a key drawn from the step's stream, the mask
:func:`evogan.gan3d.model.blocks.counter_uniform` gives compiled, on any number of threads. It is
built by :mod:`evogan.native` on first use.
"""

from __future__ import annotations

import ctypes
import functools
import math
from pathlib import Path

import torch

from evogan import native

SOURCE = Path(__file__).with_name("_keep_mask.c")
MAX_ELEMENTS = 2**32  # the hash's index is 32 bits (must match the C source)
MAX_THREADS = 256  # ditto


@functools.cache
def kernel() -> ctypes.CDLL | None:
    """The loaded kernel library, or None (then :func:`keep_mask` draws with torch.rand)."""
    count = ctypes.c_long
    return native.load(
        SOURCE,
        "the dropout mask kernel",
        "3DGAN dropout masks on the CPU are drawn by torch on one thread",
        {"evogan_keep_mask": [ctypes.c_void_p, count, count, count, ctypes.c_int]},
    )


@functools.cache
def threshold(p: float) -> int:
    """The smallest 24-bit hash value kept: ``u >= p`` in float32 for ``u = k / 2**24``."""
    return math.ceil(float(torch.tensor(p, dtype=torch.float32)) * 2**24)


def keep_mask(key: int, shape: torch.Size, p: float) -> torch.Tensor:
    """Boolean mask of ``shape`` keeping each element with probability ``1 - p``: the same as
    ``counter_uniform(key, shape) >= p``, or, where no kernel can be had (or the tensor has
    more elements than the hash indexes), torch's draw from a generator seeded with ``key``
    (other cells, the same rate, and the caller's stream moves on alike)."""
    library = kernel()
    if library is None or shape.numel() > MAX_ELEMENTS:
        return torch.rand(shape, generator=torch.Generator().manual_seed(key)) >= p
    keep = torch.empty(shape, dtype=torch.bool)
    threads = min(torch.get_num_threads(), MAX_THREADS)
    status = library.evogan_keep_mask(keep.data_ptr(), keep.numel(), key, threshold(p), threads)
    if status != 0:
        raise ValueError(f"dropout mask kernel refused key {key}, p {p}, {threads} threads")
    return keep
