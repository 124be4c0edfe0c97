"""Train a small regression MLP with a gradient exchange under mpirun and report the result.

Used by tests/test_data_parallel.py. Every rank takes its slice of one global batch per step
(drawn from a shared seed). In ``sync`` mode rank 0 then repeats the run alone on COMM_SELF
(the single-process path) with the whole batch, and the two must agree. ``--slow-rank`` sleeps
on one rank every step to show that the rings never wait for it.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from mpi4py import MPI

from evogan.distributed import guard, split_layout, world_comm
from evogan.distributed.gradients import RingExchange, SyncAllreduce, broadcast_parameters


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--modes", required=True, help="comma-separated: sync, arar, rma, arar-device"
    )
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--steps-per-epoch", type=int, default=5)
    parser.add_argument("--group-size", type=int, default=None)
    parser.add_argument("--outer-every", type=int, default=1)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-seconds", type=float, default=0.05)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="work of every rank")
    parser.add_argument("--out", required=True)
    return parser.parse_args()


def train(comm: MPI.Comm, mode: str, args: argparse.Namespace) -> dict:
    layout = split_layout(comm, group_size=None if mode == "sync" else args.group_size)
    torch.manual_seed(1234 + comm.rank)  # replicas start different; the broadcast fixes that
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    params = list(model.parameters())
    broadcast_parameters(comm, params)
    if mode == "sync":
        exchange = SyncAllreduce(comm, params, bucket_bytes=256)
    else:
        device = "cpu" if mode == "arar-device" else None  # torch tensors handed to MPI
        exchange = RingExchange(layout, params, rma=mode == "rma", device=device)
    data = np.random.default_rng(7)
    target = torch.from_numpy(data.normal(size=(8, 1)).astype(np.float32))
    per_rank = args.global_batch // comm.size
    lo = comm.rank * per_rank
    losses = []
    for step in range(args.steps):
        x = torch.from_numpy(data.normal(size=(args.global_batch, 8)).astype(np.float32))
        x = x[lo : lo + per_rank]
        loss = torch.nn.functional.mse_loss(model(x), x @ target)
        model.zero_grad(set_to_none=True)
        loss.backward()
        time.sleep(args.slow_seconds if comm.rank == args.slow_rank else args.step_seconds)
        end_of_epoch = (step + 1) % args.steps_per_epoch == 0
        epoch = step // args.steps_per_epoch
        exchange.exchange(outer=end_of_epoch and (epoch + 1) % args.outer_every == 0)
        with torch.no_grad():  # plain SGD: torch.optim would import its compiler stack
            torch._foreach_add_(params, [p.grad for p in params], alpha=-0.05)
        losses.append(loss.item())
    stats = exchange.close()
    layout_view = layout.describe()
    layout.free()
    return {
        "rank": comm.rank,
        "layout": layout_view,
        "stats": stats.as_dict(),
        "first_loss": float(np.mean(losses[:3])),
        "last_loss": float(np.mean(losses[-3:])),
        "weights": torch.cat([p.detach().reshape(-1) for p in params]).tolist(),
    }


def main() -> None:
    args = parse()
    world = world_comm()
    result = {}
    for mode in args.modes.split(","):
        reports = world.gather(train(world, mode, args), root=0)
        if world.rank == 0:
            result[mode] = {"ranks": reports}
            if mode == "sync":
                result[mode]["reference"] = train(MPI.COMM_SELF, mode, args)
    if world.rank == 0:
        with open(args.out, "w") as stream:
            json.dump(result, stream)


if __name__ == "__main__":
    with guard():
        main()
