"""Seed-compressed weight genomes: a genome is also the recipe that made it.

A lineage is the seed of the initial draw (and which row of it) plus, for every mutation on the
way, the island's stream key and the generation (splitmix64 of the two is that step's seed),
how many children were drawn, which child survived, and the rate and power used. Replaying it
through the same :class:`Problem` rebuilds the weights bit for bit (Uber's "deep GA"
encoding); the operators' counter-based draws let a replay make only the surviving child, and
a run of steps needs no Python per step beyond reading its numbers.

Steps are stored relative to the step before them: the stream key, child count, rate and power
only where they change, the generation as a small increment and the child index as one byte, so
a step costs about two bytes (less after deflate). A lineage that extends one the receiver
already knows travels as :meth:`Lineage.delta_bytes`: only the steps after the shared prefix.

Gradient steps (the hybrid strategy) are not replayable from seeds: such genomes have no
lineage (``None``) and travel as weights.
"""

from __future__ import annotations

import itertools
import operator
import struct
import zlib
from collections import OrderedDict
from dataclasses import dataclass

from torch import Tensor

from evogan.engine.operators import splitmix
from evogan.engine.problem import Problem
from evogan.errors import DataError
from evogan.seeding import seeded

Step = tuple[int, int, int, int, float, float]
"""``(stream key, generation, children drawn, surviving child, rate, power)``."""

_RAW, _DEFLATED = 0, 1
_DEFLATE_FROM = 48  # bytes of body
_RATE_POWER = struct.Struct("<dd")


@dataclass(frozen=True)
class Lineage:
    """Initial draw ``(seed, count, index)`` and the mutation steps that lead to a genome,
    oldest first."""

    init_seed: int
    init_count: int
    init_index: int
    mutations: tuple[Step, ...] = ()

    def child(
        self, key: int, generation: int, count: int, index: int, rate: float, power: float
    ) -> Lineage:
        """The lineage of child ``index`` of the ``count`` drawn at ``generation`` of stream
        ``key``."""
        step = (int(key), int(generation), int(count), int(index), float(rate), float(power))
        return Lineage(self.init_seed, self.init_count, self.init_index, (*self.mutations, step))

    @property
    def root(self) -> tuple[int, int, int]:
        return self.init_seed, self.init_count, self.init_index

    def shared_length(self, other: Lineage) -> int | None:
        """Length of the common prefix of two lineages; None when their initial draws differ.
        (Tuple slices compare at C speed, identical step objects by identity: bisecting the
        first difference costs far less than a Python loop over the history.)"""
        if self.root != other.root:
            return None
        mine, theirs = self.mutations, other.mutations
        shared, differs = 0, min(len(mine), len(theirs))
        if mine[:differs] == theirs[:differs]:
            return differs
        while differs - shared > 1:  # mine[:shared] == theirs[:shared], not so at differs
            middle = (shared + differs) // 2
            if mine[shared:middle] == theirs[shared:middle]:
                shared = middle
            else:
                differs = middle
        return shared

    def extends(self, other: Lineage) -> bool:
        """Whether ``other`` is this lineage or one of its ancestors."""
        size = len(other.mutations)
        return (
            self.root == other.root
            and size <= len(self.mutations)
            and self.mutations[:size] == other.mutations
        )

    def to_bytes(self) -> bytes:
        """The whole lineage, compact (see the module docstring)."""
        head = b"".join(varint(value) for value in self.root)
        return _pack(head + _encode_steps(self.mutations, None))

    @classmethod
    def from_bytes(cls, data: bytes) -> Lineage:
        reader = _Reader(_unpack(data))
        root = (reader.varint(), reader.varint(), reader.varint())
        lineage = cls(*root, _decode_steps(reader, None))
        reader.done()
        return lineage

    def delta_bytes(self, shared: int) -> bytes:
        """Only the steps after the first ``shared`` (which the receiver knows), each relative
        to the one before."""
        prior = self.mutations[shared - 1] if shared else None
        return _pack(_encode_steps(self.mutations[shared:], prior))

    def extended(self, shared: int, delta: bytes) -> Lineage:
        """This lineage's first ``shared`` steps followed by those of :meth:`delta_bytes`."""
        if shared > len(self.mutations):
            raise DataError(
                f"a lineage delta refers to {shared} shared mutations, but the known lineage has "
                f"only {len(self.mutations)}; migration messages arrived out of order"
            )
        reader = _Reader(_unpack(delta))
        prior = self.mutations[shared - 1] if shared else None
        steps = _decode_steps(reader, prior)
        reader.done()
        return Lineage(*self.root, self.mutations[:shared] + steps)

    def __len__(self) -> int:
        return len(self.mutations)


