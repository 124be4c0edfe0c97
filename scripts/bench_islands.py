"""Benchmarks of the island model (targets in the islands issue), printed as a table.

1. overhead: share of generation time spent in migration + stop agreement + checkpoints
   (``island_seconds`` / ``train_seconds`` of the slowest island; target <= 1%) at 4 ranks and
   at 2 ranks, over ``--generations`` generations with the shipped cadence (migrant exchange
   every 10 generations, a checkpoint every 200). On a 2-core machine the 4 ranks share 2
   cores, so every MPI call there can cost a scheduler time slice; the 2-rank run has a core
   per rank.
2. migrant size: bytes sent per seed-compressed migrant (a lineage delta against what the
   receiver already holds) against its raw float32 weights, 2 ranks (target <= 1%); the whole
   lineage of the final elites is shown beside it.
3. scaling: generations/s per island at 2 ranks (the slowest island, migration included)
   against 1 rank, runs of the same length alternated ``--rounds`` times because the VM's
   speed drifts by 10-20% over minutes; the median ratio (target >= 90%). Each round also
   runs two independent 1-rank runs at once, without MPI: their ratio to a run alone is what
   the machine itself allows two busy cores (shared cache and memory), the bound for the
   2-rank ratio.

    python scripts/bench_islands.py [--generations 1000] [--rounds 3] [--out /tmp/bench_islands]

Runs the real CLI (``mpirun -n N evogan evolve``) on the cached synthetic set; all run
directories go under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

from evogan.distributed.launcher import mpirun_prefix

BASE = {
    "task": "regressor",
    "seed": 1,
    "data": {"synthetic": {"events": 1250}, "train_events": 1000, "test_events": 250},
    "ga": {"batch_size": 128, "epochs": 10, "schedule_milestones": [4, 8]},
    "run": {"progress_every": 100000},
    "migration": {"every": 10, "mode": "async"},
    "checkpoint": {"every": 200},
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def start(out: Path, name: str, ranks: int, overrides: dict) -> tuple[subprocess.Popen, Path]:
    """Launch one CLI run in the background; returns the process and its run directory."""
    config = json.loads(json.dumps(BASE))
    for key, value in overrides.items():
        node = config
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = out / name
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [sys.executable, "-m", "evogan", "evolve", str(path), "--run-dir", str(run_dir)]
    if ranks > 1:
        command = [*mpirun_prefix(ranks), *command]
    print(f"bench: {name}: {' '.join(command[-6:])} ({ranks} rank(s))", flush=True)
    return subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL), run_dir


def finish(process: subprocess.Popen, run_dir: Path) -> dict:
    if process.wait() != 0:
        raise SystemExit(f"bench: the run in {run_dir} failed (exit {process.returncode})")
    return json.loads((run_dir / "summary.json").read_text())


def run(out: Path, name: str, ranks: int, overrides: dict) -> dict:
    """One CLI run; returns its summary."""
    return finish(*start(out, name, ranks, overrides))


def rate(summary: dict) -> float:
    """Generations/s of the slowest island of a run."""
    return min(r["generations"] / r["train_seconds"] for r in summary["per_island"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_islands"))
    parser.add_argument(
        "--rounds", type=int, default=3, help="1-rank/2-rank scaling pairs (0: skip scaling)"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    epochs = max(1, args.generations // (1000 // 128))
    long = {"ga.epochs": epochs, "ga.schedule_milestones": [epochs // 3, 2 * epochs // 3]}
    four = run(args.out, "overhead_4ranks", 4, long)
    two = run(args.out, "overhead_2ranks", 2, long)
    for ranks, summary in ((4, four), (2, two)):
        rows.append(
            (
                f"migration + checkpoint share of generation time, {ranks} ranks, "
                f"{summary['generations']} generations",
                f"{100 * summary['island_seconds_share']:.2f}% of wall time, "
                f"{100 * summary['island_cpu_seconds_share']:.2f}% of CPU time",
                "<= 1%",
            )
        )
    sizes = two["bytes_per_migrant"]
    rows.append(
        (
            f"bytes per migrant sent, 2 ranks, {two['generations']} generations",
            f"{sizes['sent']:.0f} B vs {sizes['weights']} B weights "
            f"({100 * sizes['sent'] / sizes['weights']:.2f}%)",
            "<= 1%",
        )
    )
    rows.append(
        (
            "  whole lineage of the final elites, for comparison",
            f"{sizes['lineage']:.0f} B ({100 * sizes['lineage'] / sizes['weights']:.1f}%)",
            "-",
        )
    )

    if args.rounds:  # 0: the overhead and size rows only
        ratios, rates, bounds = [], [], []
        for round_ in range(args.rounds):  # alternate: the VM's speed drifts over minutes
            one = run(args.out, f"scaling_1rank_{round_}", 1, long)
            pair = run(args.out, f"scaling_2ranks_{round_}", 2, long)
            alone = [start(args.out, f"scaling_alongside_{round_}_{i}", 1, long) for i in (0, 1)]
            apart = min(rate(finish(*launched)) for launched in alone)
            ratios.append(rate(pair) / rate(one))
            bounds.append(apart / rate(one))
            rates.append(f"{rate(pair):.1f}/{rate(one):.1f}")
        rows.append(
            (
                f"generations/s per island, 2 ranks (slowest island) vs 1 rank, "
                f"{one['generations']} generations, median of {args.rounds} alternating rounds",
                f"{100 * statistics.median(ratios):.0f}% ({', '.join(rates)})",
                ">= 90%",
            )
        )
        rows.append(
            (
                "  the machine's own bound: two independent 1-rank runs at once (no MPI), slower "
                "one vs 1 rank alone",
                f"{100 * statistics.median(bounds):.0f}% "
                f"({', '.join(f'{100 * b:.0f}%' for b in bounds)})",
                "-",
            )
        )

    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure':<{width}} | result | target")
    for name, value, target in rows:
        print(f"{name:<{width}} | {value} | {target}")


if __name__ == "__main__":
    main()
