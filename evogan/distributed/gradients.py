"""Gradient exchange between data-parallel ranks, over any list of torch parameters.

Two strategies behind one small interface (:class:`GradientExchange`, whose ``exchange()`` owns
the wall-clock timing and calls the strategy's ``_exchange``):

- :class:`SyncAllreduce`: replicas start identical (:func:`broadcast_parameters`) and every step
  their gradients are averaged with ``Allreduce`` over fused, contiguous float32 buckets, so all
  replicas stay bit-identical (Horovod-style synchronous data parallelism).
- :class:`RingExchange`: SAGIPS asynchronous ring-all-reduce (ARAR). Each step a rank sends its
  own gradient to the right-hand neighbour of its inner ring and averages its gradient with
  whatever has arrived from the left (never waiting); with grouping, the group leaders also form
  an outer ring that is fed, every ``outer_every`` epochs, with the leader's group-averaged
  gradient, and drained every step. ``rma=True`` moves the inner ring into RMA windows.
- :class:`~evogan.distributed.overlap.OverlappedAllreduce`: the sync average over a gloo or NCCL
  group, started bucket by bucket during the backward pass.

The exchange replaces ``p.grad`` in place; the optimizer step stays with the caller.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from evogan.distributed.comm import Layout
from evogan.distributed.mpi import MPI
from evogan.distributed.ring import (
    HOST_MEMORY,
    AsyncRing,
    PayloadMemory,
    RingCounts,
    RmaRing,
)

DEFAULT_BUCKET_BYTES = 4 << 20


def broadcast_parameters(comm: MPI.Comm, params: Iterable[torch.Tensor], root: int = 0) -> None:
    """Make every rank's parameters equal to ``root``'s (one fused broadcast)."""
    flat = FlatBuffer(list(params))
    if comm.rank == root:
        flat.gather_values()
    comm.Bcast(flat.buffer, root=root)
    flat.scatter_values(flat.buffer)


def average_tensors(comm: MPI.Comm, tensors: Iterable[torch.Tensor]) -> None:
    """Replace each tensor by its mean over ``comm`` (e.g. batch-norm running statistics)."""
    tensors = list(tensors)
    if not tensors or comm.size == 1:
        return
    flat = FlatBuffer(tensors)
    comm.Allreduce(MPI.IN_PLACE, flat.gather_values(), op=MPI.SUM)
    flat.scatter_values(flat.buffer, 1.0 / comm.size)


class FlatBuffer:
    """One contiguous float32 buffer laid over ``tensors`` back to back: their gradients (or
    values) are copied in, communicated as one message per bucket, and copied back. The buffer
    is a host numpy array, or with ``device`` a torch tensor there (for device-buffer rings)."""

    def __init__(self, tensors: list[torch.Tensor], device: str | None = None) -> None:
        if not tensors:
            raise ValueError("a gradient exchange needs at least one tensor")
        self.tensors = tensors
        self.spans: list[tuple[int, int]] = []
        offset = 0
        for tensor in tensors:
            self.spans.append((offset, offset + tensor.numel()))
            offset += tensor.numel()
        self.numel = offset
        self.buffer: Any
        if device is None:
            self.buffer = np.zeros(self.numel, np.float32)
            self._flat = torch.from_numpy(self.buffer)
        else:
            self.buffer = self._flat = torch.zeros(self.numel, device=device)

    def _pairs(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for tensor, (lo, hi) in zip(self.tensors, self.spans, strict=True):
            yield tensor, self._flat[lo:hi]

    def gather_grads(self) -> Any:
        """Copy every gradient into the buffer (a missing gradient counts as zero)."""
        for tensor, part in self._pairs():
            if tensor.grad is None:
                part.zero_()
            else:
                part.copy_(tensor.grad.reshape(-1))
        return self.buffer

    def scatter_grads(self, values: Any, scale: float = 1.0) -> None:
        """Write ``values * scale`` (a numpy array or a tensor) into the gradients."""
        source = torch.as_tensor(values)
        for tensor, (lo, hi) in zip(self.tensors, self.spans, strict=True):
            grad = source[lo:hi].view_as(tensor)
            if tensor.grad is None:
                tensor.grad = grad.to(tensor.device, tensor.dtype) * scale
            else:
                tensor.grad.copy_(grad).mul_(scale)

    def gather_values(self) -> np.ndarray:
        with torch.no_grad():
            for tensor, part in self._pairs():
                part.copy_(tensor.reshape(-1))
        return self.buffer

    def scatter_values(self, values: np.ndarray, scale: float = 1.0) -> None:
        source = torch.from_numpy(values)
        with torch.no_grad():
            for tensor, (lo, hi) in zip(self.tensors, self.spans, strict=True):
                tensor.copy_(source[lo:hi].view_as(tensor) * scale)

    def buckets(self, bucket_bytes: int) -> list[np.ndarray]:
        """Views of the buffer of at most ``bucket_bytes`` each (tensors may straddle two)."""
        step = max(1, bucket_bytes // self.buffer.itemsize)
        return [self.buffer[lo : lo + step] for lo in range(0, self.numel, step)]


@dataclass
class ExchangeStats:
    """Counters of one exchange, for metrics: seconds inside exchange(), calls, and ring
    traffic (payloads sent, received in time, skipped because the neighbour was busy, and
    received only at close), for the inner ring and the outer ring of group leaders."""

    seconds: float = 0.0
    calls: int = 0
    sent: int = 0
    received: int = 0
    skipped: int = 0
    late: int = 0
    outer_sent: int = 0
    outer_received: int = 0
    outer_skipped: int = 0
    outer_late: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class GradientExchange(ABC):
    """Base class: owns timing and counters; a strategy implements :meth:`_exchange`."""

    def __init__(self) -> None:
        self.stats = ExchangeStats()

    def exchange(self, outer: bool = False) -> float:
        """Combine this rank's gradients with its peers'; returns the seconds it took.

        ``outer`` marks the steps on which group leaders feed the outer ring (ignored by
        strategies without one).
        """
        start = time.perf_counter()
        self._exchange(outer)
        seconds = time.perf_counter() - start
        self.stats.seconds += seconds
        self.stats.calls += 1
        return seconds

    @abstractmethod
    def _exchange(self, outer: bool) -> None:
        """Replace the parameters' gradients by the combined gradients."""

    def close(self) -> ExchangeStats:
        """Collective: finish outstanding communication; returns the final counters."""
        return self.stats


