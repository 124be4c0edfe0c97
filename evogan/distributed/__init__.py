"""The mpi4py layer: communicator layout, asynchronous rings, tags, failure propagation, and the
data-parallel gradient exchanges over any list of torch parameters (``gradients``: sync
all-reduce, SAGIPS ARAR rings; ``overlap``: the sync average started from gradient hooks).

Names that need MPI are imported on first use, so importing :mod:`evogan.distributed.failure`
(as the CLI does for every command) does not start MPI in single-process commands.
"""

from __future__ import annotations

from evogan.distributed.failure import guard, rank0_decides, run_guarded
from evogan.distributed.tags import Tag
from evogan.lazy import lazy_names

_LAZY = {
    "Layout": ".comm",
    "check_layout": ".comm",
    "host_name": ".comm",
    "split_layout": ".comm",
    "world_comm": ".comm",
    "AsyncRing": ".ring",
    "RingCounts": ".ring",
    "RmaRing": ".ring",
}

__all__ = [
    "AsyncRing",
    "Layout",
    "RingCounts",
    "RmaRing",
    "Tag",
    "check_layout",
    "guard",
    "host_name",
    "rank0_decides",
    "run_guarded",
    "split_layout",
    "world_comm",
]


__getattr__ = lazy_names(__name__, _LAZY)
