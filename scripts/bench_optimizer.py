#!/usr/bin/env python
"""evogan's RMSprop and Adam (evogan/optimizer.py) against torch.optim's: a process's start-up
and the time of one update, on one thread.

Start-up: a fresh Python process imports torch, builds the optimiser and takes one step (what
every training rank does before its first batch); the processes of the four ways alternate.
Update: one ``step()`` on the parameters of the shipped networks, the regressor's (2,049
weights in 4 tensors, input 51x25) and the 3DGAN's generator and discriminator
(configs/gan3d.yaml), rounds alternating the ways' order; a round's time is the median of its
steps. The table gives the median and [min, max] over rounds.

    python scripts/bench_optimizer.py [--rounds 5] [--steps 200]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from bench_peers import _spread

from evogan.config import load_config
from evogan.gan3d.model.networks import build_models
from evogan.gan3d.model.spec import load_spec
from evogan.optimizer import Adam, RMSprop
from evogan.regressor.layout import RegressorLayout
from evogan.regressor.network import RegressorNet

REPO = Path(__file__).resolve().parents[1]
WAYS: dict[str, tuple[str, Callable[..., object]]] = {
    "torch.optim.RMSprop": ("from torch.optim import RMSprop as Way", torch.optim.RMSprop),
    "evogan RMSprop": ("from evogan.optimizer import RMSprop as Way", RMSprop),
    "torch.optim.Adam": ("from torch.optim import Adam as Way", torch.optim.Adam),
    "evogan Adam": ("from evogan.optimizer import Adam as Way", Adam),
}
STARTUP = (
    "import torch\n{imports}\n"
    "p = torch.nn.Parameter(torch.ones(3)); o = Way([p], lr=1e-3)\n"
    "p.sum().backward(); o.step()\n"
)


def startup_seconds(imports: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", STARTUP.format(imports=imports)], check=True)
    return time.perf_counter() - began


def parameter_sets() -> dict[str, list[torch.Tensor]]:
    """The shipped regressor's and 3DGAN's parameters, with gradients drawn once."""
    layout = RegressorLayout.from_config(
        load_config(REPO / "configs" / "regressor_ga.yaml").model, (1, 51, 25)
    )
    generator, discriminator = build_models(load_spec(REPO / "configs" / "gan3d.yaml"))
    sets = {
        "regressor": list(RegressorNet(layout).parameters()),
        "3DGAN generator + discriminator": [*generator.parameters(), *discriminator.parameters()],
    }
    for params in sets.values():
        for param in params:
            param.grad = torch.randn_like(param)
    return sets


def step_microseconds(make: Callable[..., object], params: list[torch.Tensor], steps: int) -> float:
    optimizer = make(params, lr=1e-6)
    optimizer.step()
    times = []
    for _ in range(steps):
        began = time.perf_counter()
        optimizer.step()
        times.append(1e6 * (time.perf_counter() - began))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    if min(args.rounds, args.steps) < 1:
        parser.error("--rounds and --steps need at least 1")
    torch.set_num_threads(1)
    order = list(WAYS.items())
    startup: dict[str, list[float]] = {name: [] for name in WAYS}
    for index in range(args.rounds):
        for name, (imports, _make) in order if index % 2 == 0 else reversed(order):
            startup[name].append(startup_seconds(imports))
    sets = parameter_sets()
    update: dict[tuple[str, str], list[float]] = {}
    for label, params in sets.items():
        steps = args.steps if sum(p.numel() for p in params) < 1e5 else max(1, args.steps // 10)
        for index in range(args.rounds):
            for name, (_imports, make) in order if index % 2 == 0 else reversed(order):
                update.setdefault((label, name), []).append(step_microseconds(make, params, steps))
    print(f"torch {torch.__version__}, 1 thread, {args.rounds} interleaved rounds")
    print("\n| way | process start to its first step, s: median [min, max] |\n|---|---|")
    for name, values in startup.items():
        print(f"| {name} | {_spread(values, '{:.2f}'.format)} |")
    print("\n| parameters | way | one step, us: median [min, max] |\n|---|---|---|")
    for (label, name), values in update.items():
        weights = sum(p.numel() for p in sets[label])
        print(f"| {label} ({weights:,} weights) | {name} | {_spread(values, '{:.0f}'.format)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