class SyncAllreduce(GradientExchange):
    """Average gradients over ``comm`` with one ``Allreduce`` per fused bucket."""

    def __init__(
        self,
        comm: MPI.Comm,
        params: Iterable[torch.Tensor],
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    ) -> None:
        super().__init__()
        self.flat = FlatBuffer(list(params))
        self.comm = comm
        self._buckets = self.flat.buckets(bucket_bytes)

    def _exchange(self, outer: bool) -> None:
        if self.comm.size == 1:
            return  # the average over one rank is its own gradient: no copy through the host
        self.flat.gather_grads()
        for bucket in self._buckets:
            self.comm.Allreduce(MPI.IN_PLACE, bucket, op=MPI.SUM)
        self.flat.scatter_grads(self.flat.buffer, 1.0 / self.comm.size)


def device_memory(device: str) -> PayloadMemory:
    """Ring payload buffers as torch tensors on ``device``, handed to MPI without a host copy
    (on a GPU this needs a CUDA-aware MPI; on the CPU they are host memory seen through
    DLPack)."""
    where = torch.device(device)

    def allocate(size: int) -> torch.Tensor:
        return torch.zeros(size, device=where)

    if where.type == "cuda":
        return PayloadMemory(allocate, lambda: torch.cuda.current_stream(where).synchronize())
    return PayloadMemory(allocate)


class RingExchange(GradientExchange):
    """SAGIPS ARAR (optionally RMA-ARAR for the inner ring) over a :class:`Layout`'s rings.

    ``device``: the rings' buffers are torch tensors there (:func:`device_memory`) instead of
    host numpy arrays; RMA windows are host memory, so not with ``rma``.
    """

    def __init__(
        self,
        layout: Layout,
        params: Iterable[torch.Tensor],
        rma: bool = False,
        depth: int = 2,
        device: str | None = None,
    ) -> None:
        super().__init__()
        if rma and device is not None:
            raise ValueError("RMA windows are host memory: a device-buffer ring needs rma=False")
        self.flat = FlatBuffer(list(params), device)
        size = self.flat.numel
        memory = HOST_MEMORY if device is None else device_memory(device)
        self.inner: AsyncRing | RmaRing = (
            RmaRing(layout.group, size) if rma else AsyncRing(layout.group, size, depth, memory)
        )
        self.outer = AsyncRing(layout.leaders, size, depth, memory) if layout.is_leader else None
        self._total = memory.allocate(size)

    def _exchange(self, outer: bool) -> None:
        own = self.flat.gather_grads()
        total = self._total
        total[...] = own
        arrived = self.inner.collect(total)
        if self.outer is not None:
            arrived += self.outer.collect(total)
        self.inner.send(own)
        total /= 1 + arrived
        if outer and self.outer is not None:
            self.outer.send(total)
        self.flat.scatter_grads(total)
        self._count(self.inner.counts, self.outer.counts if self.outer else RingCounts())

    def close(self) -> ExchangeStats:
        inner = self.inner.close()
        outer = self.outer.close() if self.outer is not None else RingCounts()
        self._count(inner, outer)
        return self.stats

    def _count(self, inner: RingCounts, outer: RingCounts) -> None:
        stats = self.stats
        stats.sent, stats.received, stats.skipped, stats.late = (
            inner.sent,
            inner.received,
            inner.skipped,
            inner.late,
        )
        stats.outer_sent, stats.outer_received, stats.outer_skipped, stats.outer_late = (
            outer.sent,
            outer.received,
            outer.skipped,
            outer.late,
        )
