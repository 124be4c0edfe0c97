#!/usr/bin/env python
"""How good the least-squares readout start is before any training, and what it costs.

For each (events, ridge) pair and seed, draws the initial network as ``evogan train`` with
that seed would (``--networks M``: M networks, fitted together as ``evogan evolve`` fits its M
initial parents), fits the readouts (``model.readout: least_squares``), and reports the test
MAPE of the start with the fit's seconds; for comparison, the drawn readout and a calibration
(the energy linear in the summed deposit, fitted on the whole training set for relative
error). Use it to choose ``model.readout_events`` and ``model.readout_ridge`` for your data
(a config with ``data.files`` reads your files).

    python scripts/readout_start.py configs/regressor_ga.yaml [--events 256 1024]
        [--ridge 1e-4 1e-3] [--seeds 5] [--networks 8] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from bench_peers import _spread

from evogan.config import load_config
from evogan.engine import Streams
from evogan.errors import EvoganError
from evogan.regressor.data import RegressorData, load_and_check, mape
from evogan.regressor.network import RegressorLayout, batched_predict, initial_weights
from evogan.regressor.readout import ReadoutStart, relative_ridge

PERCENT = "{:.2f}%".format


def start_errors(
    layout: RegressorLayout, data: tuple, start: ReadoutStart | None, seeds: int, networks: int
) -> tuple[list[float], list[float]]:
    """Test MAPE (%) of every network of each seed's start, and the seconds each seed's fit
    of its ``networks`` networks took."""
    train, test = data
    errors, seconds = [], []
    for seed in range(seeds):
        init = Streams.derive(seed).init
        genomes = initial_weights(layout, networks, init)
        began = time.perf_counter()
        if start is not None:
            genomes = start.apply(layout, genomes, train, init)
        seconds.append(time.perf_counter() - began)
        prediction = batched_predict(layout, genomes, test.x)
        errors += [100 * float(error) for error in mape(prediction, test.y)]
    return errors, seconds


def calibration_error(train: RegressorData, test: RegressorData) -> float:
    """Test MAPE (%) of energy = a * (summed deposit) + b, fitted for relative error."""

    def with_offset(data: RegressorData) -> torch.Tensor:
        deposit = data.x.flatten(1).sum(dim=1, keepdim=True)
        return torch.cat([deposit, torch.ones_like(deposit)], dim=1)

    weights = relative_ridge(with_offset(train), train.y, ridge=1e-12).float()
    return 100 * float(mape(with_offset(test) @ weights, test.y))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--events", nargs="+", type=int, default=[256, 1024])
    parser.add_argument("--ridge", nargs="+", type=float, default=[1e-4, 1e-3])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--networks", type=int, default=1, help="networks fitted together (the GA's M)"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    if min(args.events) < 1 or min(args.ridge) <= 0 or min(args.seeds, args.networks) < 1:
        parser.error("--events, --seeds and --networks need at least 1, --ridge values above 0")
    torch.set_num_threads(1)
    try:
        cfg = load_config(args.config, args.overrides)
        layout, train, test = load_and_check(cfg, 1, announce=lambda line: None)
    except EvoganError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"{len(train)} training, {len(test)} test events; seeds 0-{args.seeds - 1}, "
        f"{args.networks} network(s) each; one thread"
    )
    print(
        f"\n| start | test MAPE, median [min, max] | fit seconds for {args.networks} "
        "network(s) (median) |\n|---|---|---|"
    )
    drawn, _ = start_errors(layout, (train, test), None, args.seeds, args.networks)
    print(f"| drawn readout | {_spread(drawn, PERCENT)} | - |")
    print(
        f"| calibration: linear in the summed deposit | {calibration_error(train, test):.2f}% | - |"
    )
    for events in args.events:
        for ridge in args.ridge:
            start = ReadoutStart(events, ridge)
            errors, seconds = start_errors(layout, (train, test), start, args.seeds, args.networks)
            name = f"fitted, {events} events, ridge {ridge:g}"
            print(f"| {name} | {_spread(errors, PERCENT)} | {statistics.median(seconds):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
