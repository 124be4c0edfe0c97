"""A block's convolution, activation and eval-mode batch norm on the CPU from a C kernel.

oneDNN, which runs torch's CPU convolutions, reaches 5-30% of the CPU's float32 matrix-product
rate on the 3DGAN generator's convolutions of 1-16 channels (docs/history/benchmarks.md,
"Generation near the CPU's limit"); ``_small_conv.c`` runs them as shifted vector
multiply-adds at most of that rate, with the activation and the batch norm's scale and shift
applied as each output is stored, and on CPUs with AVX512-BF16 the same in bfloat16 with
float32 sums (:func:`bf16_runs`). It is built by :mod:`evogan.native` on first use; where it
cannot be had, :func:`kernel` is None and callers run torch's convolution.
"""

from __future__ import annotations

import ctypes
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from evogan import native

SOURCE = Path(__file__).with_name("_small_conv.c")
SLACK = 128  # floats the kernel reads past its input's last cell (must match the C source)
GROUP = 8  # output channels per register group (ditto)
MAX_THREADS = 256  # ditto
ACTIVATIONS = {None: 0, "relu": 1, "leaky_relu": 2}


@functools.cache
def kernel() -> ctypes.CDLL | None:
    """The loaded kernel library, or None (then the generator's convolutions run in torch)."""
    pointer = ctypes.c_void_p
    return native.load(
        SOURCE,
        "the generator's convolution kernel",
        "the 3DGAN generator's CPU convolutions run in torch (oneDNN)",
        {
            "evogan_small_conv": [pointer] * 10
            + [ctypes.c_int, ctypes.c_float]
            + [ctypes.c_int] * 2,
            "evogan_small_conv_bf16": [],
            "evogan_pad": [pointer] * 3 + [ctypes.c_int] * 2,
        },
    )


def bf16_runs() -> bool:
    """Whether the kernel runs bfloat16 here (a CPU and compiler with AVX512-BF16)."""
    library = kernel()
    return library is not None and library.evogan_small_conv_bf16() == 1


def pack_weight(weight: torch.Tensor, bf16: bool = False) -> torch.Tensor:
    """``(O, C, kx, ky, kz)`` -> the kernel's layout: groups of up to 8 output channels, each
    ``[C][taps][group]``, flat and contiguous float32; with ``bf16`` each entry a 32-bit word
    of two bfloat16 (channels 2c and 2c + 1, a missing last one zero)."""
    out, channels = weight.shape[:2]
    taps = weight.detach().float().reshape(out, channels, -1)
    if bf16:
        taps = torch.cat([taps, taps.new_zeros(out, channels % 2, taps.shape[2])], dim=1)
        pairs = taps.to(torch.bfloat16).unflatten(1, (-1, 2)).transpose(2, 3)
        words = pairs.reshape(out, -1, 2).contiguous().view(torch.int32)
        taps = words.view(out, -1, taps.shape[2])  # (O, C / 2, taps) words
    groups = [taps[o : o + GROUP].permute(1, 2, 0).reshape(-1) for o in range(0, out, GROUP)]
    return torch.cat(groups).contiguous()


@dataclass(frozen=True)
class Epilogue:
    """What is applied to each convolution output as it is stored: the activation (None,
    ``relu`` or ``leaky_relu`` with ``slope``), then ``* scale + shift`` per channel (an
    eval-mode batch norm) where given."""

    activation: str | None = None
    slope: float = 0.0
    scale: torch.Tensor | None = None
    shift: torch.Tensor | None = None


