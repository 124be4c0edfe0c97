"""Sync mode's MPI all-reduce started bucket by bucket during the backward pass.

:class:`MpiGroup` has the interface of :class:`~evogan.distributed.torch_group.TorchGroup`
(``size``, ``allreduce`` returning work to ``wait()`` on, ``close``) over an MPI communicator,
so :class:`~evogan.distributed.overlap.OverlappedAllreduce` overlaps the CPU path without a gloo
group: each bucket is one non-blocking ``Iallreduce`` on its contiguous host tensor (mpi4py
reads torch tensors through DLPack). MPI libraries progress non-blocking collectives mostly
inside MPI calls, so every start also tests the all-reduces still in flight.
"""

from __future__ import annotations

from typing import Any

from evogan.distributed.mpi import MPI


class MpiWork:
    """One started ``Iallreduce``."""

    def __init__(self, request: MPI.Request) -> None:
        self.request = request

    def wait(self) -> None:
        self.request.Wait()


class MpiGroup:
    """Non-blocking sums over a private duplicate of ``comm`` (collective to open)."""

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm: MPI.Comm | None = comm.Dup()
        self.rank, self.size = comm.rank, comm.size
        self._in_flight: list[MPI.Request] = []

    def allreduce(self, tensor: Any) -> MpiWork:
        """Start summing ``tensor`` (contiguous, float32, host memory) in place over the group."""
        if self.comm is None:
            raise RuntimeError("this MPI group is closed")
        self._in_flight = [r for r in self._in_flight if r != MPI.REQUEST_NULL]
        if self._in_flight:
            MPI.Request.Testall(self._in_flight)  # lets MPI progress the earlier buckets
        request = self.comm.Iallreduce(MPI.IN_PLACE, tensor, op=MPI.SUM)
        self._in_flight.append(request)
        return MpiWork(request)

    def close(self) -> None:
        """Free the communicator (local; once). Started all-reduces must have been waited for."""
        if self.comm is not None:
            self.comm.Free()
            self.comm = None
