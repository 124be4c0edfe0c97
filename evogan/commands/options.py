"""Arguments shared by the commands: ``--set`` and ``--run-dir``, and the check of counts."""

from __future__ import annotations

import argparse
from pathlib import Path

from evogan.errors import EvoganError


def require_counts(args: argparse.Namespace, *options: str) -> None:
    """Each named option (``--batch-size``) is a count of at least 1: a one-line error else."""
    for option in options:
        value = getattr(args, option.removeprefix("--").replace("-", "_"))
        if value < 1:
            raise EvoganError(f"{option} must be at least 1, got {value}")


def add_config_options(parser: argparse.ArgumentParser, example: str, run_dir_help: str) -> None:
    """``--set KEY=VALUE`` (repeatable) and ``--run-dir DIR``."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a config value, e.g. --set {example} (repeatable)",
    )
    parser.add_argument("--run-dir", type=Path, help=run_dir_help)
