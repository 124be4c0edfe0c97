"""``evogan train CONFIG`` / ``evogan train --resume RUN``: gradient training (the RMSprop
baseline of the GA study, and 3DGANs)."""

from __future__ import annotations

import argparse
import importlib
import shlex

from evogan.commands.data_checks import check_data
from evogan.commands.options import (
    add_config_options,
    add_resume_options,
    claim_resumed,
    config_for,
)
from evogan.errors import EvoganError

# Config task -> "module:function(config, run_dir[, resume=True]) -> RunDir" that trains it.
TRAINERS = {
    "regressor": "evogan.regressor.rmsprop:train_regressor",
    "gan3d": "evogan.gan3d.training.trainer:train_gan3d",
}
NOT_RESUMABLE = {
    "regressor": "regressor runs of evogan train (RMSprop) keep no checkpoints (they take "
    "minutes): start a new one with evogan train {config} (a GA run resumes with "
    "evogan evolve --resume {run})",
}


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(name, help="train with gradients (RMSprop baseline, 3DGAN)")
    add_resume_options(parser, "YAML config, e.g. configs/regressor_rmsprop.yaml")
    add_config_options(
        parser, "train.lr=3e-4", "write the run here instead of populations/METHOD-TIME"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    dispatch(TRAINERS, "train", args, NOT_RESUMABLE)
    return 0


def dispatch(
    table: dict[str, str],
    command: str,
    args: argparse.Namespace,
    not_resumable: dict[str, str] | None = None,
) -> object:
    """Load the config (``CONFIG`` or the resumed run's) and call the function registered for
    its task; a resumed run is locked and checked first, and the data checked from their
    metadata, before the trainer's modules (torch, MPI) load, so a refusal comes at once."""
    cfg = config_for(args, command, table)
    if args.resume is not None:
        refusal = (not_resumable or {}).get(cfg.task)
        if refusal is not None:
            config = shlex.quote(str(args.resume / "config.yaml"))
            raise EvoganError(refusal.format(run=shlex.quote(str(args.resume)), config=config))
        claim_resumed(args, command, cfg)
    check_data(command, cfg)
    module, _, function = table[cfg.task].partition(":")
    entry = getattr(importlib.import_module(module), function)
    if args.resume is None:
        return entry(cfg, args.run_dir)
    return entry(cfg, args.resume, resume=True)
