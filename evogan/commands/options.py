"""Arguments shared by the commands that run a config: ``--set`` and ``--run-dir``."""

from __future__ import annotations

import argparse
from pathlib import Path


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
