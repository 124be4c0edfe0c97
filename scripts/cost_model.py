"""Communication cost model of evogan's parallel modes, built from measured per-message costs.

A message of ``n`` bytes costs ``alpha + n * beta`` (Hockney's model: ``alpha`` the latency,
``beta`` the inverse bandwidth), measured by ping-pong; local copies cost ``copy`` and float32
sums ``add`` seconds per byte. From these and a measured compute time the functions below
predict what one unit of work (a generation, a training step) costs at ``P`` ranks, following
the messages the code actually sends (docs/explanation/scaling.md derives each formula):

- :func:`migration_generation`: island migration (:class:`evogan.islands.migration.Migration`)
  and the async stop agreement (:class:`evogan.distributed.signals.StopAgreement`);
- :func:`sync_step`: sync data parallelism (:class:`evogan.distributed.gradients.SyncAllreduce`,
  one ``Allreduce`` per bucket) plus the blocking stop round of every step;
- :func:`arar_step`: SAGIPS ARAR (:class:`evogan.distributed.gradients.RingExchange` over
  :class:`evogan.distributed.ring.AsyncRing`).

Sync's blocking exchanges also wait for the slowest rank: :func:`straggler_wait` charges the
expected maximum of ``P`` ranks' compute times over their mean, from the measured spread of a
rank's compute per step. :func:`fit_allreduce` fits the all-reduce's latency and bandwidth to
measured ``Allreduce`` times at several rank counts, where the ping-pong line underestimates
what the library's collective costs.

Not modelled: link contention, the network's topology, oversubscribed cores, and how far a
non-blocking message progresses behind compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

AGREEMENT_BYTES = 24
"""One stop-agreement round: three float64 values (stop flag, done flag, best value)."""
ALLREDUCE_ALGORITHMS = ("recursive_doubling", "ring", "rabenseifner")


@dataclass(frozen=True)
class Hockney:
    """Point-to-point cost ``alpha + n * beta`` seconds for ``n`` bytes."""

    alpha: float
    beta: float

    def seconds(self, nbytes: float) -> float:
        """Time of one message of ``nbytes`` bytes."""
        return self.alpha + nbytes * self.beta


@dataclass(frozen=True)
class LocalCosts:
    """Seconds per byte of a memory copy and of an in-place float32 sum on one core."""

    copy: float
    add: float


@dataclass(frozen=True)
class StepCost:
    """Compute and communication seconds of one unit of work (a generation or a step)."""

    compute: float
    comm: float

    @property
    def total(self) -> float:
        return self.compute + self.comm

    @property
    def share(self) -> float:
        """Communication per compute second (what the runs report as ``*_share``)."""
        return self.comm / self.compute if self.compute > 0 else math.inf

    @property
    def comm_fraction(self) -> float:
        """Communication as a fraction of the whole unit of work."""
        return self.comm / self.total if self.total > 0 else 0.0

    @property
    def efficiency(self) -> float:
        """Parallel efficiency at fixed work per rank: compute / (compute + communication)."""
        return self.compute / self.total if self.total > 0 else 0.0


def fit_hockney(sizes: Sequence[float], seconds: Sequence[float]) -> tuple[Hockney, float]:
    """Least-squares ``alpha`` and ``beta`` over ``(size, one-way seconds)`` pairs, in relative
    error (each point weighted by 1/seconds), so latency-bound small messages count as much as
    bandwidth-bound large ones. Returns the fit and its largest relative residual."""
    n = np.asarray(sizes, np.float64)
    t = np.asarray(seconds, np.float64)
    if n.shape != t.shape or n.size < 2:
        raise ValueError(f"fit_hockney needs >= 2 (size, seconds) pairs, got {n.size}")
    if (t <= 0).any():
        raise ValueError("fit_hockney needs positive times")
    design = np.stack([np.ones_like(n), n], axis=1) / t[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    fit = Hockney(max(float(alpha), 0.0), max(float(beta), 0.0))
    predicted = fit.alpha + n * fit.beta
    return fit, float(np.max(np.abs(predicted - t) / t))


def fit_allreduce(
    points: Sequence[tuple[int, float, float]], local: LocalCosts
) -> tuple[Hockney, float]:
    """The link (``alpha``, ``beta``) that makes :func:`allreduce_seconds`'s ``rabenseifner``
    form (2 log2 P latencies, 2 (P-1)/P n bytes) best match measured ``(ranks, bytes,
    seconds)`` points, in relative error as :func:`fit_hockney`. The collective's own
    software and synchronisation costs land in ``alpha``, so the fit extrapolates in P with
    the algorithm's growth rather than with a point-to-point line. Returns the fit and its
    largest relative residual."""
    if len(points) < 2:
        raise ValueError(
            f"fit_allreduce needs >= 2 (ranks, bytes, seconds) points, got {len(points)}"
        )
    ranks, n, t = (np.asarray(column, np.float64) for column in zip(*points, strict=True))
    if (ranks < 2).any() or (t <= 0).any():
        raise ValueError("fit_allreduce needs >= 2 ranks and positive times in every point")
    rounds = np.ceil(np.log2(ranks))
    volume = (ranks - 1) / ranks * n
    design = np.stack([2 * rounds, 2 * volume], axis=1) / t[:, None]
    target = (t - volume * local.add) / t
    (alpha, beta), *_ = np.linalg.lstsq(design, target, rcond=None)
    fit = Hockney(max(float(alpha), 0.0), max(float(beta), 0.0))
    predicted = 2 * rounds * fit.alpha + volume * (2 * fit.beta + local.add)
    return fit, float(np.max(np.abs(predicted - t) / t))


def expected_max_normal(count: int) -> float:
    """E[max of ``count`` independent standard normals] (0 for one; 0.564 for two, 1.03 for
    four, 3.25 for 1,024), by quadrature of ``count * x * phi(x) * Phi(x)^(count-1)``."""
    if count < 1:
        raise ValueError(f"expected_max_normal needs count >= 1, got {count}")
    if count == 1:
        return 0.0
    x = np.linspace(-12.0, 12.0, 48_001)
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    half_step = (x[1] - x[0]) / 2
    cdf = np.concatenate([[0.0], np.cumsum(pdf[1:] + pdf[:-1]) * half_step])
    density = count * x * pdf * np.clip(cdf, 0.0, 1.0) ** (count - 1)
    return float(np.sum(density[1:] + density[:-1]) * half_step)


def straggler_wait(compute_spread_s: float, ranks: int, barriers: int) -> float:
    """Seconds a rank waits per step at ``barriers`` blocking exchanges for the slowest of
    ``ranks`` ranks: the step's compute variance (standard deviation ``compute_spread_s``
    across ranks at the same step) split evenly over the segments between barriers, each segment's
    wait the expected maximum of ``ranks`` normal draws above their mean."""
    if ranks < 2 or barriers < 1 or compute_spread_s <= 0:
        return 0.0
    return math.sqrt(barriers) * compute_spread_s * expected_max_normal(ranks)


def allreduce_seconds(
    nbytes: float,
    ranks: int,
    link: Hockney,
    local: LocalCosts,
    algorithm: str = "auto",
) -> float:
    """Time of one ``MPI_Allreduce`` (sum) of ``nbytes`` over ``ranks`` ranks.

    ``recursive_doubling``: ceil(log2 P) rounds of the whole vector; ``ring``: reduce-scatter
    then allgather around a ring, 2(P-1) messages of n/P; ``rabenseifner``: the same volume in
    2 log2 P halving/doubling rounds. ``auto`` is the cheapest of the three, i.e. a library
    whose tuned decision picks the best algorithm for the size (an optimistic envelope).
    """
    if ranks < 2:
        return 0.0
    p = float(ranks)
    rounds = math.ceil(math.log2(p))
    if algorithm == "recursive_doubling":
        return rounds * (link.alpha + nbytes * (link.beta + local.add))
    if algorithm == "ring":
        return 2 * (p - 1) * link.alpha + (p - 1) / p * nbytes * (2 * link.beta + local.add)
    if algorithm == "rabenseifner":
        return 2 * rounds * link.alpha + (p - 1) / p * nbytes * (2 * link.beta + local.add)
    if algorithm == "auto":
        return min(
            allreduce_seconds(nbytes, ranks, link, local, name) for name in ALLREDUCE_ALGORITHMS
        )
    raise ValueError(
        f"allreduce algorithm {algorithm!r} is unknown; known: auto, "
        f"{', '.join(ALLREDUCE_ALGORITHMS)}"
    )


def buckets(nbytes: int, bucket_bytes: int) -> list[int]:
    """Sizes of the fused buckets :class:`~evogan.distributed.gradients.FlatBuffer` cuts a
    float32 buffer of ``nbytes`` into (``trainer.bucket_mb``)."""
    step = max(4, bucket_bytes // 4 * 4)
    return [min(step, nbytes - lo) for lo in range(0, nbytes, step)]


def sync_exchange_seconds(
    nbytes: int,
    ranks: int,
    link: Hockney,
    local: LocalCosts,
    bucket_bytes: int,
    algorithm: str = "auto",
) -> float:
    """One :class:`SyncAllreduce` exchange of a network's ``nbytes`` of gradients: copy in,
    one allreduce per bucket, copy back with the 1/P scale (a copy plus a multiply)."""
    local_s = nbytes * (2 * local.copy + local.add)
    if ranks < 2:
        return local_s
    reduce_s = sum(
        allreduce_seconds(b, ranks, link, local, algorithm) for b in buckets(nbytes, bucket_bytes)
    )
    return local_s + reduce_s


def sync_step(
    compute_s: float,
    generator_bytes: int,
    discriminator_bytes: int,
    generator_steps: int,
    ranks: int,
    link: Hockney,
    local: LocalCosts,
    bucket_bytes: int = 4 << 20,
    agreement: bool = True,
    algorithm: str = "auto",
    compute_spread_s: float = 0.0,
) -> StepCost:
    """A sync training step: one discriminator exchange, ``generator_steps`` generator
    exchanges, and (``agreement``) the blocking stop round the trainer runs after every step;
    with ``compute_spread_s`` (a rank's compute per step, standard deviation) each exchange
    also waits for the slowest rank (:func:`straggler_wait`)."""
    comm = straggler_wait(compute_spread_s, ranks, 1 + generator_steps)
    comm += sync_exchange_seconds(discriminator_bytes, ranks, link, local, bucket_bytes, algorithm)
    comm += generator_steps * sync_exchange_seconds(
        generator_bytes, ranks, link, local, bucket_bytes, algorithm
    )
    if agreement:
        comm += allreduce_seconds(AGREEMENT_BYTES, ranks, link, local, "recursive_doubling")
    return StepCost(compute_s, comm)


def arar_update_seconds(
    nbytes: int,
    link: Hockney,
    local: LocalCosts,
    arrived: float = 1.0,
    outer_sends: float = 0.0,
    outer_arrived: float = 0.0,
) -> float:
    """One generator update of :class:`RingExchange`: gather the gradient, copy it into the
    running total and into a send buffer, add what ``arrived`` (per update, inner ring), divide,
    scatter back, and one message of ``nbytes`` to the right-hand neighbour, charged in full
    (an upper bound: with asynchronous progress the transfer hides behind compute). A group
    leader also adds ``outer_arrived`` outer-ring payloads and sends ``outer_sends``."""
    copies = 4 + outer_sends
    adds = 1 + arrived + outer_arrived
    return nbytes * (copies * local.copy + adds * local.add) + (1 + outer_sends) * link.seconds(
        nbytes
    )


def arar_step(
    compute_s: float,
    generator_bytes: int,
    generator_steps: int,
    ranks: int,
    link: Hockney,
    local: LocalCosts,
    outer_sends_per_step: float = 0.0,
    software_s: float = 0.0,
) -> StepCost:
    """An ARAR training step: ``generator_steps`` ring updates (discriminators stay local).

    The per-rank cost does not depend on ``ranks`` beyond 1 (one neighbour each way); the
    async stop agreement's ``Iallreduce`` is started and tested, never waited for, and is
    charged as one small recursive-doubling round per step (an upper bound).
    ``outer_sends_per_step`` is a group leader's outer-ring feed (1 / steps per
    ``outer_every`` epochs), whose payloads it also receives at that rate. ``software_s`` is
    the Python work of one update (polling and request bookkeeping; measured, not modelled).
    """
    if ranks < 2:
        return StepCost(compute_s, 0.0)
    outer = outer_sends_per_step / generator_steps
    update = arar_update_seconds(
        generator_bytes, link, local, 1.0, outer_sends=outer, outer_arrived=outer
    )
    comm = generator_steps * (update + software_s)
    comm += allreduce_seconds(AGREEMENT_BYTES, ranks, link, local, "recursive_doubling")
    return StepCost(compute_s, comm)


def migrant_messages(topology: str, ranks: int) -> int:
    """Messages one island sends (and, on average, receives) per migration."""
    if ranks < 2:
        return 0
    if topology in ("ring", "random"):
        return 1
    if topology == "full":
        return ranks - 1
    raise ValueError(f"topology {topology!r} is not modelled; modelled: ring, random, full")


def migration_generation(
    generation_s: float,
    interval: int,
    migrant_bytes: int,
    ranks: int,
    link: Hockney,
    local: LocalCosts,
    software_s: float,
    topology: str = "ring",
    poll_seconds: float = 1.0,
) -> StepCost:
    """Per-generation overhead of an island (one rank per island) at ``ranks`` islands.

    Every ``interval`` generations the island sends ``migrant_messages`` pickled messages of
    ``migrant_bytes`` and receives as many (each charged ``alpha + m * beta``) and spends
    ``software_s`` per message in Python (choose emigrants, encode lineages, decode and replay
    immigrants; measured, not modelled). The async stop agreement is polled at most every
    ``interval`` generations and every ``poll_seconds``, each poll charged one small
    recursive-doubling round (it is non-blocking: an upper bound).
    """
    if ranks < 2:
        return StepCost(generation_s, 0.0)
    messages = migrant_messages(topology, ranks)
    per_migration = messages * (2 * link.seconds(migrant_bytes) + software_s)
    polls_per_generation = generation_s / max(interval * generation_s, poll_seconds)
    agreement = allreduce_seconds(AGREEMENT_BYTES, ranks, link, local, "recursive_doubling")
    return StepCost(generation_s, per_migration / interval + polls_per_generation * agreement)
