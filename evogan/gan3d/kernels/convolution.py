"""Faster exact forms of a spec block's ``[upsample] -> [pad] -> Conv3d``.

The 3DGAN's convolutions have 1-16 channels and kernels of up to 288 taps, a shape where GPU
convolution libraries run their matrix units at a few percent (docs/history/benchmarks.md, "The
3DGAN's convolutions as phases and FFTs"). Two forms compute the same function with far less
work; both keep the block's layers and parameter names, so model files and checkpoints do not
change:

- **Phase form** of nearest upsampling by ``s`` followed by a convolution: each output cell
  reads a ``k``-wide window of the upsampled grid, which covers only ``J = (s + k - 2) // s + 1``
  cells of the input. Grouping the output by its phase ``r = p mod s`` turns the block into one
  convolution of the small input with ``J``-wide kernels and ``s`` times the output channels
  (kernels summed from the original per phase), then a depth-to-space shuffle. The shipped
  variable-angle generator's first block (x6 upsampling, 6x6x8 kernel) does 24x fewer
  multiply-adds this way. Used wherever it needs fewer taps (:func:`phase_pays`).
- **FFT form** (``trainer.convolution: fft``): a valid cross-correlation as a product of real
  3D FFTs, whose cost hardly depends on the kernel size; in float32 whatever the autocast, since
  cuFFT has no bfloat16. Used for kernels of at least :data:`FFT_MIN_TAPS` taps. The block's
  zero padding and the bias are applied on the copies the transforms make anyway; the channel
  mixing between the transforms is :mod:`evogan.gan3d.kernels.spectral_mixing`.

Both match the direct convolution to float32 rounding (``tests/test_gan_convolution.py``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from evogan.gan3d.kernels.spectral_mixing import correlate_over_batch, mix_channels

FFT_MIN_TAPS = 27  # from 27 taps the FFT form ran at least 1.5x float32 cuDNN (H100, per block)
# Transform lengths are products of these: on an H200 the 3DGAN's float32 + fft steps ran 3.7%
# faster than with 2, 3, 5 and 9% faster than with 2, 3 (scripts/bench_fft_lengths.py).
FFT_PRIMES = (2, 3, 5, 7)
# The forward pass's input spectra are kept for the weight gradients rather than transformed
# again: one real transform and one padding copy fewer per block and backward pass, 6% faster
# steps on an H200 for 20-30% more GPU memory (docs/history/benchmarks.md, "Kept input
# spectra"). False: how scripts/bench_gan.py times the other way.
keep_spectra = True


def phase_taps(factors: tuple[int, ...], kernel: tuple[int, ...]) -> tuple[int, ...]:
    """Input cells ``J`` a ``kernel``-wide window spans on a grid upsampled by ``factors``."""
    return tuple((s + k - 2) // s + 1 for s, k in zip(factors, kernel, strict=True))


def phase_pays(factors: tuple[int, ...], kernel: tuple[int, ...]) -> bool:
    """Whether the phase form needs fewer taps per output cell than the direct convolution."""
    return math.prod(phase_taps(factors, kernel)) < math.prod(kernel)


def phase_weights(weight: torch.Tensor, factors: tuple[int, int, int]) -> torch.Tensor:
    """``(O, I, k1, k2, k3)`` -> ``(O * s1 * s2 * s3, I, J1, J2, J3)``: for output channel
    ``o`` at phase ``(r1, r2, r3)``, tap ``j`` sums the taps ``t`` with ``(r + t) // s == j``."""
    taps = phase_taps(factors, tuple(weight.shape[2:]))
    sums = []
    for s, j, k in zip(factors, taps, weight.shape[2:], strict=True):
        r = torch.arange(s, device=weight.device).view(s, 1, 1)
        t = torch.arange(k, device=weight.device).view(1, 1, k)
        cell = torch.arange(j, device=weight.device).view(1, j, 1)
        sums.append(((r + t) // s == cell).to(weight.dtype))
    phased = torch.einsum("oiabc,pxa,qyb,rzc->opqrixyz", weight, *sums)
    return phased.reshape(-1, weight.shape[1], *taps)


def phase_plan(
    grid: tuple[int, ...],
    factors: tuple[int, int, int],
    kernel: tuple[int, ...],
    pads: tuple[tuple[int, int], ...],
) -> tuple[tuple[tuple[int, int], ...], tuple[int, ...], tuple[int, ...]]:
    """The phase form's zero padding of the small input ((before, after) cells per axis), and
    where the block's output starts in the shuffled phase result and how long it is, for an
    input of ``grid`` cells and ``pads`` (before, after) zero cells per axis of the upsampled
    grid. ``c = ceil(before / s)`` zero input cells in front stand for the padding, the output
    starts ``c * s - before`` cells into the phase result, and zero cells at the end cover the
    last window."""
    taps = phase_taps(factors, kernel)
    padding, offsets, lengths = [], [], []
    for n, s, k, j, (lo, hi) in zip(grid, factors, kernel, taps, pads, strict=True):
        length = n * s + lo + hi - k + 1
        cells = -(-lo // s)
        offset = cells * s - lo
        last = (offset + length - 1) // s + j - 1  # the last input cell (padded) a window reads
        padding.append((cells, max(0, last - (cells + n - 1))))
        offsets.append(offset)
        lengths.append(length)
    return tuple(padding), tuple(offsets), tuple(lengths)


def phase_shuffle(
    y: torch.Tensor,
    factors: tuple[int, int, int],
    offsets: tuple[int, ...],
    lengths: tuple[int, ...],
) -> torch.Tensor:
    """The phase convolution's output ``(N, O * s1 * s2 * s3, u1, u2, u3)`` (any strides) as the
    block's ``(N, O, *lengths)``: depth to space, then the window at ``offsets``."""
    n, u = y.shape[0], y.shape[2:]
    y = y.unflatten(1, (-1, *factors)).permute(0, 1, 5, 2, 6, 3, 7, 4)
    y = y.reshape(n, -1, u[0] * factors[0], u[1] * factors[1], u[2] * factors[2])
    (a, b, c), (la, lb, lc) = offsets, lengths
    return y[:, :, a : a + la, b : b + lb, c : c + lc]


def upsampled_conv3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    factors: tuple[int, int, int],
    pads: tuple[tuple[int, int], ...],
) -> torch.Tensor:
    """``conv3d(pad(upsample_nearest(x, factors), pads), weight, bias)`` in the phase form
    (:func:`phase_plan`); ``pads`` holds (before, after) zero cells per axis of the upsampled
    grid."""
    kernel = tuple(weight.shape[2:])
    padding, offsets, lengths = phase_plan(tuple(x.shape[2:]), factors, kernel, pads)
    (xa, xb), (ya, yb), (za, zb) = padding
    padded = F.pad(x, (za, zb, ya, yb, xa, xb))
    phased_bias = None if bias is None else bias.repeat_interleave(math.prod(factors))
    y = F.conv3d(padded, phase_weights(weight, factors), phased_bias)
    return phase_shuffle(y, factors, offsets, lengths)


def fft_size(n: int, primes: tuple[int, ...] | None = None) -> int:
    """The smallest length >= ``n`` whose prime factors are all in ``primes`` (default
    :data:`FFT_PRIMES`)."""
    while True:
        m = n
        for p in primes or FFT_PRIMES:
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


def padded_cells(x: torch.Tensor, pads: list[int]) -> list[int]:
    """Cells per axis of ``x`` with its zero padding (``pads``: before, after per axis)."""
    return [n + pads[2 * a] + pads[2 * a + 1] for a, n in enumerate(x.shape[2:])]


def _fft_shape(x: torch.Tensor, pads: list[int]) -> list[int]:
    return [fft_size(n) for n in padded_cells(x, pads)]


def _valid(x: torch.Tensor, weight: torch.Tensor, pads: list[int]) -> tuple[int, ...]:
    """Output cells per axis of the valid correlation of the zero-padded ``x`` with ``weight``."""
    return tuple(n - k + 1 for n, k in zip(padded_cells(x, pads), weight.shape[2:], strict=True))


def _spectrum(x: torch.Tensor, size: list[int], pads: list[int] | None = None) -> torch.Tensor:
    """Spectrum of ``x`` placed ``pads[2a]`` zero cells into a grid of ``size`` (one copy: the
    zero extension the transform needs anyway, with the block's padding in it)."""
    if pads is None:
        return torch.fft.rfftn(x.float(), s=size, dim=(2, 3, 4))
    extension = []
    for a in (2, 1, 0):  # F.pad order: last axis first
        extension += [pads[2 * a], size[a] - x.shape[2 + a] - pads[2 * a]]
    return torch.fft.rfftn(F.pad(x.float(), extension), dim=(2, 3, 4))


def _signal(
    spectrum: torch.Tensor, size: list[int], keep: tuple[int, ...], start: list[int] | None = None
) -> torch.Tensor:
    """The real signal of ``spectrum``, ``keep`` cells per axis from ``start`` (default 0)."""
    full = torch.fft.irfftn(spectrum, s=size, dim=(2, 3, 4))
    a, b, c = start or (0, 0, 0)
    return full[:, :, a : a + keep[0], b : b + keep[1], c : c + keep[2]]


@torch.library.custom_op("evogan::fft_correlate", mutates_args=())
def fft_correlate(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, pads: list[int], keep: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``conv3d(pad(x, pads), weight, bias)`` (valid, stride 1) as real FFTs, in float32, and
    with ``keep`` the padded input's spectrum as real pairs (``torch.view_as_real``) for the
    weight gradient (else an empty tensor).

    ``pads``: (before, after) zero cells for each of the three axes. A circular correlation
    over at least the padded input's length never wraps into the valid outputs, so the product
    of the spectra holds them at positions ``0 .. n - k``; the padding and the bias ride on the
    copies the transforms make anyway. A custom operator, so that torch.compile keeps it whole
    (TorchInductor has no complex tensors, hence the spectrum as real pairs).
    """
    size = _fft_shape(x, pads)
    spectrum = _spectrum(x, size, pads)
    pairs = torch.view_as_real(spectrum) if keep else x.new_empty(0)
    mixed = mix_channels(spectrum, _spectrum(weight, size), conjugate=True, transpose=False)
    del spectrum  # unless kept, freed before the inverse transform allocates the output
    out = _signal(mixed, size, _valid(x, weight, pads))
    out = out.contiguous() if bias is None else out + bias.float().view(1, -1, 1, 1, 1)
    return out, pairs


@fft_correlate.register_fake
def _fft_correlate_shape(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, pads: list[int], keep: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    out = x.new_empty((x.shape[0], weight.shape[0], *_valid(x, weight, pads)), dtype=torch.float32)
    if not keep:
        return out, x.new_empty(0)
    *grid, last = _fft_shape(x, pads)
    return out, x.new_empty((*x.shape[:2], *grid, last // 2 + 1, 2), dtype=torch.float32)


@torch.library.custom_op("evogan::fft_correlate_backward", mutates_args=())
def fft_correlate_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    pairs: torch.Tensor | None,
    pads: list[int],
    for_input: bool,
    for_weight: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of :func:`fft_correlate` for its input (the full convolution of ``grad`` with
    the kernel, where the unpadded input sits) and its weight (the correlation of the padded
    input with ``grad``), each as FFTs; an empty tensor where not asked for. ``pairs``: the
    padded input's spectrum that the forward pass returned (None: transformed again here)."""
    size = _fft_shape(x, pads)
    upstream = _spectrum(grad, size)
    grad_x = grad_w = x.new_empty(0)
    if for_input:
        mixed = mix_channels(upstream, _spectrum(weight, size), conjugate=False, transpose=True)
        start = pads[0::2]
        grad_x = _signal(mixed, size, tuple(x.shape[2:]), start).to(x.dtype).contiguous()
    if for_weight:
        spectrum = _spectrum(x, size, pads) if pairs is None else torch.view_as_complex(pairs)
        mixed = correlate_over_batch(spectrum, upstream)
        grad_w = _signal(mixed, size, tuple(weight.shape[2:])).to(weight.dtype).contiguous()
    return grad_x, grad_w


@fft_correlate_backward.register_fake
def _fft_correlate_backward_shape(
    grad: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    pairs: torch.Tensor | None,
    pads: list[int],
    for_input: bool,
    for_weight: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        x.new_empty(x.shape) if for_input else x.new_empty(0),
        weight.new_empty(weight.shape) if for_weight else x.new_empty(0),
    )


def _keep_inputs(ctx, inputs: tuple, output: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, weight, _, pads, keep = inputs
    ctx.save_for_backward(x, weight, output[1] if keep else None)
    ctx.pads = pads


def _fft_correlate_grads(
    ctx, grad: torch.Tensor, _pairs_grad: torch.Tensor
) -> tuple[torch.Tensor | None, ...]:
    x, weight, pairs = ctx.saved_tensors
    for_input, for_weight, for_bias, _, _ = ctx.needs_input_grad
    grad_x, grad_w = fft_correlate_backward(grad, x, weight, pairs, ctx.pads, for_input, for_weight)
    grad_bias = grad.sum(dim=(0, 2, 3, 4)) if for_bias else None
    return (grad_x if for_input else None, grad_w if for_weight else None, grad_bias, None, None)


fft_correlate.register_autograd(_fft_correlate_grads, setup_context=_keep_inputs)


def fft_conv3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    pads: tuple[tuple[int, int], ...] = ((0, 0),) * 3,
) -> torch.Tensor:
    """``conv3d(pad(x, pads), weight, bias)`` (valid, stride 1; ``pads`` (before, after) zero
    cells per axis) through :func:`fft_correlate`, float32 whatever the autocast (cuFFT has no
    bfloat16), on contiguous tensors whatever the layout (the transforms want them, and the
    compiled graph then knows every stride)."""
    flat = [cells for axis in pads for cells in axis]
    keep = keep_spectra and torch.is_grad_enabled() and weight.requires_grad
    return fft_correlate(x.contiguous(), weight.contiguous(), bias, flat, keep)[0]


class ConvBlock(nn.Sequential):
    """A spec block's layers in Keras order (their names are the model files' names); the
    leading ``[Upsample] -> [ConstantPad3d] -> Conv3d`` runs in the phase form where that pays
    (not after a ``CircularPad3d``), else in the FFT form when :attr:`convolution` is ``"fft"``
    and the kernel has at least :attr:`fft_min_taps` taps."""

    def __init__(self, *layers: nn.Module) -> None:
        super().__init__(*layers)
        self.convolution = "direct"
        self.fft_min_taps = FFT_MIN_TAPS
        self.head = next(i for i, m in enumerate(layers) if isinstance(m, nn.Conv3d)) + 1
        conv: nn.Conv3d = layers[self.head - 1]
        up = next((m for m in layers[: self.head] if isinstance(m, nn.Upsample)), None)
        pad = next((m for m in layers[: self.head] if isinstance(m, nn.ConstantPad3d)), None)
        self.factors = (1, 1, 1) if up is None else tuple(int(f) for f in up.scale_factor)
        if pad is not None and pad.value != 0:
            raise ValueError(f"a spec block pads with zeros, not {pad.value}")
        spec_pads = (0,) * 6 if pad is None else pad.padding  # F.pad order: z, y, x
        self.pads = tuple(tuple(spec_pads[4 - 2 * a : 6 - 2 * a]) for a in range(3))
        wraps = any(isinstance(m, nn.CircularPad3d) for m in layers[: self.head])
        upsampled = self.factors != (1, 1, 1) and not wraps  # the phase form pads with zeros
        self.phase = upsampled and phase_pays(self.factors, conv.kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.convolve(x)
        for layer in self.tail:
            x = layer(x)
        return x

    @property
    def tail(self) -> list[nn.Module]:
        """The layers after the convolution (noise, activation, batch norm, dropout)."""
        return list(self)[self.head :]

    def convolve(self, x: torch.Tensor) -> torch.Tensor:
        """``[upsample] -> [pad] -> Conv3d`` of ``x`` in the block's fastest exact form."""
        conv: nn.Conv3d = self[self.head - 1]
        if self.phase:
            x = upsampled_conv3d(x, conv.weight, conv.bias, self.factors, self.pads)
        elif self.convolution == "fft" and math.prod(conv.kernel_size) >= self.fft_min_taps:
            for layer in list(self)[: self.head - 1]:
                x = x if isinstance(layer, nn.ConstantPad3d) else layer(x)  # the FFT's padding
            x = fft_conv3d(x, conv.weight, conv.bias, self.pads)
        else:
            for layer in list(self)[: self.head]:
                x = layer(x)
        return x


def set_convolution(module: nn.Module, convolution: str) -> None:
    """Run every spec block of ``module`` with ``convolution`` (``direct`` or ``fft``)."""
    for block in module.modules():
        if isinstance(block, ConvBlock):
            block.convolution = convolution
