"""Train one step of a config on every rank with every epoch counting as long, so that the
CPU estimate is said (by world rank 0 only). Used by tests/test_gan_estimate.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from evogan import logs
from evogan.config import load_config
from evogan.distributed import world_comm
from evogan.distributed.signals import StopFlag
from evogan.gan3d.training.trainer import GanTrainer, Opening

SHORT = ["trainer.steps_per_epoch=1", "trainer.epochs=1", "run.progress_every=1000"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config", type=Path)
    parser.add_argument("--run-dir", type=Path, required=True)
    args = parser.parse_args()
    logs.setup()
    opening = Opening(args.run_dir, long_epoch_s=0.0)
    config = load_config(args.config, SHORT)
    with GanTrainer(config, opening, world_comm(), StopFlag()) as trainer:
        trainer.train()


if __name__ == "__main__":
    from evogan.distributed import guard

    with guard():
        main()
