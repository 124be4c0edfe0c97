"""Start-up cost of a process that imports the 3DGAN trainer: evogan first (torch then imports
with the collector paused, evogan/startup.py) against torch first (its import as torch alone
makes it), in interleaved rounds of fresh Python processes.

    python scripts/bench_startup.py --rounds 7

Prints wall and CPU seconds per process (median and range) and their ratio.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

CASES = {
    "evogan first (paused)": "import evogan.gan3d.training.trainer",
    "torch first (plain)": "import torch; import evogan.gan3d.training.trainer",
}


def one_run(code: str) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh ``python -c code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    one_run(CASES["torch first (plain)"])  # page cache warm for both
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for name, code in CASES.items():
            found[name].append(one_run(code))
    medians = {}
    for name, runs in found.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        medians[name] = statistics.median(cpus)
        print(
            f"{name:24s} wall {statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f})"
            f"  CPU {medians[name]:.2f} s ({min(cpus):.2f}-{max(cpus):.2f})"
        )
    paused, plain = medians["evogan first (paused)"], medians["torch first (plain)"]
    print(f"CPU per process: paused / plain = {paused / plain:.2f}")


if __name__ == "__main__":
    main()
