"""A torch.distributed process group (gloo or NCCL) made from an MPI communicator.

Rank and size come from the communicator; rank 0 opens a ``TCPStore`` on a free port and
broadcasts its address over MPI, so no launcher and no ``MASTER_ADDR``/``MASTER_PORT`` are
needed. The group is a backend object of its own (``ProcessGroupGloo``/``ProcessGroupNCCL``),
not torch's default group: a pruned architecture search keeps several trainings open at once in
one process, each with its own communicator, and torch allows one default group per process.
"""

from __future__ import annotations

import datetime
import socket
from typing import Any

import torch

from evogan.distributed.mpi import MPI
from evogan.errors import EvoganError

TIMEOUT = datetime.timedelta(minutes=30)
"""How long a collective may wait for its peers before it fails (torch's default)."""

LOOPBACK = "127.0.0.1"


def backend_available(backend: str) -> bool:
    """Whether this torch build has ``backend`` ("gloo" or "nccl")."""
    from torch import distributed as dist

    if not dist.is_available():
        return False
    return dist.is_nccl_available() if backend == "nccl" else dist.is_gloo_available()


def rendezvous_host(comm: MPI.Comm) -> str:
    """The address every rank reaches rank 0's store at (collective): loopback when all ranks
    share rank 0's node, else rank 0's first non-loopback IPv4 address (its host name when it
    has none)."""
    names = comm.allgather(MPI.Get_processor_name())
    if all(name == names[0] for name in names):
        return LOOPBACK
    address = None
    if comm.rank == 0:
        name = socket.gethostname()
        found = {info[4][0] for info in socket.getaddrinfo(name, None, socket.AF_INET)}
        routable = sorted(a for a in found if not a.startswith("127."))
        address = routable[0] if routable else name
    return comm.bcast(address, root=0)


class TorchGroup:
    """A gloo or NCCL process group over the ranks of ``comm`` (same ranks, same order).

    Opening is collective on ``comm``; :meth:`close` is local and safe to call twice, so the
    trainer can release the group after an error without meeting its peers."""

    def __init__(self, comm: MPI.Comm, backend: str, device: str | torch.device = "cpu") -> None:
        from torch import distributed as dist

        if not backend_available(backend):
            raise EvoganError(f"this torch ({torch.__version__}) has no {backend} backend")
        self.backend, self.rank, self.size = backend, comm.rank, comm.size
        host = rendezvous_host(comm)
        store, port, problem = None, 0, None
        if comm.rank == 0:
            try:  # port 0: the store binds a free port and reports it
                store = dist.TCPStore(host, 0, comm.size, True, TIMEOUT, wait_for_workers=False)
                port = store.port
            except (RuntimeError, OSError) as exc:
                problem = f"cannot open a TCPStore on {host}: {exc}"
        port, problem = comm.bcast((port, problem), root=0)
        if problem is not None:
            raise EvoganError(f"trainer.backend = {backend!r}: {problem}")
        if comm.rank != 0:
            store = dist.TCPStore(host, port, comm.size, False, TIMEOUT)
        self.store = store
        prefixed = dist.PrefixStore(f"evogan-{backend}", store)
        self.group: Any = self._backend(prefixed, torch.device(device))
        self._open = True

    def _backend(self, store: Any, device: torch.device) -> Any:
        from torch import distributed as dist

        if self.backend == "gloo":
            return dist.ProcessGroupGloo(store, self.rank, self.size, TIMEOUT)
        torch.cuda.set_device(device)  # NCCL reduces on the current device of each rank
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = TIMEOUT
        return dist.ProcessGroupNCCL(store, self.rank, self.size, options)

    def allreduce(self, tensor: torch.Tensor) -> Any:
        """Start summing ``tensor`` in place over the group; returns the work to ``wait()`` on."""
        return self.group.allreduce([tensor])

    def close(self) -> None:
        """Shut the group down and drop the store (local; once)."""
        if self._open:
            self._open = False
            self.group.shutdown()
            self.group = self.store = None
