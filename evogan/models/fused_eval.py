"""The fused C kernel of the regressor's batched evaluation: compiled on first use, then cached.

The im2col + matmul path of :func:`evogan.models.regressor.batched_predict` writes the whole
convolution output to memory and reads it back three times (ReLU, tail, sum); on a CPU that
costs half the FLOP rate. ``_fused_eval.c`` keeps each block of convolution outputs in vector
registers from the first tap to the folded pooling + linear weight, and skips the positions
that floor-mode pooling drops. It is compiled with the system C compiler (``$CC`` or ``cc``)
for the CPU it runs on, into the cache directory under a name keyed by source, flags, compiler
and CPU, so nodes of another CPU type sharing a home directory build their own copy.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from evogan.settings import cache_dir, native_kernels

SOURCE = Path(__file__).with_name("_fused_eval.c")
FLAGS = ("-O3", "-march=native", "-ffp-contract=fast", "-shared", "-fPIC", "-pthread")
LANES = 8  # rows per vector register (must match LANES in the C source)
POSITION_BLOCK = 12  # position counts are padded to a multiple of this (ditto)
MAX_THREADS = 256  # ditto


def _compiler() -> list[str] | None:
    command = shlex.split(os.environ.get("CC", "cc"))
    if not command or shutil.which(command[0]) is None:
        return None
    return [shutil.which(command[0]), *command[1:]]


def _cpu_identity() -> str:
    """Model name and feature flags: what ``-march=native`` compiles for."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    keys = ("model name", "flags", "Features", "CPU part")
    wanted = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() in keys:
            wanted.setdefault(key.strip(), value.strip())
    return f"{platform.machine()} {sorted(wanted.items())}"


def _library_path(compiler: list[str]) -> Path:
    version = subprocess.run(
        [*compiler, "--version"], capture_output=True, text=True, check=False
    ).stdout
    digest = hashlib.sha256()
    digest.update(SOURCE.read_bytes())
    for part in (" ".join(FLAGS), " ".join(compiler), version, _cpu_identity()):
        digest.update(b"\0" + part.encode())
    return cache_dir() / "kernels" / f"fused_eval-{digest.hexdigest()[:16]}.so"


def _build(compiler: list[str], target: Path) -> None:
    """Compile to a temporary name beside ``target``, then rename: concurrent ranks are safe."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.stem, suffix=".tmp")
    os.close(handle)
    try:
        result = subprocess.run(
            [*compiler, *FLAGS, str(SOURCE), "-o", temporary],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["no message"])[0]
            raise OSError(f"{' '.join(compiler)} failed: {first}")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


@functools.cache
def kernel() -> ctypes.CDLL | None:
    """The loaded kernel library, or None (then callers use the torch path).

    Built at most once per process; a failure is one warning naming the cause and the fix.
    """
    if not native_kernels():
        return None
    compiler = _compiler()
    if compiler is None:
        warnings.warn(
            f"no C compiler found (CC={os.environ.get('CC', 'cc')!r}), so the regressor's "
            "batched evaluation uses the slower torch path; install gcc or clang, or set "
            "EVOGAN_NATIVE=0 to silence this",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    try:
        path = _library_path(compiler)
        if not path.exists():
            _build(compiler, path)
        library = ctypes.CDLL(str(path))
    except OSError as error:
        warnings.warn(
            f"cannot build the fused evaluation kernel ({error}), so the regressor's batched "
            "evaluation uses the slower torch path; check the C compiler and that "
            "EVOGAN_CACHE_DIR is writable, or set EVOGAN_NATIVE=0 to silence this",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    function = library.evogan_fused_eval
    function.restype = ctypes.c_int
    pointer, count = ctypes.c_void_p, ctypes.c_long
    function.argtypes = [
        *(pointer, count, count),  # x, events, event stride
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
    x: Tensor, weight: Tensor, bias: Tensor, tail: Tensor, positions: Tensor, taps: Tensor
) -> Tensor:
    """Per-row sums (events, rows) of relu(conv + bias) x tail over the listed positions.

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
    out = x.new_empty(events, rows)
    threads = max(1, min(torch.get_num_threads(), MAX_THREADS))
    status = library.evogan_fused_eval(
        x.data_ptr(), events, stride,
        weight.data_ptr(), bias.data_ptr(), tail.data_ptr(),
        positions.data_ptr(), positions.shape[0], taps.data_ptr(), taps.shape[0],
        rows, out.data_ptr(), threads,
    )  # fmt: skip
    if status != 0:
        raise RuntimeError(f"evogan_fused_eval rejected its arguments (status {status})")
    return out
