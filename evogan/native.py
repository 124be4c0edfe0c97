"""Small C kernels compiled on first use with the system C compiler, then cached.

A kernel's source ships inside the package; it is compiled (``$CC`` or ``cc``) for the CPU it
runs on into the kernel directory (:func:`evogan.settings.kernel_dir`), under a name keyed by
source, flags, compiler and CPU, so nodes of another CPU type sharing a home directory build
their own copy. Callers fall back to their pure torch/numpy code when no kernel can be had: a
missing compiler is a hint (:func:`evogan.logs.hint`), a failed build a warning, each saying
how to fix it.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

from evogan.logs import hint
from evogan.settings import kernel_dir, native_kernels

FLAGS = ("-O3", "-march=native", "-ffp-contract=fast", "-shared", "-fPIC", "-pthread")


def compiler() -> list[str] | None:
    """The C compiler command (``$CC`` or ``cc``), or None when there is none."""
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


def _library_path(compiler: list[str], source: Path) -> Path:
    version = subprocess.run(
        [*compiler, "--version"], capture_output=True, text=True, check=False
    ).stdout
    digest = hashlib.sha256()
    digest.update(source.read_bytes())
    for part in (" ".join(FLAGS), " ".join(compiler), version, _cpu_identity()):
        digest.update(b"\0" + part.encode())
    return kernel_dir() / f"{source.stem.lstrip('_')}-{digest.hexdigest()[:16]}.so"


def _build(compiler: list[str], source: Path, target: Path) -> None:
    """Compile to a temporary name beside ``target``, then rename: concurrent ranks are safe."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.stem, suffix=".tmp")
    os.close(handle)
    try:
        result = subprocess.run(
            [*compiler, *FLAGS, str(source), "-o", temporary],
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


def load(source: Path, name: str, fallback: str, signatures: dict[str, list]) -> ctypes.CDLL | None:
    """The compiled library of ``source``, or None after one hint or warning naming the cause
    and the fix (``name`` and ``fallback`` say what was not built and what runs instead). Each
    entry point in ``signatures`` gets its argument types and an int status as its return
    type. Callers cache the result."""
    if not native_kernels():
        return None
    command = compiler()
    if command is None:
        hint(
            f"no C compiler found (CC={os.environ.get('CC', 'cc')!r}), so {fallback}; install "
            "gcc or clang, or set EVOGAN_NATIVE=0 to silence this"
        )
        return None
    try:
        path = _library_path(command, source)
        if not path.exists():
            _build(command, source, path)
        library = ctypes.CDLL(str(path))
    except OSError as error:
        warnings.warn(
            f"cannot build {name} ({error}), so {fallback}; check the C compiler and that "
            "EVOGAN_KERNEL_DIR (default: kernels/ in EVOGAN_CACHE_DIR) is writable, or set "
            "EVOGAN_NATIVE=0 to silence this",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    for entry, argtypes in signatures.items():
        function = getattr(library, entry)
        function.restype = ctypes.c_int
        function.argtypes = argtypes
    return library
