"""``evogan train CONFIG``: gradient training (the RMSprop baseline of the GA study)."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from evogan.commands.options import add_config_options
from evogan.config import load_config
from evogan.errors import ConfigError

# Config task -> "module:function(config, run_dir) -> RunDir" that trains it.
TRAINERS = {
    "regressor": "evogan.training.rmsprop:train_regressor",
    "gan3d": "evogan.training.gan_trainer:train_gan3d",
}


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(name, help="train with gradients (RMSprop baseline)")
    parser.add_argument(
        "config", type=Path, help="YAML config, e.g. configs/regressor_rmsprop.yaml"
    )
    add_config_options(
        parser, "train.lr=3e-4", "write the run here instead of populations/METHOD-TIME"
    )
    parser.add_argument(
        "--resume", type=Path, metavar="RUN_DIR", help="continue RUN_DIR from its last checkpoint"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    dispatch(TRAINERS, "train", args.config, args.overrides, args.resume or args.run_dir)
    return 0


def dispatch(
    table: dict[str, str],
    command: str,
    path: Path,
    overrides: list[str],
    run_dir: Path | None,
    **options: object,
) -> object:
    """Load the config and call the function registered for its task."""
    cfg = load_config(path, overrides)
    task = getattr(cfg, "task", None)
    if task not in table:
        raise ConfigError(
            f"{path}: task = {task!r} cannot be run by `evogan {command}`; "
            f"allowed: {', '.join(table)}"
        )
    module, _, function = table[task].partition(":")
    return getattr(importlib.import_module(module), function)(cfg, run_dir, **options)
