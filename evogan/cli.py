"""The ``evogan`` command. Each subcommand lives in :mod:`evogan.commands` as a small module
with ``add_parser(subparsers)`` and ``run(args) -> int``; this file only wires them together.
How a command ends (one line, exit code 0/1/2/75, run status) is
:func:`evogan.distributed.failure.run_guarded`'s job, the same for every command."""

from __future__ import annotations

import argparse
import importlib
import sys

from evogan import __version__
from evogan.commands.options import split_sets
from evogan.distributed.failure import run_guarded
from evogan.logs import setup as setup_logging
from evogan.logs import survive_closed_stdout

# Subcommand name -> module in evogan.commands (imported lazily so `evogan --help` is fast).
COMMANDS = {
    "data": "data",
    "evolve": "evolve",
    "train": "train",
    "compare": "compare",
    "validate": "validate",
    "generate": "generate",
    "export": "export",
    "search": "search",
    "report": "report",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evogan",
        description="Evolutionary and meta-optimisation of calorimeter fast-simulation networks.",
    )
    parser.add_argument("--version", action="version", version=f"evogan {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in COMMANDS.items():
        importlib.import_module(f"evogan.commands.{module}").add_parser(subparsers, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(split_sets(sys.argv[1:] if argv is None else argv))
    setup_logging()
    survive_closed_stdout()
    return run_guarded(args.handler, args)


if __name__ == "__main__":
    raise SystemExit(main())
