"""``mpirun -n N evogan search CONFIG``: an architecture search campaign (GA or Optuna)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evogan.commands.options import add_config_options
from evogan.config import load_config
from evogan.errors import ConfigError


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name, help="search 3DGAN architectures (GA islands or Optuna) on rank groups"
    )
    parser.add_argument(
        "config", type=Path, help="task: search YAML, e.g. configs/arch_search_ga.yaml"
    )
    add_config_options(parser, "candidates=64", "campaign directory (default: populations/)")
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="CAMPAIGN_DIR",
        help="continue a killed campaign: finished candidates are kept, unfinished re-run",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from evogan.config.search import SearchConfig

    config = load_config(args.config, args.overrides)
    if not isinstance(config, SearchConfig):
        raise ConfigError(
            f"{args.config}: task = {getattr(config, 'task', None)!r} cannot be run by "
            "`evogan search`; use a task: search config such as configs/arch_search_ga.yaml"
        )
    if args.resume is not None and args.run_dir is not None:
        raise ConfigError("give --run-dir (new campaign) or --resume (existing one), not both")
    from evogan.search import run_search

    run_search(config, config_path=args.config, run_dir=args.run_dir, resume=args.resume)
    return 0