def varint(value: int) -> bytes:
    """LEB128: 7 bits per byte, small numbers in one byte."""
    if value < 0:
        raise ValueError(f"varint needs a non-negative integer, got {value}")
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


class _Reader:
    """Cursor over an encoded lineage; running off the end is a corrupt record."""

    def __init__(self, data: bytes) -> None:
        self.data, self.offset = data, 0

    def take(self, size: int) -> bytes:
        if self.offset + size > len(self.data):
            raise DataError("a lineage record is corrupt (truncated); it is damaged")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    def varints(self, count: int) -> list[int]:
        """``count`` varints; a run of one-byte values (the usual case) is read at C speed."""
        chunk = self.data[self.offset : self.offset + count]
        if len(chunk) == count and (not chunk or max(chunk) < 0x80):
            self.offset += count
            return list(chunk)
        return [self.varint() for _ in range(count)]

    def done(self) -> None:
        if self.offset != len(self.data):
            raise DataError("a lineage record is corrupt (trailing bytes); it is damaged")


def _setting(step: Step) -> tuple[int, int, float, float]:
    """What usually stays the same from one step to the next: stream key, count, rate, power."""
    return step[0], step[2], step[4], step[5]


def _encode_steps(steps: tuple[Step, ...], prior: Step | None) -> bytes:
    """Step count; the settings as a list of changes (position, key, count, rate, power);
    generations as signed increments; surviving children as one varint each. Works on whole
    columns at C speed (``zip``, ``map``): checkpoints encode lineages of thousands of steps,
    migration a few steps at a time, where numpy's fixed cost would dominate."""
    out = bytearray(varint(len(steps)))
    if not steps:
        return bytes(out + varint(0))
    keys, generations, counts, kept, rates, powers = zip(*steps, strict=True)
    settings = list(zip(keys, counts, rates, powers, strict=True))
    before = [None if prior is None else _setting(prior), *settings[:-1]]
    differs = map(operator.ne, settings, before)
    changes = [(i, settings[i]) for i in itertools.compress(range(len(settings)), differs)]
    out += varint(len(changes))
    last = 0
    for position, (key, count, rate, power) in changes:
        out += varint(position - last) + varint(key) + varint(count)
        out += _RATE_POWER.pack(rate, power)
        last = position
    starts = (0 if prior is None else prior[1], *generations[:-1])
    # zigzag: an immigrant's line continues at the host's generation, which may be lower
    increments = map(operator.sub, generations, starts)
    zigzags = [2 * step if step >= 0 else -2 * step - 1 for step in increments]
    out += _varints(zigzags) + _varints(list(kept))
    return bytes(out)


def _varints(values: list[int]) -> bytes:
    """Many varints; values under 128 (nearly all increments and child indices) are one byte
    each, packed at C speed."""
    if not values or max(values) < 0x80:
        return bytes(values)
    return b"".join(varint(value) for value in values)


