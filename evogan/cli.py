"""The ``evogan`` command. Each subcommand lives in :mod:`evogan.commands` as a small module
with ``add_parser(subparsers)`` and ``run(args) -> int``; this file only wires them together
and turns user errors into one line and a non-zero exit."""

from __future__ import annotations

import argparse
import importlib
import sys

from evogan import __version__
from evogan.distributed.failure import run_guarded
from evogan.errors import EvoganError

# Subcommand name -> module in evogan.commands (imported lazily so `evogan --help` is fast).
COMMANDS = {
    "data": "data",
    "evolve": "evolve",
    "train": "train",
    "compare": "compare",
    "validate": "validate",
    "generate": "generate",
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
    args = build_parser().parse_args(argv)
    try:
        return int(run_guarded(args.handler, args) or 0)
    except EvoganError as exc:
        print(f"evogan: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evogan: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
