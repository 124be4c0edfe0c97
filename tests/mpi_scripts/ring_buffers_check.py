"""Check every ARAR exchange's arithmetic with host and with device (torch) ring buffers.

Used by tests/test_data_parallel.py. Rank r's gradient at step t is ``r + 1 + 10 t``. With
``ring_depth`` above the step count no send is skipped, and MPI delivers one sender's messages
in order, so the payloads a call takes are the left neighbour's next ones: each exchanged
gradient must equal ``(own + those payloads) / (1 + their count)`` exactly, in float32.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from evogan.distributed import guard, split_layout, world_comm
from evogan.distributed.gradients import RingExchange

STEPS = 6
VALUES = 7


def gradient(rank: int, step: int) -> float:
    return rank + 1 + 10 * step


def check(world, device: str | None) -> dict:
    layout = split_layout(world, group_size=None)
    param = torch.nn.Parameter(torch.zeros(VALUES))
    exchange = RingExchange(layout, [param], depth=STEPS + 1, device=device)
    left = (world.rank - 1) % world.size
    taken, wrong = 0, []
    for step in range(STEPS):
        param.grad = torch.full((VALUES,), float(gradient(world.rank, step)))
        exchange.exchange()
        now = exchange.stats.received
        total = np.full(VALUES, gradient(world.rank, step), np.float32)
        for sent in range(taken, now):
            total += np.float32(gradient(left, sent))
        total /= np.float32(1 + now - taken)
        if not np.array_equal(param.grad.numpy(), total):
            wrong.append(step)
        taken = now
        world.Barrier()
        time.sleep(0.05)  # the neighbour's payload arrives before the next step
    stats = exchange.close()
    layout.free()
    return {"wrong_steps": wrong, "stats": stats.as_dict()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    world = world_comm()
    report = {kind: check(world, device) for kind, device in (("host", None), ("device", "cpu"))}
    reports = world.gather(report, root=0)
    if world.rank == 0:
        with open(args.out, "w") as stream:
            json.dump(reports, stream)


if __name__ == "__main__":
    with guard():
        main()