def padded_input(
    x: torch.Tensor, pads: tuple[tuple[int, int], ...], pairs: bool = False
) -> torch.Tensor:
    """``x`` zero-padded by ``pads`` ((before, after) per grid axis) as the kernel reads it,
    with :data:`SLACK` zero words after its last cell: contiguous float32, or with ``pairs``
    (N, C / 2, *grid) 32-bit words of two channels' bfloat16 (rounded to nearest even). Made
    by the kernel's threads: a torch copy's OpenMP threads, spinning after it, slowed the
    kernel's on a CPU of few cores."""
    n, c, *grid = x.shape
    cells = (g + lo + hi for g, (lo, hi) in zip(grid, pads, strict=True))
    shape = (n, (c + 1) // 2 if pairs else c, *cells)
    flat = torch.empty(math.prod(shape) + SLACK, dtype=torch.int32 if pairs else torch.float32)
    source = x.float().contiguous()
    sizes = torch.tensor([n, c, *grid, *(cells for axis in pads for cells in axis)])
    threads = min(torch.get_num_threads(), MAX_THREADS)
    if kernel().evogan_pad(source.data_ptr(), flat.data_ptr(), sizes.data_ptr(), pairs, threads):
        raise ValueError(f"the padding kernel refused input {tuple(x.shape)}, pads {pads}")
    return flat[: math.prod(shape)].view(shape)


def placement(
    out: torch.Tensor,
    channels: int,
    phase: tuple[tuple[int, ...], tuple[int, ...]] | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the kernel stores each convolution output (``_small_conv.c``): strides of ``out``
    (N, O, *cells), the upsampling factors and the cells per axis, and per convolution channel
    its output channel and offsets. ``phase``: (factors, offsets) of the phase form, whose
    ``channels`` are O x s1 x s2 x s3 phases (output channel first), else None."""
    factors, offsets = phase if phase is not None else ((1, 1, 1), (0, 0, 0))
    place = torch.tensor([*out.stride(), *factors, *out.shape[2:]], dtype=torch.int64)
    index = torch.arange(channels, dtype=torch.int64)
    s1, s2, s3 = factors
    phases = [index // (s1 * s2 * s3), index // (s2 * s3) % s1, index // s3 % s2, index % s3]
    for axis, offset in enumerate(offsets, start=1):
        phases[axis] = phases[axis] - offset
    return place, torch.stack(phases, dim=1).contiguous()


def small_conv3d(
    x: torch.Tensor,
    pads: tuple[tuple[int, int], ...],
    packed: torch.Tensor,
    kernel_size: tuple[int, int, int],
    channels: int,
    bias: torch.Tensor | None,
    epilogue: Epilogue,
    phase: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None,
    bf16: bool = False,
) -> torch.Tensor:
    """``epilogue(conv3d(pad(x, pads), weight, bias))`` (stride 1; ``pads``: (before, after)
    zero cells per grid axis) for the weight in :func:`pack_weight`'s layout, ``channels``
    output channels and float32 ``bias`` and epilogue tensors, contiguous (N, O, *cells), on
    torch's thread count. ``phase``: (factors, offsets, lengths) of the phase form
    (:func:`evogan.gan3d.kernels.convolution.phase_plan`): the ``channels`` are its phases,
    stored shuffled into (N, channels / (s1 s2 s3), *lengths) cells. ``bf16``: inputs and
    weights (``pack_weight(..., bf16=True)``) in bfloat16, sums and output in float32."""
    library = kernel()
    if library is None:
        raise RuntimeError("the generator's convolution kernel is not built")
    x = padded_input(x, pads, pairs=bf16)
    n, in_channels, *grid = x.shape
    cells = [g - k + 1 for g, k in zip(grid, kernel_size, strict=True)]
    _, ny, nz = grid
    taps = [
        dx * ny * nz + dy * nz + dz
        for dx in range(kernel_size[0])
        for dy in range(kernel_size[1])
        for dz in range(kernel_size[2])
    ]
    if phase is None:
        out = torch.empty((n, channels, *cells), dtype=torch.float32)
    else:
        out = torch.empty((n, channels // math.prod(phase[0]), *phase[2]), dtype=torch.float32)
    place, phases = placement(out, channels, None if phase is None else phase[:2])
    sizes = torch.tensor([n, in_channels, channels, *grid, *cells, len(taps)], dtype=torch.int64)
    offsets = torch.tensor(taps, dtype=torch.int64)  # held until the call returns
    scale, shift = epilogue.scale, epilogue.shift
    status = library.evogan_small_conv(
        x.data_ptr(),
        packed.data_ptr(),
        None if bias is None else bias.data_ptr(),
        None if scale is None else scale.data_ptr(),
        None if shift is None else shift.data_ptr(),
        out.data_ptr(),
        sizes.data_ptr(),
        offsets.data_ptr(),
        place.data_ptr(),
        phases.data_ptr(),
        ACTIVATIONS[epilogue.activation],
        epilogue.slope,
        int(bf16),
        min(torch.get_num_threads(), MAX_THREADS),
    )
    if status != 0:
        raise ValueError(
            f"the convolution kernel refused input {tuple(x.shape)}, taps {kernel_size}"
        )
    return out
