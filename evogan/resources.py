"""The memory and disk space a command may use, read in one place, and the one-line refusal of a
count or size whose estimated need is more: ``ga.children`` of 10^12 or ``generate --events``
of 10^12 end before any work or run directory, naming the size, the limit and the fix, instead
of in an allocator's traceback minutes later.

Estimates are the callers' (they know what a genome or a shower holds) and are lower bounds:
they count only arrays that grow with the count and are in memory at the same time, so a
refusal is certain to be right, while a request below the limit may still run short.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from evogan.errors import EvoganError

MEMINFO = Path("/proc/meminfo")
CGROUPS = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# cgroup version -> (folder below CGROUP_ROOT, file holding the limit in bytes)
_LIMIT_FILES = {2: ("", "memory.max"), 1: ("memory", "memory.limit_in_bytes")}


def size_text(size: float) -> str:
    """Bytes in the largest unit that keeps the number at 1 or more (``16.4 PB``)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(size) < 1000:
            return f"{size:.3g} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1000
    return f"{size:.3g} PB" if abs(size) < 1000 else f"{size:,.0f} PB"


def available_memory(
    meminfo: Path = MEMINFO, cgroups: Path = CGROUPS, root: Path = CGROUP_ROOT
) -> int | None:
    """Bytes a new allocation can get: ``MemAvailable`` of ``/proc/meminfo`` (free memory and
    the caches the kernel can drop), no more than the memory limit of this process's cgroup (a
    container's or a Slurm job's); the free physical pages where there is no ``/proc``. None
    when nothing tells."""
    found = _meminfo_available(meminfo)
    if found is None:
        found = _free_pages()
    limit = cgroup_limit(cgroups, root)
    if limit is not None and (found is None or limit < found):
        found = limit
    return found


def _meminfo_available(meminfo: Path) -> int | None:
    try:
        lines = meminfo.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(":")
        if name == "MemAvailable" and value.split()[0].isdigit():
            return int(value.split()[0]) * 1024  # kB
    return None


def _free_pages() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def cgroup_limit(cgroups: Path = CGROUPS, root: Path = CGROUP_ROOT) -> int | None:
    """The lowest memory limit of this process's cgroup and its ancestors (v1 or v2), None
    when there is none; a cgroup path not mounted below ``root`` (a container's own view)
    falls back to its mounted ancestors."""
    try:
        lines = cgroups.read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        version = 2 if controllers == "" else 1 if "memory" in controllers.split(",") else 0
        if not version or not path.startswith("/"):
            continue
        folder, name = _LIMIT_FILES[version]
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts) + 1):
            limits.append(_limit(root / folder / Path(*parts[:depth]) / name))
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def _limit(path: Path) -> int | None:
    """A cgroup limit file's bytes; None for ``max``, v1's "no limit" (about 2^63) or none."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit() or int(text) >= 2**62:
        return None
    return int(text)


def require_memory(need: float, what: str, fix: str) -> None:
    """Refuse (one line) when ``need`` bytes (a lower bound) are more than the memory available
    here: ``what`` says which setting needs them and for what, ``fix`` how to ask for less."""
    available = available_memory()
    if available is not None and need > available:
        raise EvoganError(
            f"{what} needs at least {size_text(need)} of memory, more than the "
            f"{size_text(available)} available here; {fix}"
        )


def require_disk(need: float, path: Path, what: str, fix: str) -> None:
    """Refuse (one line) when ``need`` bytes are more than the free space of the file system
    that ``path`` (a file to write) goes to."""
    folder = Path(path).parent
    try:
        free = shutil.disk_usage(folder if str(folder) else ".").free
    except OSError:
        return  # the writer says why it cannot write there
    if need > free:
        raise EvoganError(
            f"{what} needs at least {size_text(need)} of disk, more than the {size_text(free)} "
            f"free for {path}; {fix}"
        )
