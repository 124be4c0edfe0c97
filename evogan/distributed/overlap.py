"""Sync gradient averaging over a torch.distributed group (or an
:class:`~evogan.distributed.mpi_group.MpiGroup`), overlapped with the backward pass.

Every parameter gets a ``register_post_accumulate_grad_hook``: when autograd has finished its
gradient, the hook copies it into its bucket (parameters in reverse order, as backward produces
them, about ``bucket_bytes`` per bucket); a full bucket starts a non-blocking all-reduce while
backward goes on with earlier layers. Buckets start strictly in index order, so every rank
issues the same collectives in the same order whatever order its hooks fire in (as PyTorch
DDP's reducer does). :meth:`exchange` after the backward pass starts what is left (a parameter
without a gradient counts as zero, as in :class:`~evogan.distributed.gradients.SyncAllreduce`),
waits, scales by 1/ranks and writes the averages into ``.grad``; its measured seconds are the
communication the backward pass did not hide.

Why hooks and not ``DistributedDataParallel``: the GAN step runs the discriminator twice (real
and generated batch) before one backward, freezes it during generator updates and keeps each
rank's batch-norm statistics; DDP expects one forward per backward, the same trainable set
every iteration, and broadcasts buffers. The hooks need none of that: they only see finished
gradients, whichever forward passes made them. Summation is the same as SyncAllreduce's (one
sum per element, then the scale), so two ranks give bit-identical results to the MPI path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from evogan.distributed.gradients import DEFAULT_BUCKET_BYTES, ExchangeStats, GradientExchange
from evogan.distributed.mpi_group import MpiGroup
from evogan.distributed.torch_group import TorchGroup


@dataclass
class Bucket:
    """One flat float32 buffer over some parameters; ``waiting`` counts gradients to come."""

    params: list[torch.Tensor]
    spans: list[tuple[int, int]]
    flat: torch.Tensor
    waiting: int = 0
    work: Any = None
    arrived: set[int] = field(default_factory=set)

    def reset(self) -> None:
        self.waiting, self.work = len(self.params), None
        self.arrived.clear()


def make_buckets(params: list[torch.Tensor], bucket_bytes: int) -> list[Bucket]:
    """Buckets over ``params`` in reverse order, each closed once it holds ``bucket_bytes``."""
    buckets: list[Bucket] = []
    group: list[torch.Tensor] = []
    size = 0
    for param in reversed(params):
        group.append(param)
        size += param.numel() * 4
        if size >= bucket_bytes:
            buckets.append(_bucket(group))
            group, size = [], 0
    if group:
        buckets.append(_bucket(group))
    return buckets


def _bucket(params: list[torch.Tensor]) -> Bucket:
    spans, offset = [], 0
    for param in params:
        spans.append((offset, offset + param.numel()))
        offset += param.numel()
    flat = torch.zeros(offset, dtype=torch.float32, device=params[0].device)
    bucket = Bucket(list(params), spans, flat)
    bucket.reset()
    return bucket


class OverlappedAllreduce(GradientExchange):
    """Average gradients over ``group``, started from gradient hooks (see the module docstring)."""

    def __init__(
        self,
        group: TorchGroup | MpiGroup,
        params: Iterable[torch.Tensor],
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    ) -> None:
        super().__init__()
        params = list(params)
        if not params:
            raise ValueError("a gradient exchange needs at least one tensor")
        self.group = group
        self.buckets = make_buckets(params, bucket_bytes)
        self._where: dict[int, tuple[Bucket, int]] = {}
        for bucket in self.buckets:
            for index, param in enumerate(bucket.params):
                self._where[id(param)] = (bucket, index)
        self._next = 0  # first bucket not started yet
        self.started_in_backward = 0  # buckets started by hooks, i.e. overlapped with backward
        self._hooks = [p.register_post_accumulate_grad_hook(self._ready) for p in params]

    def _ready(self, param: torch.Tensor) -> None:
        bucket, index = self._where[id(param)]
        if index in bucket.arrived:
            raise RuntimeError(
                "a gradient was accumulated twice between two exchanges; call exchange() after "
                "every backward pass"
            )
        lo, hi = bucket.spans[index]
        bucket.flat[lo:hi].copy_(param.grad.detach().reshape(-1))
        bucket.arrived.add(index)
        bucket.waiting -= 1
        while self._next < len(self.buckets) and self.buckets[self._next].waiting == 0:
            self._start(self.buckets[self._next])
            self.started_in_backward += 1

    def _start(self, bucket: Bucket) -> None:
        bucket.work = self.group.allreduce(bucket.flat)
        self._next += 1

    def _exchange(self, outer: bool) -> None:
        for bucket in self.buckets[self._next :]:
            for index, (lo, hi) in enumerate(bucket.spans):
                if index not in bucket.arrived:
                    bucket.flat[lo:hi].zero_()
            self._start(bucket)
        scale = 1.0 / self.group.size
        for bucket in self.buckets:
            bucket.work.wait()
            bucket.flat.mul_(scale)
            for param, (lo, hi) in zip(bucket.params, bucket.spans, strict=True):
                average = bucket.flat[lo:hi].view_as(param)
                if param.grad is None:
                    param.grad = average.clone()
                else:
                    param.grad.copy_(average)
            bucket.reset()
        self._next = 0

    def close(self) -> ExchangeStats:
        """Remove the gradient hooks (the group itself belongs to the caller)."""
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        return self.stats
