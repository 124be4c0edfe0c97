"""``mpirun -n N evogan search CONFIG`` / ``evogan search --resume RUN``: an architecture
search campaign (GA or Optuna)."""

from __future__ import annotations

import argparse

from evogan.commands.data_checks import check_data
from evogan.commands.options import (
    add_config_options,
    add_resume_options,
    check_new_run,
    claim_resumed,
    config_for,
)
from evogan.distributed.failure import launched_ranks


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name, help="search 3DGAN architectures (GA islands or Optuna) on rank groups"
    )
    add_resume_options(parser, "task: search YAML, e.g. configs/arch_search_ga.yaml")
    add_config_options(parser, "candidates=64", "campaign directory (default: populations/)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = config_for(args, "search", {"search": "evogan.search:run_search"})
    config.check_ranks(launched_ranks())  # before evogan.search.run loads torch and MPI
    source = args.config if args.resume is None else args.resume / "config.yaml"
    if args.resume is None:
        check_new_run(args, config)
    else:
        claim_resumed(args, "search", config)
    check_data("search", config, source)
    from evogan.search import run_search

    if args.resume is None:
        run_search(config, config_path=source, run_dir=args.run_dir)
    else:
        run_search(config, config_path=source, resume=args.resume)
    return 0
