#!/usr/bin/env python
"""How close a CPU training's start estimate comes to its step: the probe step
(evogan/gan3d/training/estimate.py, 2 showers on fresh networks of the spec) scaled to the
batch, against one training step of the batch on fresh networks, in rounds that alternate the
two; wall and CPU seconds of each. One process, torch's default threads.

    python scripts/bench_cpu_estimate.py [--config configs/gan3d.yaml] [--batch 64] [--rounds 1]
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from evogan.config import load_config
from evogan.gan3d.model.networks import build_models
from evogan.gan3d.model.precision import ForwardOptions
from evogan.gan3d.training.estimate import PROBE_SHOWERS, probe_seconds
from evogan.gan3d.training.step import GanStep


def step_seconds(spec, batch: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one training step of ``batch`` random showers."""
    rng = torch.Generator().manual_seed(1)
    step = GanStep(spec, *build_models(spec, rng), rng)
    cells = torch.rand((batch, *spec.output_shape), generator=rng)
    energy = torch.full((batch,), 100.0)
    theta = torch.full((batch,), math.pi / 2) if spec.conditioning.angle else None
    cpu, wall = time.process_time(), time.perf_counter()
    step.train_step(cells, energy, theta)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/gan3d.yaml")
    parser.add_argument("--batch", type=int, help="showers per step (default: the spec's)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    spec = load_config(args.config).spec
    batch = args.batch or spec.batch_size
    scale = batch / PROBE_SHOWERS
    print(f"{args.config}: batch {batch}, {torch.get_num_threads()} threads")
    print("| round | probe s | estimate s | step s | estimate / step | CPU: estimate / step |")
    print("|---|---|---|---|---|---|")
    for number in range(1, args.rounds + 1):
        cpu = time.process_time()
        probe = probe_seconds(spec, ForwardOptions())
        probe_cpu = time.process_time() - cpu
        wall, step_cpu = step_seconds(spec, batch)
        print(
            f"| {number} | {probe:.2f} | {probe * scale:.1f} | {wall:.1f} | "
            f"{probe * scale / wall:.2f} | {probe_cpu * scale / step_cpu:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
