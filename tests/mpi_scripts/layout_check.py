"""Split the world under mpirun and print every rank's view as one JSON line (rank 0).

``--fail-rank R`` makes rank R raise while the others wait in a receive that would never be
satisfied, to show the failure guard ends the whole job instead of hanging it.
"""

from __future__ import annotations

import argparse
import json

from evogan.distributed import guard, split_layout, world_comm
from evogan.errors import EvoganError


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks-per-island", type=int, default=None)
    parser.add_argument("--group-size", default=None)
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--user-error", action="store_true")
    args = parser.parse_args()
    group_size = args.group_size
    if group_size is not None and group_size != "node":
        group_size = int(group_size)
    world = world_comm()
    if world.rank == args.fail_rank:
        if args.user_error:
            raise EvoganError("data file /nowhere.h5 does not exist; check data.files")
        raise RuntimeError("deliberate failure for the test")
    if args.fail_rank >= 0:
        world.recv(source=args.fail_rank)
    layout = split_layout(world, args.ranks_per_island, group_size)
    views = world.gather(
        {
            "rank": world.rank,
            "leaders": layout.leaders.size if layout.is_leader else 0,
            **layout.describe(),
        },
        root=0,
    )
    layout.free()
    if world.rank == 0:
        print(json.dumps(views))


if __name__ == "__main__":
    with guard():
        main()
