"""Where evogan's Triton kernels can run.

Triton is optional: CUDA builds of torch bring it, CPU builds do not. With ``TRITON_INTERPRET=1``
Triton also runs kernels on CPU tensors (slowly, through numpy), which is how the tests check
them on machines without a GPU.
"""

from __future__ import annotations

import functools
import importlib.util
import os

from torch import Tensor


def interpreted() -> bool:
    """Whether Triton runs kernels in its interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def runs_on(*tensors: Tensor) -> bool:
    """Whether a Triton kernel can take these tensors: Triton installed, and all of them on a
    CUDA device (or all on the CPU under the interpreter)."""
    on_device = all(t.is_cuda for t in tensors) or (
        interpreted() and all(t.device.type == "cpu" for t in tensors)
    )
    return on_device and installed()
