#!/usr/bin/env python
"""Dropout masks of one 3DGAN discriminator pass on the CPU: torch's draw against the hash
kernel (evogan/gan3d/kernels/_keep_mask.c), on 1..N threads.

torch draws a CPU generator's numbers on one thread, so its masks cost the same on a node of
many cores while the convolutions around them speed up; the kernel hashes each cell's index
on every thread. For each thread count, rounds alternate the two ways; a round's time is the
median of 5 passes (every dropout block of the spec at the given batch). The table gives the
median and [min, max] over rounds.

    python scripts/bench_keep_mask.py [--spec configs/gan3d.yaml] [--batch 8]
        [--threads 1 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from bench_peers import _spread

from evogan.errors import EvoganError
from evogan.gan3d.kernels.dropout_mask import keep_mask, kernel
from evogan.gan3d.model.blocks import draw_key
from evogan.gan3d.model.spec import discriminator_layers, load_spec

REPO = Path(__file__).resolve().parents[1]


def dropout_shapes(spec_path: Path, batch: int) -> list[tuple[torch.Size, float]]:
    """(activation shape, p) of every dropout block of the spec's discriminator."""
    spec = load_spec(spec_path)
    layers = discriminator_layers(spec)
    return [
        (torch.Size((batch, *layer.out_shape)), block.dropout)
        for layer, block in zip(layers, spec.discriminator, strict=False)
        if block.dropout > 0
    ]


def ways(shapes: list[tuple[torch.Size, float]]) -> dict[str, Callable[[], list[torch.Tensor]]]:
    """One discriminator pass's masks, drawn by torch and hashed by the kernel."""
    stream = torch.Generator().manual_seed(0)

    def drawn() -> list[torch.Tensor]:
        return [torch.rand(shape, generator=stream) >= p for shape, p in shapes]

    def hashed() -> list[torch.Tensor]:
        keys = [int(draw_key(stream)) for _ in shapes]
        return [keep_mask(key, shape, p) for key, (shape, p) in zip(keys, shapes, strict=True)]

    return {"torch.rand >= p": drawn, "hash kernel": hashed}


def milliseconds(work: Callable[[], list[torch.Tensor]], repeats: int = 5) -> float:
    work()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append(1e3 * (time.perf_counter() - began))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=REPO / "configs" / "gan3d.yaml")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if min(args.batch, args.rounds, *args.threads) < 1:
        parser.error("--batch, --rounds and --threads need at least 1")
    try:
        shapes = dropout_shapes(args.spec, args.batch)
    except EvoganError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not shapes:
        print(f"error: {args.spec} has no dropout in its discriminator", file=sys.stderr)
        return 2
    if kernel() is None:
        print("error: the mask kernel could not be built (see the warning)", file=sys.stderr)
        return 2
    cells = sum(shape.numel() for shape, _ in shapes)
    print(
        f"{args.spec.name}, batch {args.batch}: {len(shapes)} dropout blocks, "
        f"{cells / 1e6:.1f} M cells per discriminator pass; {args.rounds} rounds"
    )
    print("\n| threads | way | ms per pass, median [min, max] |\n|---|---|---|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        order = list(ways(shapes).items())
        timed: dict[str, list[float]] = {name: [] for name, _ in order}
        for round_index in range(args.rounds):
            for name, work in order if round_index % 2 == 0 else reversed(order):
                timed[name].append(milliseconds(work))
        for name, values in timed.items():
            print(f"| {threads} | {name} | {_spread(values, '{:.1f}'.format)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
