#!/usr/bin/env python
"""Time the regressor's CPU kernels in the calls GA, hybrid and RMSprop runs make, optionally
against another checkout of evogan (a kernel change measured against the code before it).

Cases, on sparse shower-like inputs (the kernel has no data-dependent branches):

- generation at the shipped rate: an elite and 8 children at mutation rate 0.01, 128 events;
- generation at the GA study's rate: the same at rate 0.1 (nearly every filter changes);
- re-evaluation: a challenger (one child at 0.01) and its elite, 1,024 events;
- reference fitness: one genome, 5,000 events;
- gradient step: one RMSprop step of ``RegressorNet`` on 128 events (forward, backward and
  update: the RMSprop baseline's step, and the hybrid's on its elite).

Every round runs each checkout in its own subprocess (one thread), alternating which goes
first; a case's time is the median of 7 timings of 10 calls. The table gives the median and
[min, max] over rounds, and the ratio of the medians.

    python scripts/bench_fused_eval.py [--against CHECKOUT] [--rounds 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from checkouts import check_against, comparison, interleaved, write_json

CASES = {  # name: (mutation rate, children, events)
    "generation at rate 0.01: elite + 8 children, 128 events": (0.01, 8, 128),
    "generation at rate 0.1: elite + 8 children, 128 events": (0.1, 8, 128),
    "re-evaluation: elite + challenger, 1,024 events": (0.01, 1, 1024),
    "reference fitness: 1 genome, 5,000 events": (None, 0, 5000),
}
STEP = "gradient step: RMSprop on 1 network, 128 events"
MS = "{:.3f}".format


def worker() -> dict[str, float]:
    """Milliseconds per call of every case with the evogan importable here."""
    import torch

    from evogan.engine.operators import point_mutation
    from evogan.regressor.data import mape
    from evogan.regressor.network import (
        RegressorLayout,
        RegressorNet,
        batched_predict,
        initial_weights,
    )

    torch.set_num_threads(1)
    layout = RegressorLayout((1, 51, 25))
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(5000, *layout.input_shape, generator=generator) ** 8
    elite = initial_weights(layout, 1, generator)[0]
    times = {}
    for name, (rate, children, events) in CASES.items():
        genomes = elite[None]
        if children:
            genomes = torch.cat([genomes, point_mutation(elite, children, rate, 0.1, 7, None)])
        index = torch.randperm(5000, generator=generator)[:events]
        times[name] = _milliseconds(lambda g=genomes, i=index: batched_predict(layout, g, x, 4, i))
    net = RegressorNet.from_genome(layout, elite)
    try:  # the optimiser this checkout's runs use (torch's before evogan had its own)
        from evogan.optimizer import RMSprop
    except ImportError:
        RMSprop = torch.optim.RMSprop
    optimizer = RMSprop(net.parameters(), lr=1e-4)
    batch = x[torch.randperm(5000, generator=generator)[:128]]
    target = torch.rand(128, generator=generator) + 0.5

    def step() -> None:
        optimizer.zero_grad()
        mape(net(batch), target).backward()
        optimizer.step()

    times[STEP] = _milliseconds(step)
    return times


def _milliseconds(call) -> float:
    """Median over 7 timings of 10 calls, after 3 warm-up calls."""
    for _ in range(3):
        call()
    timings = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(10):
            call()
        timings.append((time.perf_counter() - start) / 10 * 1e3)
    return statistics.median(timings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, help="another evogan checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the timings and the table as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker()))
        return 0
    check_against(parser, args.against, args.rounds)
    results = interleaved(__file__, args.against, args.rounds)
    lines = comparison(results, [*CASES, STEP], args.against, "ms", MS)
    print("\n".join(lines))
    write_json(args.out, lines, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
