"""The memory and disk a command may use: read from /proc and the cgroup limits (v1 and v2
layouts written here as files), and the one-line refusals of sizes beyond them."""

from __future__ import annotations

from pathlib import Path

import pytest

from evogan import resources
from evogan.errors import EvoganError


def test_available_memory_is_what_meminfo_says_within_the_machine() -> None:
    available = resources.available_memory()
    assert available is not None and available > 0
    total = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    assert available <= total


def _cgroups(tmp_path: Path, lines: str, limits: dict[str, str]) -> tuple[Path, Path]:
    tmp_path.mkdir(exist_ok=True)
    proc = tmp_path / "cgroup"
    proc.write_text(lines)
    root = tmp_path / "fs"
    for relative, text in limits.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return proc, root


def test_the_lowest_cgroup_limit_up_the_tree_counts(tmp_path: Path) -> None:
    """A Slurm job's step inside its job (v2), or a container's group (v1): the lowest limit
    of the group and its ancestors; "max" and v1's 2^63 mean none."""
    proc, root = _cgroups(
        tmp_path,
        "0::/job_7/step_0\n",
        {
            "memory.max": "max",
            "job_7/memory.max": "8589934592\n",
            "job_7/step_0/memory.max": "max\n",
        },
    )
    assert resources.cgroup_limit(proc, root) == 8 * 2**30
    proc, root = _cgroups(
        tmp_path / "v1",
        "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
        {
            "memory/memory.limit_in_bytes": "9223372036854771712",
            "memory/docker/abc/memory.limit_in_bytes": "2147483648",
        },
    )
    assert resources.cgroup_limit(proc, root) == 2 * 2**30
    proc, root = _cgroups(tmp_path / "none", "0::/\n", {"memory.max": "max"})
    assert resources.cgroup_limit(proc, root) is None
    assert resources.cgroup_limit(tmp_path / "absent", root) is None


def test_available_memory_is_capped_by_the_cgroup_limit(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n")
    proc, root = _cgroups(tmp_path, "0::/job\n", {"job/memory.max": "1000000"})
    assert resources.available_memory(meminfo, proc, root) == 1_000_000
    proc, root = _cgroups(tmp_path / "loose", "0::/job\n", {"job/memory.max": "max"})
    assert resources.available_memory(meminfo, proc, root) == 8_000_000 * 1024


@pytest.mark.parametrize(
    ("size", "text"),
    [(999, "999 B"), (1500, "1.5 kB"), (24_100_000_000, "24.1 GB"), (8.196e15, "8.2 PB")],
)
def test_sizes_read_in_the_unit_that_fits(size: float, text: str) -> None:
    assert resources.size_text(size) == text


def test_a_need_beyond_the_machine_is_one_line_naming_size_limit_and_fix(tmp_path: Path) -> None:
    resources.require_memory(1024, "a kilobyte", "never")
    with pytest.raises(EvoganError) as info:
        resources.require_memory(1e18, "ga.children = 10", "lower ga.children")
    message = str(info.value)
    assert message.startswith("ga.children = 10 needs at least 1,000 PB of memory, more than the ")
    assert message.endswith(" available here; lower ga.children") and "\n" not in message
    resources.require_disk(1, tmp_path / "x.h5", "one byte", "never")
    with pytest.raises(EvoganError) as info:
        resources.require_disk(1e18, tmp_path / "x.h5", "writing it", "write less")
    assert str(info.value).startswith("writing it needs at least 1,000 PB of disk, more than the ")
    assert str(info.value).endswith(f" free for {tmp_path / 'x.h5'}; write less")
