"""Communicator layout, split once at start: world -> islands -> data-parallel groups.

Every component receives the communicator it may use; nothing reaches for COMM_WORLD itself.
A process started without mpirun is a world of one and takes exactly the same path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from evogan.distributed.mpi import MPI
from evogan.errors import EvoganError

GroupSize = int | Literal["node"] | None


def world_comm() -> MPI.Comm:
    """The world communicator (size 1 when started without mpirun)."""
    return MPI.COMM_WORLD


def host_name() -> str:
    """The node this rank runs on, as MPI names it (used in error lines and manifests)."""
    return MPI.Get_processor_name()


def node_position(world: MPI.Comm) -> tuple[int, int]:
    """This rank's index among the ranks of its node, and their number (collective)."""
    node = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.rank)
    position = node.rank, node.size
    node.Free()
    return position


@dataclass(frozen=True)
class Layout:
    """The communicators of one rank.

    ``group`` is the inner ring (data-parallel replicas that talk every step); ``leaders`` joins
    rank 0 of every group of the island (the outer ring) and is ``MPI.COMM_NULL`` elsewhere.
    """

    world: MPI.Comm
    island: MPI.Comm
    group: MPI.Comm
    leaders: MPI.Comm
    island_index: int
    group_index: int

    @property
    def is_leader(self) -> bool:
        return self.group.rank == 0

    @property
    def islands(self) -> int:
        return self.world.size // self.island.size

    def describe(self) -> dict[str, Any]:
        """The layout as seen from this rank (written into run manifests)."""
        return {
            "world_size": self.world.size,
            "islands": self.islands,
            "ranks_per_island": self.island.size,
            "island": self.island_index,
            "group": self.group_index,
            "group_size": self.group.size,
            "is_leader": self.is_leader,
            "host": host_name(),
        }

    def free(self) -> None:
        """Release the split communicators (never the world)."""
        for comm in (self.leaders, self.group, self.island):
            if comm != MPI.COMM_NULL and comm != self.world:
                comm.Free()


def check_layout(world_size: int, ranks_per_island: int | None, group_size: GroupSize) -> None:
    """Raise one clear line when the rank counts cannot be split; same answer on every rank."""
    per_island = world_size if ranks_per_island is None else ranks_per_island
    if per_island < 1 or world_size % per_island:
        raise EvoganError(
            f"the number of ranks must be a multiple of ranks_per_island; got {world_size} ranks "
            f"and ranks_per_island = {per_island} (run mpirun -n {per_island}, "
            f"{2 * per_island}, ... or change ranks_per_island)"
        )
    if isinstance(group_size, int) and (group_size < 1 or per_island % group_size):
        raise EvoganError(
            f"group_size must divide the ranks of an island; got group_size = {group_size} "
            f"with {per_island} ranks per island (use a divisor of {per_island})"
        )


def split_layout(
    world: MPI.Comm, ranks_per_island: int | None = None, group_size: GroupSize = None
) -> Layout:
    """Split ``world`` into islands of ``ranks_per_island`` consecutive ranks, each island into
    groups of ``group_size`` consecutive ranks ("node": the ranks sharing a node; None: the whole
    island), and join the group leaders of each island into the outer ring. Collective on world.
    """
    check_layout(world.size, ranks_per_island, group_size)
    per_island = world.size if ranks_per_island is None else ranks_per_island
    island_index = world.rank // per_island
    island = world.Split(color=island_index, key=world.rank)
    if group_size == "node":
        group = island.Split_type(MPI.COMM_TYPE_SHARED, key=island.rank)
        first = island.allgather(island.rank if group.rank == 0 else -1)
        group_index = sorted(r for r in first if r >= 0).index(group.bcast(island.rank, root=0))
    else:
        size = island.size if group_size is None else group_size
        group_index = island.rank // size
        group = island.Split(color=group_index, key=island.rank)
    color = 0 if group.rank == 0 else MPI.UNDEFINED
    leaders = island.Split(color=color, key=island.rank)
    return Layout(world, island, group, leaders, island_index, group_index)
