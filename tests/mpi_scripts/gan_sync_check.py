"""A few synchronous data-parallel 3DGAN steps on one global batch sliced over the ranks.

Used by tests/test_data_parallel.py: R ranks with batch b must end with the weights of one
process with batch R*b. Batch norm and dropout are switched off in the spec because their
statistics and masks are per rank by nature (docs/explanation/parallel.md).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from mpi4py import MPI

from evogan.config.trainer import TrainerConfig
from evogan.distributed import guard, split_layout, world_comm
from evogan.gan3d.model.spec import GanSpec, load_spec
from evogan.gan3d.training.modes import build_parallel_step


def exact_spec(path: str) -> GanSpec:
    raw = load_spec(path).model_dump()
    for block in raw["generator"] + raw["discriminator"]:
        block["batch_norm"] = False
    for block in raw["discriminator"]:
        block["dropout"] = 0.0
    return GanSpec.model_validate(raw)


def train(comm: MPI.Comm, spec: GanSpec, global_batch: int, steps: int) -> np.ndarray:
    """The weights of both networks after ``steps`` steps on ``comm`` (slices of one batch)."""
    layout = split_layout(comm)
    parallel = build_parallel_step(spec, TrainerConfig(mode="sync"), layout, seed=3)
    data = np.random.default_rng(11)
    per_rank = global_batch // comm.size
    mine = slice(comm.rank * per_rank, (comm.rank + 1) * per_rank)
    for _ in range(steps):
        shape = (global_batch, *spec.output_shape)
        ecal = (data.gamma(0.3, 0.02, size=shape) * (data.random(shape) < 0.2)).astype(np.float32)
        energy = data.uniform(10, 200, global_batch).astype(np.float32)
        theta = data.uniform(1.2, 1.9, global_batch).astype(np.float32)
        parallel.train_step(
            torch.from_numpy(ecal[mine]),
            torch.from_numpy(energy[mine]),
            torch.from_numpy(theta[mine]),
            outer=False,
        )
    stats = parallel.close()
    assert stats["generator"]["calls"] == spec.generator_steps * steps, stats
    layout.free()
    modules = (parallel.step.generator, parallel.step.discriminator)
    return torch.cat([v.reshape(-1) for m in modules for v in m.state_dict().values()]).numpy()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    world = world_comm()
    spec = exact_spec("configs/gan3d_tiny.yaml")
    weights = train(world, spec, args.global_batch, args.steps)
    replicas = world.gather(weights, root=0)
    if world.rank == 0:
        reference = train(MPI.COMM_SELF, spec, args.global_batch, args.steps)
        report = {
            "ranks": world.size,
            "replica_spread": max(float(np.abs(r - weights).max()) for r in replicas),
            "max_abs_diff": float(np.abs(reference - weights).max()),
            "max_abs_weight": float(np.abs(reference).max()),
            "moved": float(np.abs(reference - train_untrained(spec)).max()),
        }
        with open(args.out, "w") as stream:
            json.dump(report, stream)


def train_untrained(spec: GanSpec) -> np.ndarray:
    """The initial weights (to check that training moved them at all)."""
    return train(MPI.COMM_SELF, spec, 8, 0)


if __name__ == "__main__":
    with guard():
        main()
