#!/usr/bin/env python
"""The two figures of ``evogan validate`` (features.png: 26 panels; profiles.png: 8 panels),
written with and without matplotlib's tight bounding box, which draws a figure a second time
to find its content's extent.

Reference and "generated" showers come from the synthetic generator (two seeds, the second
set's energies scaled by 0.9 so the panels differ). Rounds alternate the two ways; the table
gives seconds per figure, median [min, max] over rounds.

    python scripts/bench_figures.py [--events 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import io
import sys
import time

import numpy as np
from bench_peers import _spread
from matplotlib.figure import Figure

from evogan.data.synthetic import generate_showers
from evogan.physics.ensemble import observables
from evogan.physics.features import FeatureTable, shower_features
from evogan.physics.inspect import energy_edges
from evogan.plots.gan import DPI, features_figure, profiles_figure


def tables(events: int) -> tuple[FeatureTable, FeatureTable]:
    energy = np.random.default_rng(0).uniform(10.0, 200.0, events)
    reference = generate_showers(energy, np.random.default_rng(1))
    generated = 0.9 * generate_showers(energy, np.random.default_rng(2))
    return shower_features(reference, energy), shower_features(generated, energy)


def seconds(fig: Figure, tight: bool) -> float:
    began = time.perf_counter()
    fig.savefig(io.BytesIO(), dpi=DPI, bbox_inches="tight" if tight else None, format="png")
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if args.events < 20 or args.rounds < 1:
        parser.error("--events needs at least 20 and --rounds at least 1")
    reference, generated = tables(args.events)
    edges = energy_edges(float(reference.energy.min()), float(reference.energy.max()))
    figures = {
        "features.png": features_figure(reference, generated, headline="bench"),
        "profiles.png": profiles_figure(
            observables(reference, edges),
            observables(generated, edges),
            energy_edges=edges,
            headline="bench",
        ),
    }
    print(f"{args.events} showers per set, {args.rounds} interleaved rounds")
    print("\n| figure | bounding box | s per figure: median [min, max] |\n|---|---|---|")
    for name, fig in figures.items():
        timed: dict[bool, list[float]] = {True: [], False: []}
        for index in range(args.rounds):
            for tight in (True, False) if index % 2 == 0 else (False, True):
                timed[tight].append(seconds(fig, tight))
        for tight, values in timed.items():
            box = "tight (second draw)" if tight else "figure canvas"
            print(f"| {name} | {box} | {_spread(values, '{:.2f}'.format)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