def _decode_steps(reader: _Reader, prior: Step | None) -> tuple[Step, ...]:
    length = reader.varint()
    changes: list[tuple[int, tuple[int, int, float, float]]] = []
    position = 0
    for _ in range(reader.varint()):
        position += reader.varint()
        key, count = reader.varint(), reader.varint()
        changes.append((position, (key, count, *_RATE_POWER.unpack(reader.take(_RATE_POWER.size)))))
    if length and (not changes or changes[0][0] != 0):
        if prior is None:
            raise DataError("a lineage record is corrupt (no settings for its first step)")
        changes.insert(0, (0, _setting(prior)))
    settings: list[tuple[int, int, float, float]] = []
    bounds = [position for position, _ in changes] + [length]
    for (start, setting), stop in zip(changes, bounds[1:], strict=True):
        settings += [setting] * (stop - start)
    if len(settings) != length:
        raise DataError("a lineage record is corrupt (settings out of order); it is damaged")
    zigzags = reader.varints(length)
    increments = [z // 2 if z % 2 == 0 else -(z + 1) // 2 for z in zigzags]
    generations = itertools.accumulate(increments, initial=0 if prior is None else prior[1])
    next(generations)  # the starting point itself
    keys, counts, rates, powers = zip(*settings, strict=True) if settings else ((),) * 4
    kept = reader.varints(length)
    return tuple(zip(keys, generations, counts, kept, rates, powers, strict=True))


def _pack(body: bytes) -> bytes:
    """A flag byte, then the body raw or deflated, whichever is shorter (a delta of a few
    steps never deflates shorter, so it is not tried; the small window and hash table keep the
    compressor's set-up cheap, and lineages repeat at short range)."""
    if len(body) >= _DEFLATE_FROM:
        squeezer = zlib.compressobj(9, zlib.DEFLATED, -12, 5)
        deflated = squeezer.compress(body) + squeezer.flush()
        if len(deflated) < len(body):
            return bytes([_DEFLATED]) + deflated
    return bytes([_RAW]) + body


def _unpack(data: bytes) -> bytes:
    if not data or data[0] not in (_RAW, _DEFLATED):
        raise DataError("a lineage record is corrupt (unknown format); it is damaged")
    if data[0] == _RAW:
        return data[1:]
    try:
        return zlib.decompress(data[1:], -15)
    except zlib.error as exc:
        raise DataError(f"a lineage record is corrupt ({exc}); it is damaged") from None


class Rebuilder:
    """Replays lineages through ``problem``, keeping recent results and every ``stride``-th
    intermediate genome (within ``cache_bytes``): a lineage that extends or branches off one
    already rebuilt (the next migrant of a neighbour) replays only from the nearest kept
    ancestor, in one :meth:`Problem.replay` call that also returns the intermediate genomes
    to keep. Kept genomes are indexed by (initial draw, length, last step); a lookup probes
    the lineage's own prefixes, longest first, so a migrant a few steps past a kept one costs
    a few dictionary probes (a miss probes every length, still far less than replaying
    them)."""

    def __init__(self, problem: Problem, cache_bytes: int = 32 * 2**20, stride: int = 8) -> None:
        self.problem = problem
        self.cache_bytes = cache_bytes
        self.stride = stride
        self._cache: OrderedDict[tuple, tuple[Lineage, Tensor]] = OrderedDict()
        self._cached_bytes = 0
        self.replayed = 0

    def __call__(self, lineage: Lineage) -> Tensor:
        done, genome = self._longest_prefix(lineage)
        if genome is None:
            initial = self.problem.initial_genomes(lineage.init_count, seeded(lineage.init_seed))
            genome = initial[lineage.init_index].clone()
        if done < len(lineage):
            steps = [
                (splitmix(key, generation), count, index, rate, power)
                for key, generation, count, index, rate, power in lineage.mutations[done:]
            ]
            lengths = range((done // self.stride + 1) * self.stride, len(lineage), self.stride)
            *kept, genome = self.problem.replay(genome, steps, [n - done for n in lengths])
            for length, snapshot in zip(lengths, kept, strict=True):
                self._remember(Lineage(*lineage.root, lineage.mutations[:length]), snapshot)
            self.replayed += len(steps)
        self._remember(lineage, genome)
        return genome

    def _longest_prefix(self, lineage: Lineage) -> tuple[int, Tensor | None]:
        root, steps = lineage.root, lineage.mutations
        for length in range(len(steps), 0, -1):
            key = (root, length, steps[length - 1])
            entry = self._cache.get(key)
            if entry is not None and lineage.extends(entry[0]):
                self._cache.move_to_end(key)
                return length, entry[1]
        return 0, None

    def remember(self, lineage: Lineage, genome: Tensor) -> None:
        """Keep ``genome`` as the weights of ``lineage`` (known without a replay)."""
        self._remember(lineage, genome.detach().clone())

    def _remember(self, lineage: Lineage, genome: Tensor) -> None:
        key = _key(lineage, len(lineage))
        if key in self._cache:
            self._cache.move_to_end(key)
            return
        self._cache[key] = (lineage, genome)
        self._cached_bytes += genome.numel() * genome.element_size()
        while self._cache and self._cached_bytes > self.cache_bytes:
            _, (_, dropped) = self._cache.popitem(last=False)
            self._cached_bytes -= dropped.numel() * dropped.element_size()


def _key(lineage: Lineage, length: int) -> tuple:
    """Index of the first ``length`` steps (equal keys are checked with ``extends``)."""
    return lineage.root, length, lineage.mutations[length - 1] if length else None


def rebuild(problem: Problem, lineage: Lineage) -> Tensor:
    """The weights ``lineage`` describes (no cache)."""
    return Rebuilder(problem, cache_bytes=0)(lineage)
