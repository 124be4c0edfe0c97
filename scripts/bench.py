"""Run every evogan benchmark in sequence and keep their logs.

Each benchmark prints its own figures and the ratios to its targets, measured in one run (see
docs/performance.md). They run one after another so that they do not compete for the cores.

    python scripts/bench.py                 # everything (tens of minutes on 2 cores)
    python scripts/bench.py --quick         # shorter versions
    python scripts/bench.py --only synth read
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from evogan.distributed.launcher import mpirun_prefix

SCRIPTS = Path(__file__).resolve().parent


def benchmarks(quick: bool, out: Path) -> dict[str, list[str]]:
    """Benchmark name -> command line (quick variants are shorter, not different)."""
    py = sys.executable
    return {
        "synth": [
            py,
            str(SCRIPTS / "bench_synth.py"),
            "--events",
            "500" if quick else "2000",
            "--physics",
            "100" if quick else "500",
        ],
        "read": [
            py,
            str(SCRIPTS / "bench_read.py"),
            "--events",
            "1000" if quick else "3000",
            "--repeats",
            "3",
            "--contiguous",
        ],
        "validation": [  # evogan validate's steps: read, feature tables, score
            py,
            str(SCRIPTS / "bench_validation.py"),
            "--events",
            "1000" if quick else "5000",
            "--rounds",
            "1" if quick else "3",
        ],
        "regressor": [
            py,
            str(SCRIPTS / "bench_regressor.py"),
            "--threads",
            "1",
            "--out",
            str(out / "regressor"),
            *(["--quick"] if quick else []),
        ],
        "fused_eval": [  # the calls a GA run makes; --against CHECKOUT compares builds
            py,
            str(SCRIPTS / "bench_fused_eval.py"),
            "--rounds",
            "1" if quick else "3",
        ],
        "islands": [
            py,
            str(SCRIPTS / "bench_islands.py"),
            "--out",
            str(out / "islands"),
            *(["--generations", "300"] if quick else []),
        ],
        "gan": [
            py,
            str(SCRIPTS / "bench_gan.py"),
            "--batch",
            "4",
            "--steps",
            "2",
            "--threads",
            "1",
        ],
        "inference": [  # generation's core-ms per shower against the matmul rate
            py,
            str(SCRIPTS / "bench_inference.py"),
            "--out",
            str(out / "inference.json"),
            *(["--quick"] if quick else []),
        ],
        "gan_parallel": [
            *mpirun_prefix(2),
            py,
            str(SCRIPTS / "bench_gan_parallel.py"),
            "--steps",
            "10" if quick else "20",
        ],
        "search": [
            py,
            str(SCRIPTS / "bench_search.py"),
            "--out",
            str(out / "search"),
            *(["--candidates", "8"] if quick else []),
        ],
        "peers": [  # issue 17's harness: 6 implementations x --seconds each
            py,
            str(SCRIPTS / "bench_peers.py"),
            "--seconds",
            "30" if quick else "90",
            "--out",
            str(out / "peers.json"),
        ],
        "scaling": [  # docs/explanation/scaling.md
            py,
            str(SCRIPTS / "bench_scaling.py"),
            "--out",
            str(out / "scaling"),
            *(["--quick"] if quick else []),
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks")
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="logs go here")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    commands = benchmarks(args.quick, args.out)
    unknown = sorted(set(args.only or ()) - set(commands))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(commands)}")
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
    )
    env.setdefault("EVOGAN_CACHE_DIR", str(args.out / "cache"))
    failed = []
    for name, command in commands.items():
        if args.only and name not in args.only:
            continue
        print(f"\n=== {name}: {' '.join(command)}", flush=True)
        start = time.perf_counter()
        with open(args.out / f"{name}.log", "w") as log:
            process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
            )
            for line in process.stdout:
                sys.stdout.write(line)
                log.write(line)
            returncode = process.wait()
        print(f"=== {name}: exit {returncode} after {time.perf_counter() - start:.0f} s")
        if returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
