"""How the 3DGAN forward passes run: bf16 autocast, channels-last 3D layout, torch.compile,
FFT convolutions.

``trainer.precision: bf16`` runs the G and D forward passes under ``torch.autocast`` with
bfloat16 (on the model's device type, cpu or cuda): convolutions and dense layers compute in
bf16, while parameters, gradients and optimiser states stay float32. What is not safe in bf16
(8 bits of mantissa) stays float32: generated showers are cast back to float32 before the
discriminator reads them (:meth:`ForwardOptions.image`), so its fixed ECAL-sum and angle heads
(sums over 65,025 cells) and the width term are float32, and every loss term is computed from
float32 outputs (:func:`evogan.gan3d.model.losses.gan_loss`). bf16 has float32's exponent range, so
no loss scaling is needed.

``trainer.channels_last`` stores conv weights and images as ``torch.channels_last_3d``
(NDHWC), the layout cuDNN's and oneDNN's fast 3D kernels want. ``trainer.compile`` compiles
both networks' forward in place (``nn.Module.compile``: parameter names, checkpoints and
hooks stay as they are); where torch.compile does not work (no compiler, an unsupported Python)
:func:`compile_problem` says why and the training runs eagerly. ``trainer.convolution: fft``
runs the large-kernel convolutions as float32 FFT products
(:mod:`evogan.gan3d.kernels.convolution`), which pays on GPUs and not on CPUs (docs/performance.md).

The defaults (float32, contiguous, eager, direct convolutions) are the reference every option
is checked against (``tests/test_gan_precision.py``).
"""

from __future__ import annotations

import contextlib
import functools
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from evogan.errors import EvoganError
from evogan.gan3d.kernels import set_convolution
from evogan.gan3d.model.blocks import mark_compiled


@dataclass(frozen=True)
class ForwardOptions:
    """The ``trainer.precision``, ``channels_last``, ``compile`` and ``convolution`` choices."""

    precision: str = "float32"
    channels_last: bool = False
    compile: bool = False
    convolution: str = "direct"

    def autocast(self, device: torch.device) -> AbstractContextManager:
        """The context the forward passes run in (none for float32)."""
        if self.precision == "bf16":
            return torch.autocast(device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def image(self, image: torch.Tensor) -> torch.Tensor:
        """A discriminator input: float32, in the chosen memory format."""
        image = image.float()
        if self.channels_last:
            image = image.contiguous(memory_format=torch.channels_last_3d)
        return image

    def prepare(self, module: nn.Module) -> nn.Module:
        """Lay out ``module``'s weights, pick its convolutions and compile its forward, in place."""
        set_convolution(module, self.convolution)
        if self.channels_last:
            module.to(memory_format=torch.channels_last_3d)
        if self.compile:
            mark_compiled(module)  # its dropout and noise draw from seeds, in one graph
            module.compile()
        return module


def compile_problem(device: str | torch.device = "cpu") -> str | None:
    """Why torch.compile cannot be used on ``device`` here (None: it works), found by compiling
    and running a one-line function, which also builds the device's compiler toolchain."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    try:
        probe = torch.compile(lambda x: x * 2.0 + 1.0)
        probe(torch.ones(4, device=device))
    except Exception as exc:  # any failure of the toolchain means: run eagerly
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {first}"
    return None


def check_bf16(device: str | torch.device, asked: str, fix: str) -> None:
    """Refuse bf16 on a GPU that has no bfloat16 support, in one line naming the setting that
    ``asked`` for it and the ``fix``; CPUs run bf16 autocast everywhere (fast with AMX tiles)."""
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        name = torch.cuda.get_device_name(device)
        raise EvoganError(f"{asked} but {name} has no bfloat16 support; use {fix}")


@functools.cache
def cpu_has_amx_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has AMX bf16 tiles, where bf16 autocast trains the 3DGAN 1.7-2.7x
    faster than float32 (docs/performance.md); False where the flags cannot be read."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return "amx_bf16" in flags.split()


def bf16_faster_here(device: str | torch.device, precision: str) -> bool:
    """Whether a float32 training on ``device`` should be told that bf16 is faster: a CPU with
    AMX (torch's convolutions gain from bfloat16 only on its tiles)."""
    return precision == "float32" and torch.device(device).type == "cpu" and cpu_has_amx_bf16()


def cpu_generates_bf16_faster() -> bool:
    """Whether generation in bf16 runs about 2x faster than float32 on this CPU: where the C
    kernel has AVX512-BF16 dot products, or torch's convolutions have AMX tiles."""
    from evogan.gan3d.kernels.small_conv import bf16_runs

    return cpu_has_amx_bf16() or bf16_runs()


def bf16_generation_faster_here(device: str | torch.device, precision: str) -> bool:
    """Whether a float32 generation on ``device`` should be told that bf16 is faster."""
    cpu = torch.device(device).type == "cpu"
    return precision == "float32" and cpu and cpu_generates_bf16_faster()
