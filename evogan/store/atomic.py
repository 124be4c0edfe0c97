"""Atomic file writes: a reader (or a resumed run) never sees a half-written file.

Everything is written to a temporary file in the destination's directory and moved into place
with :func:`os.replace`, which is atomic on POSIX file systems. The temporary file is removed
whenever the block does not complete, including when SIGTERM/SIGINT unwinds it
(:func:`evogan.distributed.signals.raise_on_stop_signals`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it onto ``path`` only if the block succeeds.

    For writers that want a file name rather than bytes (h5py, matplotlib ``savefig``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        os.close(handle)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; shared data must stay readable
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically and return the path."""
    payload = data.encode() if isinstance(data, str) else data
    with atomic_path(path) as tmp, open(tmp, "wb") as stream:
        stream.write(payload)
        stream.flush()
        os.fsync(stream.fileno())
    return Path(path)
