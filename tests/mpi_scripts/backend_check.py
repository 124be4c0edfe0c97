"""Sync gradient averaging over MPI and over overlapped groups, on a small MLP, under mpirun.

Used by tests/test_gan_backend.py. Every rank trains the same MLP (its first layer unused, so
two parameters never get a gradient) on its own slice of a shared batch, once with
:class:`SyncAllreduce` (MPI), then with :class:`OverlappedAllreduce` (started from gradient
hooks) over a gloo group and over MPI's ``Iallreduce``; buckets of 256 bytes split the
parameters over several all-reduces. Rank 0 writes every run's weights of every rank and the
overlapped exchanges' counters.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from mpi4py import MPI

from evogan.distributed import guard, world_comm
from evogan.distributed.gradients import SyncAllreduce, broadcast_parameters
from evogan.distributed.mpi_group import MpiGroup
from evogan.distributed.overlap import OverlappedAllreduce
from evogan.distributed.torch_group import TorchGroup


def train(comm: MPI.Comm, backend: str, steps: int, global_batch: int) -> dict:
    torch.manual_seed(99 + comm.rank)  # replicas start different; the broadcast fixes that
    model = torch.nn.ModuleDict(
        {
            "unused": torch.nn.Linear(4, 1),
            "body": torch.nn.Sequential(
                torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 16), torch.nn.Tanh()
            ),
            "head": torch.nn.Linear(16, 1),
        }
    )
    params = list(model.parameters())
    broadcast_parameters(comm, params)
    group = None
    if backend == "mpi":
        exchange = SyncAllreduce(comm, params, bucket_bytes=256)
    else:
        group = MpiGroup(comm) if backend == "mpi-overlap" else TorchGroup(comm, backend)
        exchange = OverlappedAllreduce(group, params, bucket_bytes=256)
    data = np.random.default_rng(5)
    target = torch.from_numpy(data.normal(size=(8, 1)).astype(np.float32))
    per_rank = global_batch // comm.size
    mine = slice(comm.rank * per_rank, (comm.rank + 1) * per_rank)
    for _ in range(steps):
        x = torch.from_numpy(data.normal(size=(global_batch, 8)).astype(np.float32))[mine]
        loss = torch.nn.functional.mse_loss(model["head"](model["body"](x)), x @ target)
        model.zero_grad(set_to_none=True)
        loss.backward()
        exchange.exchange()
        stepped = [p for p in params if p.grad is not None]
        with torch.no_grad():  # plain SGD: torch.optim would import its compiler stack
            torch._foreach_add_(stepped, [p.grad for p in stepped], alpha=-0.05)
    stats = exchange.close()
    if group is not None:
        group.close()
    return {
        "weights": torch.cat([p.detach().reshape(-1) for p in params]).tolist(),
        "calls": stats.calls,
        "buckets": len(getattr(exchange, "buckets", [])),
        "started_in_backward": getattr(exchange, "started_in_backward", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    world = world_comm()
    report = {}
    for backend in ("mpi", "gloo", "mpi-overlap"):
        report[backend] = world.gather(train(world, backend, args.steps, args.global_batch))
    if world.rank == 0:
        with open(args.out, "w") as stream:
            json.dump(report, stream)


if __name__ == "__main__":
    with guard():
        main()
