"""Speed kernels of the 3DGAN's blocks, behind the one interface the model picks from.

:class:`ConvBlock` is a spec block (``[upsample] -> [pad] -> Conv3d -> ...``) whose convolution
runs in the direct, phase or FFT form (``convolution``; the FFT form's channel mixing as Triton
kernels in ``spectral_mixing``), chosen by :func:`set_convolution`; :func:`keep_mask` draws a
dropout keep-mask on the CPU from a C kernel on all threads (``dropout_mask``, ``_keep_mask.c``,
built on first use by :mod:`evogan.native`); :func:`small_conv3d` runs a generator block's
convolution, activation and eval-mode batch norm on the CPU from a C kernel (``small_conv``,
``_small_conv.c``), for the generator's inference form. Every form computes the same function
as the plain torch code, to float32 rounding (the kernel's bf16 form: to bfloat16 rounding of
its inputs; the mask: the same hash as :func:`evogan.gan3d.model.blocks.counter_uniform`).

The names are imported on first use (PEP 562).
"""

from __future__ import annotations

from evogan.lazy import lazy_names

_LAZY = {
    "ConvBlock": ".convolution",
    "keep_mask": ".dropout_mask",
    "set_convolution": ".convolution",
    "small_conv3d": ".small_conv",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_names(__name__, _LAZY)
