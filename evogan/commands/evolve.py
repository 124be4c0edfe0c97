"""``evogan evolve CONFIG``: train by evolution (GA or hybrid) and write a run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from evogan.commands.options import add_config_options
from evogan.commands.train import dispatch
from evogan.errors import EvoganError

# Config task -> "module:function(config, run_dir) -> RunDir" that evolves it.
EVOLVERS = {
    "regressor": "evogan.problems.regressor_evolve:evolve_regressor",
}


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name, help="evolve network weights with the (1+lambda) GA or its RMSprop hybrid"
    )
    parser.add_argument(
        "config",
        type=Path,
        nargs="?",
        help="YAML config, e.g. configs/regressor_ga.yaml (not with --resume)",
    )
    add_config_options(
        parser, "ga.children=16", "write the run here instead of populations/METHOD-TIME"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue RUN_DIR from its checkpoints (same mpirun -n as the first launch)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.resume is None:
        if args.config is None:
            raise EvoganError("evogan evolve needs a CONFIG file, or --resume RUN_DIR")
        dispatch(EVOLVERS, "evolve", args.config, args.overrides, args.run_dir)
        return 0
    if args.config is not None or args.run_dir is not None:
        raise EvoganError(
            "--resume RUN_DIR continues with the run's own config.yaml; drop CONFIG/--run-dir"
        )
    config = args.resume / "config.yaml"
    if not config.is_file():
        raise EvoganError(f"{args.resume} is not a run directory to resume (no config.yaml)")
    dispatch(EVOLVERS, "evolve", config, args.overrides, args.resume, resume=True)
    return 0
