"""The channel mixing of an FFT convolution: per frequency, a product of tiny matrices.

Between its transforms a convolution in the FFT form is, at each of ~10^5 frequencies, a
product of the input's spectra (batch x in-channels) with the kernel's (in x out), 1-16
channels each. ``torch.einsum`` runs that as batched matrix products over frequencies, with
copies into a frequency-major layout and back. The Triton kernels here read the spectra in the
layout the FFTs write (frequency innermost, real and imaginary parts interleaved) and write
the layout the inverse FFT reads. On an H100 (docs/history/benchmarks.md, "The FFT form's channel
mixing and padding") the kernel gradient's product over the batch ran 1.3-5x faster than
``einsum``; the channel products ran up to 1.3x faster with 6-8 channels and 2-2.5x slower with
16 input channels. So, like cuDNN's
autotuning, each product shape is timed in every form on its first use and the fastest form
kept (:func:`chosen_forms` lists the choices); a form's sums run in a fixed order, but the
choice, and with it float32 rounding, can differ between runs. A kernel that Triton cannot
compile or run on the GPU at hand is skipped with one warning. On CPUs, or without Triton,
``einsum`` runs.

Spectra are complex64 tensors ``(rows, channels, *frequencies)``, contiguous as the FFTs write
them.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Callable

import torch
from torch import Tensor

from evogan import triton_support

BLOCK_F = 128  # frequencies per program: one 128-thread program reads 1 KiB runs of each row
ROWS = 8  # batch rows per program of the channel product
FORMS = ("einsum", "tiled")
_allowed: frozenset[str] = frozenset(FORMS)
_chosen: dict[tuple, str] = {}
_timings: dict[tuple, dict[str, float]] = {}


def allow_forms(*names: str) -> None:
    """Choose only among these forms (none named: all of :data:`FORMS`, the default); a product
    with none of them runs ``einsum``. How ``scripts/bench_gan.py`` times ``einsum`` alone and
    the tests check each kernel. Forgets the choices made so far."""
    unknown = set(names) - set(FORMS)
    if unknown:
        raise ValueError(f"unknown form(s) {sorted(unknown)}; choose from {', '.join(FORMS)}")
    global _allowed
    _allowed = frozenset(names or FORMS)
    _chosen.clear()
    _timings.clear()


def _use_kernels(*spectra: Tensor) -> bool:
    return bool(_allowed - {"einsum"}) and triton_support.runs_on(*spectra)


def mix_channels(spectra: Tensor, kernel: Tensor, conjugate: bool, transpose: bool) -> Tensor:
    """``out[n, p] = sum_q spectra[n, q] * k[p, q]`` per frequency, where ``k`` is ``kernel``
    (``(P, Q, ...)``), or its first two axes swapped when ``transpose`` (``kernel`` is then
    ``(Q, P, ...)``), conjugated when ``conjugate``."""

    def einsum() -> Tensor:
        k = kernel.transpose(0, 1) if transpose else kernel
        return torch.einsum("nq...,pq...->np...", spectra, k.conj() if conjugate else k)

    if not _use_kernels(spectra, kernel):
        return einsum()
    spectra, kernel = spectra.contiguous(), kernel.contiguous()
    rows, channels = spectra.shape[:2]
    out_channels = kernel.shape[1] if transpose else kernel.shape[0]
    frequencies = spectra[0, 0].numel()
    stride_q, stride_p = kernel.stride()[:2] if transpose else kernel.stride()[1::-1]

    def tiled() -> Tensor:
        out = spectra.new_empty((rows, out_channels, *spectra.shape[2:]))
        grid = (-(-rows // ROWS), -(-frequencies // BLOCK_F))
        _channel_product()[grid](
            torch.view_as_real(spectra),
            torch.view_as_real(kernel),
            torch.view_as_real(out),
            rows,
            frequencies,
            stride_p,
            stride_q,
            P=out_channels,
            Q=channels,
            Q_PAD=_pad(channels),
            CONJUGATE=conjugate,
            ROWS=ROWS,
            BLOCK_F=BLOCK_F,
            num_warps=4,
        )
        return out

    key = ("mix", conjugate, transpose, tuple(spectra.shape), tuple(kernel.shape), spectra.device)
    return _fastest(key, {"einsum": einsum, "tiled": tiled}, spectra.device)()


def correlate_over_batch(spectra: Tensor, upstream: Tensor) -> Tensor:
    """``out[p, q] = sum_n spectra[n, q] * conj(upstream[n, p])`` per frequency: the kernel
    gradient's spectra, from the input's (``(N, Q, ...)``) and the output gradient's
    (``(N, P, ...)``)."""

    def einsum() -> Tensor:
        return torch.einsum("nq...,np...->pq...", spectra, upstream.conj())

    if not _use_kernels(spectra, upstream):
        return einsum()
    spectra, upstream = spectra.contiguous(), upstream.contiguous()
    rows, channels = spectra.shape[:2]
    out_channels = upstream.shape[1]
    frequencies = spectra[0, 0].numel()

    def tiled() -> Tensor:
        out = spectra.new_empty((out_channels, channels, *spectra.shape[2:]))
        grid = (out_channels, -(-frequencies // BLOCK_F))  # one frequency block's programs together
        _batch_correlation()[grid](
            torch.view_as_real(spectra),
            torch.view_as_real(upstream),
            torch.view_as_real(out),
            rows,
            frequencies,
            P=out_channels,
            Q=channels,
            Q_PAD=_pad(channels),
            BLOCK_F=BLOCK_F,
            num_warps=4,
        )
        return out

    key = ("correlate", tuple(spectra.shape), tuple(upstream.shape), spectra.device)
    return _fastest(key, {"einsum": einsum, "tiled": tiled}, spectra.device)()


def _fastest(key: tuple, forms: dict[str, Callable[[], Tensor]], device: torch.device):
    """The allowed form of ``forms`` that ran fastest for ``key`` (timed on its first use: one
    warm-up and three timed calls each, as cuDNN's autotuning does for convolutions)."""
    if key not in _chosen:
        candidates = [name for name in forms if name in _allowed] or ["einsum"]
        times = {}  # one candidate: nothing to time
        if len(candidates) > 1:
            times = {name: _seconds(name, forms[name], device) for name in candidates}
        _chosen[key], _timings[key] = min(times, key=times.get, default=candidates[0]), times
    return forms[_chosen[key]]


def _seconds(name: str, form: Callable[[], Tensor], device: torch.device) -> float:
    """Seconds for three calls of ``form``; infinite, with one warning, where a kernel cannot
    be compiled or run on this GPU (``einsum`` then does the work)."""
    try:
        form()  # warm-up: Triton compiles a kernel on its first call
    except Exception as exc:
        if name == "einsum":
            raise
        first = (str(exc).strip().splitlines() or [""])[0]
        warnings.warn(
            f"the {name} Triton kernel of the FFT convolution failed here "
            f"({type(exc).__name__}: {first}); einsum mixes the channels instead",
            stacklevel=2,
        )
        return math.inf
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(3):
        form()
    _synchronize(device)
    return time.perf_counter() - start


def chosen_forms() -> list[dict]:
    """Each product shape met so far, the form picked for it and every candidate's seconds for
    three calls (for benchmarks and profiles; plain lists, strings and numbers, as JSON wants)."""
    return [
        {
            "product": [str(part) if isinstance(part, torch.device) else part for part in key],
            "form": form,
            "seconds": _timings[key],
        }
        for key, form in _chosen.items()
    ]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _pad(n: int) -> int:
    """The power of two at or above ``n`` (Triton's tiles have power-of-two sides)."""
    return 1 << max(0, n - 1).bit_length()


@functools.cache
def _channel_product():
    import triton
    import triton.language as tl

    @triton.jit
    def channel_product(
        a_ptr,  # (N, Q, F) complex as float pairs
        k_ptr,  # complex, frequency stride 1, p and q strides given
        out_ptr,  # (N, P, F)
        N,
        F,
        stride_p,
        stride_q,
        P: tl.constexpr,
        Q: tl.constexpr,
        Q_PAD: tl.constexpr,
        CONJUGATE: tl.constexpr,
        ROWS: tl.constexpr,
        BLOCK_F: tl.constexpr,
    ):
        f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
        q = tl.arange(0, Q_PAD)
        first = tl.program_id(0) * ROWS
        a_row = a_ptr + first.to(tl.int64) * (2 * Q) * F  # 64-bit from here on
        out_row = out_ptr + first.to(tl.int64) * (2 * P) * F
        a_cells = 2 * (q[:, None] * F + f[None, :])
        for r in range(ROWS):
            f_ok = f < tl.where(first + r < N, F, 0)  # rows past the end: nothing read or stored
            tile_ok = (q[:, None] < Q) & f_ok[None, :]
            a_re = tl.load(a_row + a_cells, tile_ok, 0.0)
            a_im = tl.load(a_row + a_cells + 1, tile_ok, 0.0)
            for p in tl.static_range(P):
                k_cells = 2 * (p * stride_p + q[:, None] * stride_q + f[None, :])
                k_re = tl.load(k_ptr + k_cells, tile_ok, 0.0)
                k_im = tl.load(k_ptr + k_cells + 1, tile_ok, 0.0)
                if CONJUGATE:
                    k_im = -k_im
                re = tl.sum(a_re * k_re - a_im * k_im, axis=0)
                im = tl.sum(a_re * k_im + a_im * k_re, axis=0)
                out_cells = 2 * (p * F + f)
                tl.store(out_row + out_cells, re, f_ok)
                tl.store(out_row + out_cells + 1, im, f_ok)
            a_row += 2 * Q * F
            out_row += 2 * P * F

    return channel_product


@functools.cache
def _batch_correlation():
    import triton
    import triton.language as tl

    @triton.jit
    def batch_correlation(
        x_ptr,  # (N, Q, F) complex as float pairs
        g_ptr,  # (N, P, F)
        out_ptr,  # (P, Q, F)
        N,
        F,
        P: tl.constexpr,
        Q: tl.constexpr,
        Q_PAD: tl.constexpr,
        BLOCK_F: tl.constexpr,
    ):
        p = tl.program_id(0)
        f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
        q = tl.arange(0, Q_PAD)
        f_ok = f < F
        tile_ok = (q[:, None] < Q) & f_ok[None, :]
        x_cells = 2 * (q[:, None] * F + f[None, :])
        x_row = x_ptr
        g_row = g_ptr + 2 * (p * F + f)
        re = tl.zeros((Q_PAD, BLOCK_F), dtype=tl.float32)
        im = tl.zeros((Q_PAD, BLOCK_F), dtype=tl.float32)
        for _ in range(N):
            x_re = tl.load(x_row + x_cells, tile_ok, 0.0)
            x_im = tl.load(x_row + x_cells + 1, tile_ok, 0.0)
            g_re = tl.load(g_row, f_ok, 0.0)[None, :]
            g_im = tl.load(g_row + 1, f_ok, 0.0)[None, :]
            re += x_re * g_re + x_im * g_im
            im += x_im * g_re - x_re * g_im
            x_row += 2 * Q * F
            g_row += 2 * P * F
        tl.store(out_ptr + 2 * p * Q * F + x_cells, re, tile_ok)
        tl.store(out_ptr + 2 * p * Q * F + x_cells + 1, im, tile_ok)

    return batch_correlation
