"""Say hints on every rank, as a search's rank groups would: only world rank 0 may say them.

Used by tests/test_logs.py. Each rank says a hint before MPI starts (its rank then comes from
the launcher), then starts a tiny 3DGAN training on a rank group of its own with the AMX query
answering yes, whatever this CPU has.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evogan import logs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config", type=Path)
    parser.add_argument("--run-dir", type=Path, required=True)
    args = parser.parse_args()
    logs.setup()
    assert "mpi4py.MPI" not in sys.modules
    logs.hint("said before MPI starts")

    from evogan.config import load_config
    from evogan.distributed import world_comm
    from evogan.gan3d.model import precision
    from evogan.gan3d.training.trainer import GanTrainer

    precision.cpu_has_amx_bf16 = lambda: True
    world = world_comm()
    group = world.Split(world.rank)
    config = load_config(args.config)
    with GanTrainer.open(config, args.run_dir / f"group-{world.rank}", world=group) as trainer:
        trainer.train(0)
    group.Free()


if __name__ == "__main__":
    from evogan.distributed import guard

    with guard():
        main()
