"""How migrants of weight genomes travel: as a lineage (seed-compressed) or as raw float32
weights, whichever is smaller, and relative to the previous message between the same two
islands (a lineage that extends one sent before travels as that migrant's slot and the number
of shared steps plus only the new mutations).

:class:`MigrantCodec` is given to :class:`~evogan.islands.migration.Migration` as its
``encode``/``decode`` at construction; it keeps, per neighbour, the lineages of the last
message (those tables are part of a sync island's checkpoint) and rebuilds received lineages
through the problem with a :class:`~evogan.islands.lineage.Rebuilder`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from evogan.engine.problem import Problem
from evogan.islands.lineage import Lineage, Rebuilder, varint

Emigrant = tuple[Tensor, Lineage | None, float]
"""``(genome, lineage or None, fitness)`` of a migrant about to leave."""
Immigrant = tuple[Tensor, Lineage | None]
"""``(genome, lineage or None)`` of a migrant that arrived."""
Tables = dict[int, list[Lineage | None]]


@dataclass
class Migrant:
    """What travels: a lineage (seed-compressed) or the raw float32 weights, and the fitness
    the sender measured (information only; immigrants are re-evaluated on the next batch)."""

    fitness: float
    lineage: bytes | None = None
    weights: bytes | None = None
    base: tuple[int, int] | None = None
    """``(slot, shared)``: ``lineage`` holds only the mutations after the first ``shared`` of
    the lineage in ``slot`` of the previous message from the same sender."""

    @property
    def size(self) -> int:
        """Bytes that describe the genome (the base reference counted as two varints)."""
        if self.lineage is None:
            return len(self.weights or b"")
        reference = 0 if self.base is None else len(varint(self.base[0]) + varint(self.base[1]))
        return len(self.lineage) + reference


@dataclass
class MigrantBytes:
    """Bytes per migrant as raw weights and as actually sent, summed over every migrant sent
    (for the summary; the whole-lineage size is the elite's, measured once at the end)."""

    count: int = 0
    weights: int = 0
    sent: int = 0

    def summary(self) -> dict[str, float | int | None]:
        return {
            "migrants": self.count,
            "weights": self.weights / self.count if self.count else None,
            "sent": self.sent / self.count if self.count else None,
        }


def shared_base(lineage: Lineage, previous: list[Lineage | None]) -> tuple[int, int] | None:
    """The slot in ``previous`` sharing the longest prefix with ``lineage``, and its length
    (None when no lineage there starts from the same initial draw)."""
    best = None
    for slot, known in enumerate(previous):
        shared = None if known is None else lineage.shared_length(known)
        if shared is not None and (best is None or shared > best[1]):
            best = (slot, shared)
    return best


class MigrantCodec:
    """Encodes an island's emigrants per destination and decodes messages per source.

    ``send``: ``auto`` sends whichever of lineage and weights is smaller, ``lineage`` a
    lineage whenever there is one, ``weights`` always the weights.
    """

    def __init__(
        self, problem: Problem, send: Literal["auto", "lineage", "weights"] = "auto"
    ) -> None:
        self.rebuilder = Rebuilder(problem)
        self.send = send
        self.bytes = MigrantBytes()
        self.sent: Tables = {}  # last message's lineages per neighbour, as the receiver knows
        self.known: Tables = {}  # and per sender, as received

    def encode(self, items: list[Emigrant], destination: int) -> list[Migrant]:
        """Each migrant as weights or as lineage (see the module docstring)."""
        previous = self.sent.get(destination, [])
        migrants = [
            self._encode(genome, lineage, value, previous) for genome, lineage, value in items
        ]
        self.sent[destination] = [  # what the receiver will know: lineages sent as lineages
            lineage if migrant.lineage is not None else None
            for (_, lineage, _), migrant in zip(items, migrants, strict=True)
        ]
        return migrants

    def _encode(
        self,
        genome: Tensor,
        lineage: Lineage | None,
        fitness: float,
        previous: list[Lineage | None],
    ) -> Migrant:
        weight_bytes = genome.numel() * 4  # float32 on the wire
        self.bytes.count += 1
        self.bytes.weights += weight_bytes
        packed, base = None, None
        if lineage is not None:
            base = shared_base(lineage, previous)
            packed = lineage.to_bytes() if base is None else lineage.delta_bytes(base[1])
        use_lineage = packed is not None and (
            self.send == "lineage" or (self.send == "auto" and len(packed) < weight_bytes)
        )
        if use_lineage:
            migrant = Migrant(fitness, packed, base=base)
        else:
            weights = genome.detach().to("cpu", torch.float32).numpy().tobytes()
            migrant = Migrant(fitness, None, weights)
        self.bytes.sent += migrant.size
        return migrant

    def decode(self, migrants: list[Migrant], source: int) -> list[Immigrant]:
        """Genomes (rebuilt from lineages where sent so) of a message from island ``source``."""
        previous = self.known.get(source, [])
        decoded = [self._decode(migrant, previous) for migrant in migrants]
        self.known[source] = [lineage for _, lineage in decoded]
        return decoded

    def _decode(self, migrant: Migrant, previous: list[Lineage | None]) -> Immigrant:
        if migrant.lineage is not None:
            if migrant.base is None:
                lineage = Lineage.from_bytes(migrant.lineage)
            else:
                slot, shared = migrant.base
                lineage = previous[slot].extended(shared, migrant.lineage)
            return self.rebuilder(lineage), lineage
        genome = torch.from_numpy(np.frombuffer(migrant.weights, dtype=np.float32).copy())
        return genome, None

    def remember(self, lineage: Lineage, genome: Tensor) -> None:
        """A genome this island sends: a neighbour's reply often extends it, so keep it."""
        self.rebuilder.remember(lineage, genome)
