"""Run the data-parallel 3DGAN trainer under mpirun with test-only hooks.

``--slow-rank R`` sleeps on rank R after every step (the rings must not wait for it);
``--fail-rank R --fail-step S`` raises on rank R at step S while the others are inside
collective calls (the job must end promptly with the rank named); ``--signal-rank R
--signal-step S`` sends SIGTERM to rank R's own process after global step S, as Slurm does at
the end of an allocation (``guard`` turns the stop into the CLI's line and exit code);
``--signal-in-checkpoint R`` sends it on rank R from inside its first checkpoint write (its
state gathered, the file not yet written nor committed).
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

from evogan.config import load_config
from evogan.distributed import guard
from evogan.gan3d.training.epoch_loop import StepInfo
from evogan.gan3d.training.trainer import train_gan3d


def signal_inside_first_checkpoint(rank: int) -> None:
    """SIGTERM to this process, on ``rank``, as its first checkpoint file is being written."""
    from mpi4py import MPI

    from evogan.gan3d.training import checkpoint

    if MPI.COMM_WORLD.rank != rank:
        return
    write = checkpoint.save_weights
    sent = {"done": False}

    def interrupted(path: Path, tensors: dict, meta: dict) -> None:
        if not sent["done"]:
            sent["done"] = True
            os.kill(os.getpid(), signal.SIGTERM)
        write(path, tensors, meta)

    checkpoint.save_weights = interrupted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config", type=Path)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-seconds", type=float, default=0.2)
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-step", type=int, default=0)
    parser.add_argument("--signal-rank", type=int, default=-1)
    parser.add_argument("--signal-step", type=int, default=0)
    parser.add_argument("--signal-in-checkpoint", type=int, default=-1)
    args = parser.parse_args()
    if args.signal_in_checkpoint >= 0:
        signal_inside_first_checkpoint(args.signal_in_checkpoint)
    steps = {"done": 0}

    def on_step(info: StepInfo) -> None:
        steps["done"] += 1
        if info.rank == args.slow_rank:
            time.sleep(args.slow_seconds)
        if info.rank == args.fail_rank and info.step == args.fail_step:
            raise RuntimeError(f"injected failure at epoch {info.epoch} step {info.step}")
        if info.rank == args.signal_rank and steps["done"] == args.signal_step:
            os.kill(os.getpid(), signal.SIGTERM)

    config = load_config(args.config, args.overrides)
    # The figure is not what these runs test, and rank 0 would draw it while the others wait.
    train_gan3d(config, args.run_dir, resume=args.resume, on_step=on_step, learning_curve=False)


if __name__ == "__main__":
    with guard():
        main()
