"""Streaming ``evogan generate``: showers/s on 1 and 2 ranks, and peak memory at 10^4 and 10^6
showers (docs/tutorials/gan.md, "Many showers").

Rate: ``mpirun -n R --bind-to core`` of ``evogan generate --events RATE_EVENTS`` with one torch
thread per rank, for every R of ``--ranks``, ``--rounds`` times with the rounds interleaved (the
VM's speed drifts over minutes). The rate is the command's own: events over the slowest rank's
seconds from its first batch until every file is in place (so start-up and the generator's
loading are left out, writing is in); the launch's whole wall time is recorded beside it.
Target: rate(R) >= 0.8 R rate(1) with R ranks on R cores.

Memory: the peak resident memory (``ru_maxrss``) of every rank of ``evogan generate`` at each
count of ``--memory-events`` on ``--memory-ranks`` ranks. Streaming keeps no array that grows
with the count; on the EPYC VM one rank's peak was flat from 1.5 x 10^5 to 4 x 10^5 showers,
and 2 ranks' was 0.15-0.3 GB higher at 10^6 showers than at 10^4, a swing of the C heap that
differed by 0.15 GB between two runs (docs/history/benchmarks.md, "Streaming generation").

The generator is a freshly initialised one of ``--config``'s spec (its weights do not change
the cost), saved once in ``--out``; every output file is removed after its run, and the disk
must hold the largest (the command refuses a request it cannot hold; 10^6 showers of the tiny
spec take about 14 GB). One core runs the tiny spec at about 680 showers/s, so the defaults
take about 20 minutes on 2 idle cores, most of it the 10^6 showers.

    python scripts/bench_generate.py --out /tmp/bench_generate     # the figures above
    python scripts/bench_generate.py --out /tmp/bench_generate --rounds 0   # memory only
    python scripts/bench_generate.py --out /tmp/bench_generate --quick   # a minute: checks it runs

Writes ``DIR/generate.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RATE = re.compile(r"in ([0-9.]+) s: ([0-9,.]+) showers/s on (\d+) rank")


def child(argv: list[str], record: Path) -> int:
    """Under mpirun: ``evogan generate argv`` in this process, then this rank's peak memory
    into ``record.RANK.json``."""
    from evogan.cli import main

    code = main(["generate", *argv])
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    Path(f"{record}.{rank}.json").write_text(json.dumps({"rank": rank, "peak_mb": peak_kb / 1024}))
    return code


def save_generator(config: Path, path: Path) -> str:
    """A freshly initialised generator of ``config``'s spec at ``path``; its spec's name."""
    import torch

    from evogan.gan3d.model.model_file import save_generator as save
    from evogan.gan3d.model.networks import Generator
    from evogan.gan3d.model.spec import load_spec

    spec = load_spec(config)
    save(path, spec, Generator(spec, torch.Generator().manual_seed(0)), {"seed": 0})
    return spec.name


def launch(ranks: int, argv: list[str], folder: Path, tag: str) -> dict:
    """``mpirun -n ranks`` of :func:`child`; the command's reported rate, the wall time and
    every rank's peak memory."""
    from evogan.distributed.launcher import find_mpirun

    record = folder / f"rss-{tag}"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), EVOGAN_PROGRESS="off")
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    command = [find_mpirun() or "mpirun", "-n", str(ranks), "--bind-to", "core"]
    command += [sys.executable, __file__, "--child", str(record), "--", *argv]
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    found = RATE.search(done.stdout)
    if found is None:
        raise SystemExit(f"no rate in the output of {' '.join(command)}:\n{done.stdout}")
    peaks = []
    for rank in range(ranks):
        path = Path(f"{record}.{rank}.json")
        peaks.append(json.loads(path.read_text())["peak_mb"])
        path.unlink()
    return {
        "seconds": float(found.group(1)),
        "showers_per_s": float(found.group(2).replace(",", "")),
        "wall_seconds": wall,
        "peak_mb": peaks,
    }


def generate_args(model: Path, out: Path, events: int, batch: int) -> list[str]:
    return [str(model), "--events", str(events), "--batch-size", str(batch), "--out", str(out)]


def clear(out: Path) -> None:
    """Remove the files of one run (the joined file and the ranks' parts)."""
    for path in out.parent.glob(f"{out.stem}*{out.suffix}"):
        path.unlink()


def measure(args: argparse.Namespace) -> dict:
    folder = args.out
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "generator.h5"
    spec = save_generator(args.config, model)
    out = folder / "showers.h5"
    rates: dict[str, list[dict]] = {str(r): [] for r in args.ranks}
    for round_ in range(args.rounds):
        for ranks in args.ranks:
            run = launch(
                ranks,
                generate_args(model, out, args.rate_events, args.batch_size),
                folder,
                f"rate-{ranks}-{round_}",
            )
            clear(out)
            rates[str(ranks)].append(run)
            print(
                f"rate, {ranks} rank(s), round {round_ + 1}: {run['showers_per_s']:.1f} showers/s"
            )
    memory = {}
    for events in args.memory_events:
        run = launch(
            args.memory_ranks,
            generate_args(model, out, events, args.batch_size),
            folder,
            f"memory-{events}",
        )
        clear(out)
        memory[str(events)] = run
        print(f"memory, {events:,} showers on {args.memory_ranks} rank(s): {run['peak_mb']} MB")
    return {
        "config": str(args.config),
        "spec": spec,
        "batch_size": args.batch_size,
        "rate_events": args.rate_events,
        "rate": rates,
        "memory_ranks": args.memory_ranks,
        "memory": memory,
        "cpus": os.cpu_count(),
    }


def report(result: dict) -> None:
    """The table: median rate per rank count and its scaling, peak memory per count."""
    rates = {r: runs for r, runs in result["rate"].items() if runs}  # --rounds 0: memory only
    medians = {r: statistics.median(x["showers_per_s"] for x in runs) for r, runs in rates.items()}
    one = medians.get("1")
    print(f"\n{result['spec']}, batch {result['batch_size']}, {result['rate_events']:,} showers")
    print("ranks  showers/s (median; range)      vs R x one rank")
    for ranks, runs in rates.items():
        values = [x["showers_per_s"] for x in runs]
        share = f"{medians[ranks] / (int(ranks) * one):.2f}" if one else "-"
        print(
            f"{ranks:>5}  {medians[ranks]:9.1f} ({min(values):.1f}-{max(values):.1f})  {share:>10}"
        )
    print(f"\npeak memory per rank on {result['memory_ranks']} rank(s)")
    for events, run in result["memory"].items():
        print(f"{int(events):>12,} showers  {max(run['peak_mb']):8.1f} MB")


def main() -> None:
    if "--child" in sys.argv:
        at = sys.argv.index("--child")
        raise SystemExit(child(sys.argv[sys.argv.index("--") + 1 :], Path(sys.argv[at + 1])))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the files and JSON")
    parser.add_argument("--config", type=Path, default=REPO / "configs/gan3d_tiny.yaml")
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate-events", type=int, default=20000)
    parser.add_argument("--memory-events", type=int, nargs="+", default=[10**4, 10**6])
    parser.add_argument("--memory-ranks", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that it runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.rate_events, args.memory_events = 1, 512, [256, 1024]
    result = measure(args)
    (args.out / "generate.json").write_text(json.dumps(result, indent=1))
    report(result)


if __name__ == "__main__":
    main()
