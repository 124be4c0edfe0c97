#!/usr/bin/env python
"""Time the steps of scoring generated showers against reference showers, as ``evogan
validate`` does them, optionally against another checkout of evogan.

Two synthetic files of ``--events`` showers each (2-500 GeV, different seeds; made once, in a
temporary folder) stand for the generated and the reference set. Steps, each once per round:

- read: both files in full through ``ShowerDataset.read`` (decompression, GeV, threshold,
  NaN check);
- features: the feature table of each set (``shower_features``, with the true angles);
- reference: the reference's standardisation and histogram edges from its table;
- score: the generated table's score against it (separation, classifier, FPD, KPD, sampling
  fraction), without its figures.

Every round runs each checkout in its own subprocess (one thread), alternating which goes
first; the table gives the median and [min, max] over rounds, and the ratio of the medians.

    python scripts/bench_validation.py [--events 5000] [--against CHECKOUT] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checkouts import check_against, comparison, interleaved, write_json

STEPS = ["read", "features", "reference", "score"]
SECONDS = "{:.2f}".format


def worker(generated: str, reference: str) -> dict[str, float]:
    """Seconds of each step with the evogan importable here."""
    import torch

    from evogan.data.reader import ShowerDataset, open_files
    from evogan.physics import Reference, shower_features

    torch.set_num_threads(1)
    times = {}
    start = time.perf_counter()
    sets = [ShowerDataset.from_files(open_files([path])).read() for path in (generated, reference)]
    times["read"] = time.perf_counter() - start
    start = time.perf_counter()
    tables = [shower_features(s.ecal, s.energy, s.theta) for s in sets]
    times["features"] = time.perf_counter() - start
    start = time.perf_counter()
    scorer = Reference(tables[1])
    times["reference"] = time.perf_counter() - start
    start = time.perf_counter()
    scorer.score_table(tables[0])
    times["score"] = time.perf_counter() - start
    times["total"] = sum(times.values())
    return times


def synthesise(folder: Path, events: int) -> list[str]:
    paths = []
    for name, seed in (("generated", 11), ("reference", 12)):
        path = folder / f"{name}.h5"
        command = ["data", "synth", "--out", str(path), "--events", str(events)]
        command += ["--energy-range", "2", "500", "--seed", str(seed)]
        subprocess.run([sys.executable, "-m", "evogan", *command], check=True, capture_output=True)
        paths.append(str(path))
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5000, help="showers per set")
    parser.add_argument("--against", type=Path, help="another evogan checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the timings and the table as JSON")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    check_against(parser, args.against, args.rounds)
    if args.events < 10:
        parser.error(f"--events must be at least 10 (5 energy bins of 2), got {args.events}")
    with tempfile.TemporaryDirectory() as folder:
        files = synthesise(Path(folder), args.events)
        results = interleaved(__file__, args.against, args.rounds, files)
    lines = comparison(results, [*STEPS, "total"], args.against, "s", SECONDS)
    print(f"{args.events} generated against {args.events} reference showers, 1 thread")
    print("\n".join(lines))
    write_json(args.out, lines, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
