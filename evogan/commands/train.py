"""``evogan train CONFIG`` / ``evogan train --resume RUN``: gradient training (the RMSprop
baseline of the GA study, and 3DGANs)."""

from __future__ import annotations

import argparse
import importlib
import shlex
from collections.abc import Callable

from evogan.commands.data_checks import check_data
from evogan.commands.options import (
    add_config_options,
    add_resume_options,
    check_new_run,
    claim_resumed,
    config_for,
)
from evogan.errors import EvoganError
from evogan.regressor.one_process import refuse_several_ranks

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
FIRST_CHECKS: dict[str, Callable[[], None]] = {"regressor": refuse_several_ranks}
"""Config task -> the refusal ``evogan train`` makes of it before any other (RMSprop under
mpirun, from the launcher's environment before MPI loads)."""


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(name, help="train with gradients (RMSprop baseline, 3DGAN)")
    add_resume_options(parser, "YAML config, e.g. configs/regressor_rmsprop.yaml")
    add_config_options(
        parser, "train.lr=3e-4", "write the run here instead of populations/METHOD-TIME"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    dispatch(TRAINERS, "train", args, NOT_RESUMABLE, FIRST_CHECKS)
    return 0


def dispatch(
    table: dict[str, str],
    command: str,
    args: argparse.Namespace,
    not_resumable: dict[str, str] | None = None,
    first_checks: dict[str, Callable[[], None]] | None = None,
) -> object:
    """Load the config (``CONFIG`` or the resumed run's) and call the function registered for
    its task; the task's ``first_checks``, then a resumed run locked and checked or a new
    run's directory checked, then the data checked from their metadata, all before the
    trainer's modules (torch, MPI) load, so a refusal comes at once."""
    cfg = config_for(args, command, table)
    first_check = (first_checks or {}).get(cfg.task)
    if first_check is not None:
        first_check()
    if args.resume is None:
        check_new_run(args, cfg)
    else:
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
