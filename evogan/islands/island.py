"""The island model: a (1+lambda) strategy that tracks lineages, migrates and checkpoints.

:class:`IslandModel` is a mixin placed before a strategy (``IslandPlusLambda``,
``IslandHybrid``): it overrides :meth:`propose`/:meth:`select` to draw every generation from one
64-bit seed, splitmix64 of the island's stream key and the generation (so each candidate has a
:class:`~evogan.islands.lineage.Lineage`), and to let immigrants in, and uses the engine's
hooks for migration, stop agreement and checkpoints. The loop itself stays in
:class:`~evogan.engine.loop.Evolution`.

Immigration policies for a (1+lambda) island: ``compete`` adds the immigrants to the next
batch's candidates (elite + children + immigrants); ``replace_worst`` gives them the places of
children (the next generation's worst-known members: untested), so a generation costs the same.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from evogan.engine.loop import Individual
from evogan.islands.lineage import Lineage, Rebuilder, mutate_step, seeded, varint
from evogan.islands.migration import Migration, best_first
from evogan.engine.operators import draw_seed
from evogan.engine.problem import GenerationContext
from evogan.engine.strategies import Hybrid, PlusLambda


def _shared_base(lineage: Lineage, previous: list[Lineage | None]) -> tuple[int, int] | None:
    """The slot in ``previous`` sharing the longest prefix with ``lineage``, and its length
    (None when no lineage there starts from the same initial draw)."""
    best = None
    for slot, known in enumerate(previous):
        shared = None if known is None else lineage.shared_length(known)
        if shared is not None and (best is None or shared > best[1]):
            best = (slot, shared)
    return best


POLL_SECONDS = 1.0
"""Least time between two polls of an async stop agreement."""


class StopEvolution(Exception):
    """All ranks agreed to stop (a signal): the island checkpointed and leaves the loop."""


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


@dataclass
class IslandSettings:
    """How one island takes part in the model (from the ``migration``/``checkpoint`` config)."""

    index: int = 0
    count: int = 1
    interval: int = 10
    k: int = 1
    policy: str = "compete"
    send: str = "auto"
    checkpoint_every: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class IslandModel:
    """Mixin for :class:`PlusLambda` strategies; see the module docstring.

    ``migration`` is the island leader's :class:`Migration` (None when alone or not leader),
    ``group`` the communicator of the island's ranks (None for one rank), ``agreement`` a
    :class:`~evogan.distributed.signals.StopAgreement` (leader only) and ``checkpoint`` a
    callable writing this island's checkpoint (leader only).
    """

    def setup_island(
        self,
        settings: IslandSettings,
        *,
        migration: Migration | None = None,
        group: Any = None,
        agreement: Any = None,
        checkpoint: Any = None,
    ) -> None:
        self.island = settings
        self.migration = migration
        self.group = group
        self.agreement = agreement
        self.checkpoint = checkpoint
        self.rebuilder = Rebuilder(self.problem)
        self.stream_key = draw_seed(self.streams.mutation)  # with the generation: seeds children
        self.elite_lineage: Lineage | None = None
        self.immigrants: list[tuple[Tensor, Lineage | None]] = []
        self.migrant_bytes = MigrantBytes()
        self.immigrants_used = 0
        self.immigrant_wins = 0
        self.island_seconds = 0.0  # migration, stop agreement and checkpoints
        self.island_cpu_seconds = 0.0  # the same in this process's CPU time
        self._last_poll = -float("inf")
        self._own = 0
        self.last_checkpoint = -1
        self.epoch_data_state = self.streams.data.get_state()
        self.batch_in_epoch = 0
        self._lineages: list[Lineage | None] = []
        self._sent: dict[int, list[Lineage | None]] = {}  # last message's lineages per neighbour
        self._known: dict[int, list[Lineage | None]] = {}  # and per sender, as received
        if migration is not None:
            migration.encode = self.encode_migrants
            migration.decode = self.decode_migrants
        self._last: tuple[Tensor, Tensor] | None = None

    # -- the generation, with lineages and immigrants ------------------------------------
    def propose(self, context: GenerationContext) -> Tensor:
        if self.elite is None:
            seed = draw_seed(self.streams.init)
            count = self.initial_parents
            candidates = self.problem.initial_genomes(count, seeded(seed))
            lineages: list[Lineage | None] = [Lineage(seed, count, i) for i in range(count)]
        else:
            key, generation, count = self.stream_key, self.generation, self.children
            rate, power = context.rate, context.power
            children = mutate_step(self.problem, self.elite, key, generation, count, rate, power)
            parent = self.elite_lineage
            lineages = [parent] + [
                None if parent is None else parent.child(key, generation, count, i, rate, power)
                for i in range(count)
            ]
            candidates = torch.cat([self.elite.unsqueeze(0), children])
        candidates, lineages = self._admit(candidates, lineages)
        self._lineages = lineages
        return candidates

    def _admit(
        self, candidates: Tensor, lineages: list[Lineage | None]
    ) -> tuple[Tensor, list[Lineage | None]]:
        arrived, self.immigrants = self.immigrants, []
        self._own = candidates.shape[0]
        if not arrived:
            return candidates, lineages
        genomes = torch.stack([genome for genome, _ in arrived])
        arrived_lineages = [lineage for _, lineage in arrived]
        if self.island.policy == "replace_worst" and self.elite is not None:
            take = min(len(arrived), candidates.shape[0] - 1)  # every place but the elite's
            genomes, arrived_lineages = genomes[:take], arrived_lineages[:take]
            keep = candidates.shape[0] - take
            candidates, lineages = candidates[:keep], lineages[:keep]
        self.immigrants_used += genomes.shape[0]
        self._own = candidates.shape[0]
        return torch.cat([candidates, genomes]), lineages + arrived_lineages

    def select(self, candidates: Tensor, fitness: Tensor, context: GenerationContext) -> None:
        super().select(candidates, fitness, context)
        best = int(torch.argmin(fitness))
        self.elite_lineage = self._lineages[best]
        self.immigrant_wins += best >= self._own
        self._last = (candidates, fitness)

    def refine(self, batch: Any, context: GenerationContext) -> None:
        before = getattr(self, "gradient_steps", 0)
        super().refine(batch, context)
        if getattr(self, "gradient_steps", 0) != before:
            self.elite_lineage = None  # gradient steps cannot be replayed from seeds

    # -- hooks ----------------------------------------------------------------------------
    def after_generation(self, record: dict[str, Any]) -> None:
        started = time.perf_counter()
        self.batch_in_epoch += 1
        # MPI is touched only every `interval` generations: on oversubscribed or busy nodes
        # each progress call can cost a scheduler time slice, and a stop signal still takes
        # effect within one interval (a fraction of a second at regressor speeds).
        due = self.generation % self.island.interval == 0
        every = self.island.checkpoint_every
        # CPU time only where there is work: on a shared core the clock call is a syscall at
        # which the scheduler likes to switch, which would bill the other rank's slice here
        checkpoint_due = bool(every and self.generation % every == 0)
        cpu_started = time.process_time() if due or checkpoint_due else None
        arrived: list[tuple[Tensor, Lineage | None]] = []
        stop = False
        if self.migration is not None and due:
            self.migration.send(self.emigrants())
            arrived = self.migration.receive()
        if self.agreement is not None:
            self.agreement.value = self.elite_fitness
            if due and self._poll_due(started):
                stop = self.agreement.poll()
                record["global_best"] = min(self.agreement.global_value, self.elite_fitness)
        if self.group is not None and due:
            arrived, stop = self.group.bcast((arrived, stop), root=0)
        self.immigrants.extend(arrived)
        record["immigrants"] = len(arrived)
        if self.checkpoint is not None and (stop or checkpoint_due):
            self.save_checkpoint()
        spent = time.perf_counter() - started
        self.island_seconds += spent
        if cpu_started is not None:
            self.island_cpu_seconds += time.process_time() - cpu_started
        record["island_seconds"] = spent
        if stop:
            self._notify(record)  # the engine notifies after this hook, which we leave
            raise StopEvolution(f"stopped after generation {self.generation}")

    def _poll_due(self, now: float) -> bool:
        """Sync agreement runs every interval (all islands stop at one generation); an async
        round needs only a poll every ``POLL_SECONDS``, which keeps a stop signal's effect
        within a second or two and spares the MPI progress calls in between."""
        if self.agreement.mode == "sync" or now - self._last_poll >= POLL_SECONDS:
            self._last_poll = now
            return True
        return False

    def on_epoch_end(self, record: dict[str, Any]) -> None:
        self.epoch_data_state = self.streams.data.get_state()
        self.batch_in_epoch = 0

    def save_checkpoint(self) -> None:
        if self.checkpoint is not None and self.last_checkpoint != self.generation:
            self.checkpoint(self)
            self.last_checkpoint = self.generation

    # -- migrants -------------------------------------------------------------------------
    def emigrants(self) -> list[tuple[Tensor, Lineage | None, float]]:
        """The island's ``k`` best of the last generation, best first (the elite after any
        gradient refinement): ``(genome, lineage or None, fitness)``."""
        if self._last is None or self.elite is None:
            return []
        out = [(self.elite, self.elite_lineage, self.elite_fitness)]  # the best of the last
        if self.island.k > 1:
            candidates, fitness = self._last
            for index in best_first(fitness.tolist(), self.island.k)[1:]:
                out.append((candidates[index], self._lineages[index], float(fitness[index])))
        for genome, lineage, _ in out:  # a neighbour's reply often extends these: replay less
            if lineage is not None:
                self.rebuilder.remember(lineage, genome)
        return out

    def encode_migrants(
        self, items: list[tuple[Tensor, Lineage | None, float]], destination: int
    ) -> list[Migrant]:
        """Each migrant as weights or as lineage, whichever is smaller (``migration.send``);
        a lineage that extends one sent to ``destination`` in the previous message travels as
        (that migrant's slot, shared length) plus only the new mutations."""
        previous = self._sent.get(destination, [])
        migrants = [
            self._encode(genome, lineage, value, previous) for genome, lineage, value in items
        ]
        self._sent[destination] = [  # what the receiver will know: lineages sent as lineages
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
        counts = self.migrant_bytes
        counts.count += 1
        counts.weights += weight_bytes
        packed, base = None, None
        if lineage is not None:
            base = _shared_base(lineage, previous)
            packed = lineage.to_bytes() if base is None else lineage.delta_bytes(base[1])
        mode = self.island.send
        use_lineage = packed is not None and (
            mode == "lineage" or (mode == "auto" and len(packed) < weight_bytes)
        )
        if use_lineage:
            migrant = Migrant(fitness, packed, base=base)
        else:
            weights = genome.detach().to("cpu", torch.float32).numpy().tobytes()
            migrant = Migrant(fitness, None, weights)
        counts.sent += migrant.size
        return migrant

    def decode_migrants(
        self, migrants: list[Migrant], source: int
    ) -> list[tuple[Tensor, Lineage | None]]:
        """Genomes (rebuilt from lineages where sent so) of a message from island ``source``."""
        previous = self._known.get(source, [])
        decoded = [self._decode(migrant, previous) for migrant in migrants]
        self._known[source] = [lineage for _, lineage in decoded]
        return decoded

    def _decode(
        self, migrant: Migrant, previous: list[Lineage | None]
    ) -> tuple[Tensor, Lineage | None]:
        if migrant.lineage is not None:
            if migrant.base is None:
                lineage = Lineage.from_bytes(migrant.lineage)
            else:
                slot, shared = migrant.base
                lineage = previous[slot].extended(shared, migrant.lineage)
            return self.rebuilder(lineage), lineage
        genome = torch.from_numpy(np.frombuffer(migrant.weights, dtype=np.float32).copy())
        return genome, None

    # -- results --------------------------------------------------------------------------
    def restore_hall_of_fame(self, genomes: list[Tensor], fitness: list[float]) -> None:
        for genome, value in zip(genomes, fitness, strict=True):
            self.hall_of_fame.insert(Individual(genome, value))


class IslandPlusLambda(IslandModel, PlusLambda):
    """(1+lambda) island."""


class IslandHybrid(IslandModel, Hybrid):
    """(1+lambda) island with RMSprop refinement of the elite (migrants travel as weights)."""
