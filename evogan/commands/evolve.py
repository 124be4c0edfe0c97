"""``evogan evolve CONFIG``: train by evolution (GA or hybrid) and write a run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from evogan.commands.train import dispatch

# Config task -> "module:function(config, run_dir) -> RunDir" that evolves it.
EVOLVERS = {
    "regressor": "evogan.problems.regressor_evolve:evolve_regressor",
}


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name, help="evolve network weights with the (1+lambda) GA or its RMSprop hybrid"
    )
    parser.add_argument("config", type=Path, help="YAML config, e.g. configs/regressor_ga.yaml")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a config value, e.g. --set ga.children=16 (repeatable)",
    )
    parser.add_argument(
        "--run-dir", type=Path, help="write the run here instead of populations/METHOD-TIME"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    dispatch(EVOLVERS, "evolve", args.config, args.overrides, args.run_dir)
    return 0
