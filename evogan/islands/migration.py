"""Who sends migrants to whom, how immigrants enter an island, and how they travel over MPI.

Topologies are plain functions ``(island, islands, rng) -> {destination: migrant count}``,
generic over what a migrant is (weight genomes, lineages, architecture records), as DEAP's
``migRing`` semantics but with our own random generator. :func:`make_topology` builds one from
the config; :func:`count_matrix` evaluates it for every island with one shared generator, so in
``sync`` mode every island knows who sends to it without asking.

Immigration policies are plain functions ``(candidates, immigrants) -> candidates`` over any
items (an island passes row numbers): :func:`compete` adds the immigrants to the candidates,
:func:`replace_last` gives them the places of the last candidates (in a (1+lambda) island the
untested children), never the first (the elite). :func:`make_policy` picks one by config name.

:class:`Migration` moves pickled payloads between island leaders: ``async`` uses ``isend`` and
takes only what has arrived (``improbe``), never waiting for a neighbour; ``sync`` exchanges
along the count matrix of the generation with blocking receives, so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from evogan.errors import ConfigError, EvoganError

Topology = Callable[[int, int, np.random.Generator], dict[int, int]]
"""``(island, islands, rng) -> {destination island: number of migrants}``."""
Policy = Callable[[list[Any], list[Any]], list[Any]]
"""``(candidates, immigrants) -> the candidates of the generation``."""

TOPOLOGIES = ("ring", "random", "full", "matrix")


def ring(island: int, islands: int, rng: np.random.Generator, k: int = 1) -> dict[int, int]:
    """``k`` migrants to the right-hand neighbour (DEAP's migRing); nobody when alone."""
    del rng
    return {} if islands < 2 else {(island + 1) % islands: k}


def random_neighbour(
    island: int, islands: int, rng: np.random.Generator, k: int = 1
) -> dict[int, int]:
    """``k`` migrants to one other island drawn uniformly from ``rng``."""
    if islands < 2:
        return {}
    other = int(rng.integers(islands - 1))
    return {other + (other >= island): k}


def fully_connected(
    island: int, islands: int, rng: np.random.Generator, k: int = 1
) -> dict[int, int]:
    """``k`` migrants to every other island."""
    del rng
    return {other: k for other in range(islands) if other != island}


def matrix_topology(counts: Sequence[Sequence[int]]) -> Topology:
    """Explicit N x N migrant counts: row i says how many migrants island i sends to each j."""
    rows = [len(row) for row in counts]
    if any(length != len(rows) for length in rows):
        raise ConfigError(f"migration.matrix must be square (N x N), got row lengths {rows}")
    table = np.asarray(counts, dtype=np.int64).reshape(len(rows), len(rows))
    if (table < 0).any():
        raise ConfigError("migration.matrix entries must be >= 0 migrant counts, got a negative")
    if np.diag(table).any():
        raise ConfigError("migration.matrix diagonal must be 0 (an island cannot send to itself)")

    def topology(island: int, islands: int, rng: np.random.Generator) -> dict[int, int]:
        del rng
        if islands != table.shape[0]:
            raise ConfigError(
                f"migration.matrix is {table.shape[0]} x {table.shape[0]} but the run has "
                f"{islands} islands; give an {islands} x {islands} matrix"
            )
        return {int(j): int(c) for j, c in enumerate(table[island]) if c > 0}

    return topology


def make_topology(
    kind: str, migrants: int = 1, matrix: Sequence[Sequence[int]] | None = None
) -> Topology:
    """Topology by config name (``ring``, ``random``, ``full``, ``matrix``)."""
    if migrants < 1:
        raise ConfigError(f"migration.migrants must be at least 1 migrant, got {migrants}")
    if kind == "ring":
        return lambda island, islands, rng: ring(island, islands, rng, migrants)
    if kind == "random":
        return lambda island, islands, rng: random_neighbour(island, islands, rng, migrants)
    if kind == "full":
        return lambda island, islands, rng: fully_connected(island, islands, rng, migrants)
    if kind == "matrix":
        if matrix is None:
            raise ConfigError("migration.topology = 'matrix' needs migration.matrix (N x N counts)")
        return matrix_topology(matrix)
    raise ConfigError(
        f"migration.topology = {kind!r} is not allowed; allowed: {', '.join(TOPOLOGIES)}"
    )


def check_matrix(matrix: Sequence[Sequence[int]] | None, islands: int) -> None:
    """An explicit matrix must have one row per island (checked on every rank at start)."""
    if matrix is not None and len(matrix) != islands:
        size = len(matrix)
        raise EvoganError(
            f"migration.matrix must be {islands} x {islands} for {islands} islands, got "
            f"{size} x {size}; give one row per island"
        )


def compete(candidates: list[Any], immigrants: list[Any]) -> list[Any]:
    """Immigrants join the candidates: the generation grows by their number."""
    return [*candidates, *immigrants]


def replace_last(candidates: list[Any], immigrants: list[Any]) -> list[Any]:
    """Immigrants take the places of the last candidates, never the first: the generation
    costs the same."""
    take = min(len(immigrants), len(candidates) - 1)
    return [*candidates[: len(candidates) - take], *immigrants[:take]]


POLICIES: dict[str, Policy] = {"compete": compete, "replace_worst": replace_last}


def make_policy(name: str) -> Policy:
    """Immigration policy by config name (``compete``, ``replace_worst``)."""
    if name not in POLICIES:
        raise ConfigError(
            f"migration.policy = {name!r} is not allowed; allowed: {', '.join(POLICIES)}"
        )
    return POLICIES[name]


def count_matrix(topology: Topology, islands: int, rng: np.random.Generator) -> np.ndarray:
    """(islands x islands) migrant counts, every row drawn in island order from one ``rng``.

    With the same generator state on every island (sync mode) all islands get the same matrix.
    """
    table = np.zeros((islands, islands), dtype=np.int64)
    for island in range(islands):
        for destination, count in topology(island, islands, rng).items():
            table[island, destination] = count
    return table


def replace_worst(
    population: list[Any],
    fitness: Sequence[float],
    immigrants: list[Any],
    immigrant_fitness: Sequence[float],
) -> tuple[list[Any], list[float]]:
    """Immigrants take the places of the worst members (fitness minimised); size is kept."""
    keep = len(population) - min(len(immigrants), len(population))
    order = np.argsort(np.asarray(fitness, dtype=np.float64), kind="stable")[:keep]
    survivors = [population[i] for i in sorted(order)]
    kept_fitness = [float(fitness[i]) for i in sorted(order)]
    taken = len(population) - keep
    arrived = [float(f) for f in immigrant_fitness[:taken]]
    return survivors + immigrants[:taken], kept_fitness + arrived


def best_first(fitness: Sequence[float], k: int) -> list[int]:
    """Indices of the ``k`` best (lowest) fitness values, best first, ties in order."""
    return [int(i) for i in np.argsort(np.asarray(fitness, np.float64), kind="stable")[:k]]


@dataclass
class MigrationCounts:
    """Messages (one per destination and migration) and migrants moved, for summaries."""

    messages_sent: int = 0
    migrants_sent: int = 0
    messages_received: int = 0
    migrants_received: int = 0
    late: int = 0
    sent_to: dict[int, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, int]:
        return {
            "messages_sent": self.messages_sent,
            "migrants_sent": self.migrants_sent,
            "messages_received": self.messages_received,
            "migrants_received": self.migrants_received,
            "late": self.late,
        }


class Migration:
    """Exchange of migrant lists between islands over ``comm`` (one rank per island).

    :meth:`send` takes the island's migrants best first; :meth:`receive` returns the migrants
    that arrived. Each message is one pickled ``encode(migrants, destination)``, turned back by
    ``decode(payload, source)`` (messages between two islands arrive in the order sent, so the
    hooks may encode relative to the previous message). Collective to create (it duplicates
    ``comm``) and to :meth:`close`.
    """

    def __init__(
        self,
        comm: Any,
        topology: Topology,
        mode: Literal["async", "sync"],
        rng: np.random.Generator,
        tag: int,
        encode: Callable[[list[Any], int], Any] | None = None,
        decode: Callable[[Any, int], list[Any]] | None = None,
    ) -> None:
        if mode not in ("async", "sync"):
            raise ConfigError(f"migration.mode = {mode!r} is not allowed; allowed: async, sync")
        self.comm = comm.Dup()
        self.island = self.comm.rank
        self.islands = self.comm.size
        self.topology = topology
        self.mode = mode
        self.rng = rng
        self.tag = tag
        self.encode = encode or (lambda migrants, destination: list(migrants))
        self.decode = decode or (lambda payload, source: list(payload))
        self.counts = MigrationCounts()
        self._requests: list[Any] = []
        self._sent_to = [0] * self.islands  # this session only: what close() must drain
        self._received = 0
        self._expected: list[tuple[int, int]] = []

    def send(self, migrants: list[Any]) -> None:
        """Start sending the first ``count`` migrants to each neighbour of the topology; in
        sync mode the matching :meth:`receive` must follow before the next send."""
        if self.islands < 2:
            return
        if self.mode == "sync":
            table = count_matrix(self.topology, self.islands, self.rng)
            row = {int(j): int(c) for j, c in enumerate(table[self.island]) if c > 0}
            self._expected = [(int(i), int(c)) for i, c in enumerate(table[:, self.island]) if c]
        else:
            row = self.topology(self.island, self.islands, self.rng)
            self._requests = [r for r in self._requests if not r.Test()]
        for destination, count in sorted(row.items()):
            payload = self.encode(migrants[:count], destination)
            request = self.comm.isend(payload, dest=destination, tag=self.tag)
            self._requests.append(request)
            self.counts.messages_sent += 1
            self.counts.migrants_sent += min(count, len(migrants))
            self.counts.sent_to[destination] = self.counts.sent_to.get(destination, 0) + 1
            self._sent_to[destination] += 1

    def receive(self) -> list[Any]:
        """Migrants that arrived: in sync mode exactly those the last :meth:`send` promised
        (blocking, sources in island order); in async mode whatever is here now."""
        arrived: list[Any] = []
        if self.islands < 2:
            return arrived
        if self.mode == "sync":
            from evogan.distributed.mpi import MPI

            for source, _ in self._expected:  # receive before waiting on sends: no deadlock
                arrived.extend(self._take(self.comm.recv(source=source, tag=self.tag), source))
            self._expected = []
            MPI.Request.Waitall(self._requests)
            self._requests = []
            return arrived
        from evogan.distributed.mpi import MPI

        status = MPI.Status()
        while True:
            message = self.comm.improbe(tag=self.tag, status=status)
            if message is None:
                return arrived
            arrived.extend(self._take(message.recv(), status.Get_source()))

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: counters and the topology generator's state."""
        return {
            "counts": self.counts.as_dict(),
            "sent_to": dict(self.counts.sent_to),
            "rng": self.rng.bit_generator.state,
        }

    def restore(self, state: dict[str, Any]) -> None:
        counts = {k: int(v) for k, v in state["counts"].items()}
        sent_to = {int(k): int(v) for k, v in state["sent_to"].items()}
        self.counts = MigrationCounts(**counts, sent_to=sent_to)
        self.rng.bit_generator.state = state["rng"]

    def _take(self, payload: Any, source: int) -> list[Any]:
        migrants = self.decode(payload, source)
        self.counts.messages_received += 1
        self._received += 1
        self.counts.migrants_received += len(migrants)
        return migrants

    def close(self) -> MigrationCounts:
        """Collective: receive what is still in flight (counted as late), finish sends, free."""
        if self.islands > 1:
            from evogan.distributed.mpi import MPI

            expected = sum(self.comm.alltoall(self._sent_to))
            outstanding = expected - self._received
            for _ in range(outstanding):
                self.comm.recv(tag=self.tag)
                self.counts.late += 1
            MPI.Request.Waitall(self._requests)
            self._requests = []
        self.comm.Free()
        return self.counts
