"""``evogan evolve CONFIG`` / ``evogan evolve --resume RUN``: train by evolution (GA or hybrid)
and write a run directory."""

from __future__ import annotations

import argparse

from evogan.commands.options import add_config_options, add_resume_options
from evogan.commands.train import dispatch

# Config task -> "module:function(config, run_dir, resume=...) -> RunDir" that evolves it.
EVOLVERS = {
    "regressor": "evogan.regressor.evolve:evolve_regressor",
}


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name, help="evolve network weights with the (1+lambda) GA or its RMSprop hybrid"
    )
    add_resume_options(parser, "YAML config, e.g. configs/regressor_ga.yaml")
    add_config_options(
        parser, "ga.children=16", "write the run here instead of populations/METHOD-TIME"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    dispatch(EVOLVERS, "evolve", args)
    return 0
