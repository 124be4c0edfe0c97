"""Seed-compressed weight genomes: a genome is also the recipe that made it.

A lineage is the seed of the initial draw (and which row of it) plus, for every mutation on the
way, the seed of the generation's mutation stream, how many children were drawn, which child
survived, and the rate and power used. Replaying it through the same :class:`Problem` rebuilds
the weights bit for bit (Uber's "deep GA" encoding), so a migrant or checkpoint can carry a few
bytes per ancestor instead of every weight.

Gradient steps (the hybrid strategy) are not replayable from seeds: such genomes have no
lineage (``None``) and travel as weights.
"""

from __future__ import annotations

import struct
import zlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from evogan.errors import DataError
from evogan.evolution.problem import GenerationContext, Problem

_HEADER = struct.Struct("<IIHH")  # init seed, mutation count, init count, init index
_COLUMNS = (
    ("seed", np.uint32),
    ("count", np.uint16),
    ("index", np.uint16),
    ("rate", np.float64),
    ("power", np.float64),
)
SEED_LIMIT = 2**32


@dataclass(frozen=True)
class Lineage:
    """Initial draw ``(seed, count, index)`` and the mutations ``(seed, count, index, rate,
    power)`` that lead to a genome, oldest first."""

    init_seed: int
    init_count: int
    init_index: int
    mutations: tuple[tuple[int, int, int, float, float], ...] = ()

    def child(self, seed: int, count: int, index: int, rate: float, power: float) -> Lineage:
        """The lineage of child ``index`` of ``count`` drawn from mutation seed ``seed``."""
        step = (int(seed), int(count), int(index), float(rate), float(power))
        return Lineage(self.init_seed, self.init_count, self.init_index, (*self.mutations, step))

    def extends(self, other: Lineage) -> bool:
        """Whether ``other`` is this lineage or one of its ancestors."""
        return (
            (self.init_seed, self.init_count, self.init_index)
            == (other.init_seed, other.init_count, other.init_index)
            and len(other.mutations) <= len(self.mutations)
            and self.mutations[: len(other.mutations)] == other.mutations
        )

    def suffix(self, start: int) -> Lineage:
        """The same root with only the mutations from ``start`` on (a delta to send)."""
        return Lineage(self.init_seed, self.init_count, self.init_index, self.mutations[start:])

    def extended(self, shared: int, tail: Lineage) -> Lineage:
        """This lineage's first ``shared`` mutations followed by ``tail``'s (undoes
        :meth:`suffix`)."""
        if shared > len(self.mutations):
            raise DataError(
                f"a lineage delta refers to {shared} shared mutations, but the known lineage has "
                f"only {len(self.mutations)}; migration messages arrived out of order"
            )
        return Lineage(
            self.init_seed,
            self.init_count,
            self.init_index,
            self.mutations[:shared] + tail.mutations,
        )

    def to_bytes(self) -> bytes:
        """Compact form: a header and column-wise arrays, zlib-compressed (rates and powers
        repeat, so they cost almost nothing)."""
        length = len(self.mutations)
        header = _HEADER.pack(self.init_seed, length, self.init_count, self.init_index)
        rows = list(zip(*self.mutations, strict=True)) if length else [()] * len(_COLUMNS)
        body = b"".join(
            np.asarray(column, dtype=dtype).tobytes()
            for column, (_, dtype) in zip(rows, _COLUMNS, strict=True)
        )
        return zlib.compress(header + body, 9)

    @classmethod
    def from_bytes(cls, data: bytes) -> Lineage:
        try:
            raw = zlib.decompress(data)
            seed, length, init_count, init_index = _HEADER.unpack_from(raw)
        except (zlib.error, struct.error) as exc:
            raise DataError(f"a lineage record is corrupt ({exc}); its file is damaged") from None
        offset = _HEADER.size
        columns = []
        for _, dtype in _COLUMNS:
            size = np.dtype(dtype).itemsize * length
            columns.append(np.frombuffer(raw[offset : offset + size], dtype=dtype).tolist())
            offset += size
        steps = tuple(zip(*columns, strict=True)) if length else ()
        return cls(seed, init_count, init_index, steps)

    def __len__(self) -> int:
        return len(self.mutations)


def seeded(seed: int) -> torch.Generator:
    generator = torch.Generator()
    generator.manual_seed(int(seed))
    return generator


def draw_seed(generator: torch.Generator) -> int:
    """A 32-bit seed drawn from ``generator`` (a lineage stores 4 bytes per mutation seed)."""
    return int(torch.randint(SEED_LIMIT, (1,), generator=generator, dtype=torch.int64))


def mutate_step(
    problem: Problem, parent: Tensor, seed: int, count: int, rate: float, power: float
) -> Tensor:
    """All ``count`` children of one seeded mutation step (the live run and replay share it)."""
    context = GenerationContext(0, 0, rate, power)
    return problem.mutate(parent, count, seeded(seed), context)


class Rebuilder:
    """Replays lineages through ``problem``; keeps the last ``cache`` results so a lineage that
    extends one already rebuilt (the next migrant of the same neighbour) replays only its new
    mutations."""

    def __init__(self, problem: Problem, cache: int = 8) -> None:
        self.problem = problem
        self.cache_size = cache
        self._cache: OrderedDict[Lineage, Tensor] = OrderedDict()
        self.replayed = 0

    def __call__(self, lineage: Lineage) -> Tensor:
        start, genome = self._longest_prefix(lineage)
        if genome is None:
            initial = self.problem.initial_genomes(lineage.init_count, seeded(lineage.init_seed))
            genome = initial[lineage.init_index].clone()
        for seed, count, index, rate, power in lineage.mutations[start:]:
            genome = mutate_step(self.problem, genome, seed, count, rate, power)[index].clone()
            self.replayed += 1
        self._remember(lineage, genome)
        return genome

    def _longest_prefix(self, lineage: Lineage) -> tuple[int, Tensor | None]:
        best, found = 0, None
        for known, genome in self._cache.items():
            if len(known) >= best and lineage.extends(known):
                best, found = len(known), genome
        return best, found

    def remember(self, lineage: Lineage, genome: Tensor) -> None:
        """Keep ``genome`` as the weights of ``lineage`` (known without a replay)."""
        self._remember(lineage, genome.detach().clone())

    def _remember(self, lineage: Lineage, genome: Tensor) -> None:
        self._cache[lineage] = genome
        self._cache.move_to_end(lineage)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


def rebuild(problem: Problem, lineage: Lineage) -> Tensor:
    """The weights ``lineage`` describes (no cache)."""
    return Rebuilder(problem, cache=0)(lineage)
