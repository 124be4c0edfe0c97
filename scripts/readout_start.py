#!/usr/bin/env python
"""How good the least-squares readout start is before any training, and what it costs.

For each (events, ridge) pair and seed, draws the initial network as ``evogan train`` with
that seed would (``--networks M``: M networks, fitted together as ``evogan evolve`` fits its M
initial parents), fits the readouts (``model.readout: least_squares``), and reports the test
MAPE of the start with the fit's seconds; for comparison, the drawn readout and a calibration
(the energy linear in the summed deposit, fitted on the whole training set for relative
error). Use it to choose ``model.readout_events`` and ``model.readout_ridge`` for your data
(a config with ``data.files`` reads your files). With ``--pick K ...`` and M > 1 networks it
also reports the network a GA keeps: the best of the M on K training events drawn for the pick
(the GA and the hybrid pick on their first minibatch, K = ``ga.batch_size``). ``--per-seed``
lists each seed's first network (``evogan train --set seed=K``'s start) for the first
(events, ridge) pair, to set against what that seed's training ends at.

    python scripts/readout_start.py configs/regressor_ga.yaml [--events 256 1024]
        [--ridge 1e-4 1e-3] [--seeds 5] [--networks 8] [--pick 128 1024] [--per-seed]
        [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator

import torch
from bench_peers import _spread

from evogan.config import load_config
from evogan.engine import Streams
from evogan.errors import EvoganError
from evogan.regressor.data import RegressorData, load_and_check, mape
from evogan.regressor.network import RegressorLayout, batched_predict, initial_weights
from evogan.regressor.readout import ReadoutStart, relative_ridge
from evogan.seeding import seeded

PERCENT = "{:.2f}%".format


def starts(
    layout: RegressorLayout,
    train: RegressorData,
    start: ReadoutStart | None,
    seeds: int,
    networks: int,
) -> Iterator[tuple[torch.Tensor, float]]:
    """Each seed's ``networks`` initial genomes, with the seconds their fit took."""
    for seed in range(seeds):
        init = Streams.derive(seed).init
        genomes = initial_weights(layout, networks, init)
        began = time.perf_counter()
        if start is not None:
            genomes = start.apply(layout, genomes, train, init)
        yield genomes, time.perf_counter() - began


def held_out_errors(
    layout: RegressorLayout, genomes: torch.Tensor, test: RegressorData
) -> list[float]:
    """Test MAPE (%) of every genome."""
    return [100 * float(error) for error in mape(batched_predict(layout, genomes, test.x), test.y)]


def start_errors(
    layout: RegressorLayout, data: tuple, start: ReadoutStart | None, seeds: int, networks: int
) -> tuple[list[float], list[float]]:
    """Test MAPE (%) of every network of each seed's start, and the seconds each seed's fit
    of its ``networks`` networks took."""
    train, test = data
    errors, seconds = [], []
    for genomes, fit_seconds in starts(layout, train, start, seeds, networks):
        errors += held_out_errors(layout, genomes, test)
        seconds.append(fit_seconds)
    return errors, seconds


def pick_rows(
    layout: RegressorLayout,
    data: tuple,
    start: ReadoutStart,
    seeds: int,
    networks: int,
    sizes: list[int],
) -> dict[str, list[float]]:
    """Per seed, the test MAPE (%) of the first network of its draw (as a one-network run
    starts) and of the best of all ``networks`` on ``size`` training events drawn for the pick,
    for each of ``sizes``."""
    train, test = data
    rows: dict[str, list[float]] = {"one network": []}
    rows.update({f"best of {networks} on {size} events": [] for size in sizes})
    for seed, (genomes, _) in enumerate(starts(layout, train, start, seeds, networks)):
        errors = held_out_errors(layout, genomes, test)
        rows["one network"].append(errors[0])
        for size in sizes:
            index = torch.randperm(len(train), generator=seeded(seed))[:size]
            on_pick = mape(batched_predict(layout, genomes, train.x, index=index), train.y[index])
            rows[f"best of {networks} on {size} events"].append(errors[int(on_pick.argmin())])
    return rows


def pick_table(rows: dict[str, list[float]]) -> list[str]:
    """Mean and spread of each pick, and its paired difference to the first pick size's."""
    reference = list(rows.values())[1]
    lines = ["\n| start | test MAPE, mean +- s.d. | minus the first pick's: mean (s.e.) |"]
    lines.append("|---|---|---|")
    for name, errors in rows.items():
        difference = [a - b for a, b in zip(errors, reference, strict=True)]
        error = statistics.stdev(difference) / len(difference) ** 0.5
        lines.append(
            f"| {name} | {statistics.mean(errors):.3f} +- {statistics.stdev(errors):.3f}% | "
            f"{statistics.mean(difference):+.3f} ({error:.3f}) |"
        )
    return lines


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
    parser.add_argument(
        "--pick", nargs="+", type=int, default=[], help="training events the GA's pick sees"
    )
    parser.add_argument(
        "--per-seed", action="store_true", help="list each seed's first network's test MAPE"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    if min(args.events) < 1 or min(args.ridge) <= 0 or min(args.seeds, args.networks) < 1:
        parser.error("--events, --seeds and --networks need at least 1, --ridge values above 0")
    if args.pick and (min(args.pick) < 1 or args.networks < 2 or args.seeds < 2):
        parser.error("--pick needs sizes of at least 1, --networks 2 or more and --seeds 2 or more")
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
    first_errors: list[float] = []
    for events in args.events:
        for ridge in args.ridge:
            start = ReadoutStart(events, ridge)
            errors, seconds = start_errors(layout, (train, test), start, args.seeds, args.networks)
            first_errors = first_errors or errors
            name = f"fitted, {events} events, ridge {ridge:g}"
            print(f"| {name} | {_spread(errors, PERCENT)} | {statistics.median(seconds):.3f} |")
    if args.pick:
        start = ReadoutStart(args.events[0], args.ridge[0])
        print(
            f"\nThe network a GA keeps, fitted on {args.events[0]} events, ridge {args.ridge[0]:g}:"
        )
        rows = pick_rows(layout, (train, test), start, args.seeds, args.networks, args.pick)
        print("\n".join(pick_table(rows)))
    if args.per_seed:
        print(
            f"\nFirst network per seed, fitted on {args.events[0]} events, ridge {args.ridge[0]:g}:"
        )
        print("\n| seed | test MAPE |\n|---|---|")
        for seed in range(args.seeds):
            print(f"| {seed} | {PERCENT(first_errors[seed * args.networks])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
