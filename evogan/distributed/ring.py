"""Asynchronous rings: each rank sends float32 payloads to its right-hand neighbour and takes
whatever its left-hand neighbour has delivered so far, never waiting for a slow neighbour.

Two transports with one interface (``send``, ``collect``, ``close``):

- :class:`AsyncRing` uses ``Isend`` and pre-posted ``Irecv`` completed with ``Testsome``
  (ARAR in SAGIPS). A send is skipped, not queued, while all send buffers are still in flight,
  so a stalled neighbour costs memory for ``depth`` payloads at most.
- :class:`RmaRing` accumulates payloads into the neighbour's RMA window under a passive-target
  lock (RMA-ARAR). The window memory comes from ``MPI.Win.Allocate`` rather than
  ``Win.Create`` on user memory: MPI can then expose it truly passively (Open MPI's ``osc/sm``
  on a node, RDMA between nodes), whereas a created window made writers wait until the slow
  target next entered MPI (3 s stalls measured with Open MPI 5).

Both are collective to create and to close, and each works on its own duplicate of the
communicator so its tags cannot match anyone else's messages. An :class:`AsyncRing`'s buffers
come from a :class:`PayloadMemory`: host numpy arrays by default, or device arrays (torch CUDA
tensors) that a CUDA-aware MPI reads and writes without a copy through host memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evogan.distributed.mpi import MPI
from evogan.distributed.tags import Tag


@dataclass
class RingCounts:
    """What a ring moved: payloads sent, received in time, skipped (neighbour busy), and
    received only while closing (too late to be used)."""

    sent: int = 0
    received: int = 0
    skipped: int = 0
    late: int = 0


def _nothing_queued() -> None:
    """Host memory: every write to it is done when the writing call returns."""


@dataclass(frozen=True)
class PayloadMemory:
    """Where a ring's payload buffers live.

    ``allocate(n)`` returns a contiguous float32 array of ``n`` values that mpi4py can pass to
    MPI (numpy, or a tensor through DLPack or the CUDA array interface), supporting ``a[...] =
    b`` and ``a += b``. ``synchronize()`` waits until queued device work on the buffers is done:
    MPI does not order itself with a GPU's streams, so a copy into a send buffer must finish
    before ``Isend`` and an add from a receive buffer before it is posted again.
    """

    allocate: Callable[[int], Any]
    synchronize: Callable[[], None] = _nothing_queued


HOST_MEMORY = PayloadMemory(lambda size: np.empty(size, np.float32))


class AsyncRing:
    """Non-blocking point-to-point ring over ``comm`` for payloads of ``size`` float32 values."""

    def __init__(
        self, comm: MPI.Comm, size: int, depth: int = 2, memory: PayloadMemory = HOST_MEMORY
    ) -> None:
        self.comm = comm.Dup()
        self.size = int(size)
        self.right = (self.comm.rank + 1) % self.comm.size
        self.left = (self.comm.rank - 1) % self.comm.size
        self.counts = RingCounts()
        self.active = self.comm.size > 1
        self.memory = memory
        self._send_buffers = [memory.allocate(self.size) for _ in range(depth)]
        self._send_requests = [MPI.REQUEST_NULL] * depth
        self._recv_buffers = [memory.allocate(self.size) for _ in range(depth)]
        self._recv_requests = [MPI.REQUEST_NULL] * depth
        if self.active:
            for slot in range(depth):
                self._post_receive(slot)

    def _post_receive(self, slot: int) -> None:
        self._recv_requests[slot] = self.comm.Irecv(
            self._recv_buffers[slot], source=self.left, tag=Tag.RING_PAYLOAD
        )

    def send(self, payload: Any) -> bool:
        """Start sending ``payload`` (copied); False when every send buffer is still in flight."""
        if not self.active:
            return False
        for slot, request in enumerate(self._send_requests):
            if request == MPI.REQUEST_NULL or request.Test():
                self._send_buffers[slot][...] = payload
                self.memory.synchronize()
                self._send_requests[slot] = self.comm.Isend(
                    self._send_buffers[slot], dest=self.right, tag=Tag.RING_PAYLOAD
                )
                self.counts.sent += 1
                return True
        self.counts.skipped += 1
        return False

    def collect(self, total: Any) -> int:
        """Add every payload that has arrived into ``total`` (an array of this ring's memory);
        returns how many were added."""
        if not self.active:
            return 0
        done = MPI.Request.Testsome(self._recv_requests) or []
        for slot in done:
            total += self._recv_buffers[slot]
        if done:
            self.memory.synchronize()
        for slot in done:
            self._post_receive(slot)
        self.counts.received += len(done)
        return len(done)

    def close(self) -> RingCounts:
        """Collective: receive what is still in flight (discarded), finish sends, free."""
        if self.active:
            sent = np.array([self.counts.sent], np.int64)
            announce = self.comm.Isend(sent, dest=self.right, tag=Tag.RING_COUNT)
            expected = np.zeros(1, np.int64)
            self.comm.Recv(expected, source=self.left, tag=Tag.RING_COUNT)
            outstanding = int(expected[0]) - self.counts.received
            slots = [s for s, r in enumerate(self._recv_requests) if r != MPI.REQUEST_NULL]
            while outstanding > 0:
                index = MPI.Request.Waitany([self._recv_requests[s] for s in slots])
                outstanding -= 1
                self.counts.late += 1
                if outstanding >= len(slots):
                    self._post_receive(slots[index])
                else:
                    slots.pop(index)
            for slot in slots:
                self._recv_requests[slot].Cancel()
            MPI.Request.Waitall(self._recv_requests)
            MPI.Request.Waitall(self._send_requests)
            announce.Wait()
        self.comm.Free()
        return self.counts


class RmaRing:
    """Ring whose payloads are accumulated into the right-hand neighbour's RMA window.

    The window holds ``size`` float32 sums followed by one float32 count; a writer adds its
    payload and 1, the owner reads sums and count and zeroes them, each under a lock held for
    one copy only, so nothing waits on a neighbour's computation.
    """

    def __init__(self, comm: MPI.Comm, size: int) -> None:
        self.comm = comm.Dup()
        self.size = int(size)
        self.rank = self.comm.rank
        self.right = (self.rank + 1) % self.comm.size
        self.counts = RingCounts()
        self.active = self.comm.size > 1
        itemsize = np.dtype(np.float32).itemsize
        window_bytes = (self.size + 1) * itemsize if self.active else 0
        self.window = MPI.Win.Allocate(window_bytes, itemsize, comm=self.comm)
        self._local = np.frombuffer(self.window.tomemory(), np.float32)
        self._outgoing = np.empty(self.size + 1, np.float32)
        if self.active:
            self.window.Lock(self.rank, MPI.LOCK_EXCLUSIVE)
            self._local[...] = 0.0
            self.window.Unlock(self.rank)
        self.comm.Barrier()

    def send(self, payload: np.ndarray) -> bool:
        """Add ``payload`` into the neighbour's window (a short passive-target epoch)."""
        if not self.active:
            return False
        self._outgoing[:-1] = payload
        self._outgoing[-1] = 1.0
        self.window.Lock(self.right, MPI.LOCK_SHARED)
        self.window.Accumulate(self._outgoing, self.right, op=MPI.SUM)
        self.window.Unlock(self.right)
        self.counts.sent += 1
        return True

    def _take(self, total: np.ndarray | None) -> int:
        self.window.Lock(self.rank, MPI.LOCK_EXCLUSIVE)
        self.window.Sync()
        count = round(float(self._local[-1]))
        if count:
            if total is not None:
                total += self._local[:-1]
            self._local[...] = 0.0
        self.window.Sync()
        self.window.Unlock(self.rank)
        return count

    def collect(self, total: np.ndarray) -> int:
        """Add the sum of payloads written since the last call into ``total``; returns count."""
        if not self.active:
            return 0
        count = self._take(total)
        self.counts.received += count
        return count

    def close(self) -> RingCounts:
        """Collective: wait until all writers are done, count what came too late, free."""
        self.comm.Barrier()
        if self.active:
            self.counts.late += self._take(None)
        self.window.Free()
        self.comm.Free()
        return self.counts
