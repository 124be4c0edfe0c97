"""Mutation operators on weight genomes (rows of one float tensor), vectorised over children.

Exactly ``max(1, round(rate * size))`` weights of every child change, so a low rate late in a
run still moves every child (a Bernoulli mask would leave many children identical to the
parent and waste their evaluations).

Random numbers are counter-based: a mutation step has one 64-bit seed, and every number it
uses is splitmix64 of (a seed derived from it, counter), so child ``i`` of a draw can be made
alone (``only=i``), equal to row ``i`` of the whole draw, and a lineage replay rebuilds only
the child that survived, with no random generator object per step. A child's mutated
positions are the first m distinct values of its sequence of uniform draws from 0..size-1
(every m-subset equally likely), applied in ascending order: the work is proportional to m,
not to the genome's size. Point mutation runs in a small C kernel (:mod:`evogan.native`) with
a numpy twin that gives the same bits where no compiler exists.
"""

from __future__ import annotations

import array
import ctypes
import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from evogan import native

SOURCE = Path(__file__).with_name("_mutation.c")
ReplayStep = tuple[int, int, int, float, float]
"""``(seed, children drawn, the child kept, rate, power)`` of one mutation step."""
_WORD = 2**64 - 1
_GOLDEN = 0x9E3779B97F4A7C15
_UNIT = 2.0**-52


def mutated_count(size: int, rate: float) -> int:
    """How many of ``size`` weights a child changes at mutation rate ``rate``."""
    if not 0 < rate <= 1:
        raise ValueError(f"mutation rate must be in (0, 1], got {rate}")
    return min(size, max(1, round(rate * size)))


def splitmix(seed: int, counter: int) -> int:
    """splitmix64 output ``counter`` of the stream ``seed`` (the C kernel's ``mix``)."""
    value = (counter * _GOLDEN + seed) & _WORD
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _WORD
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _WORD
    return value ^ (value >> 31)


def counter_bits(seed: int, children: range, width: int) -> np.ndarray:
    """(len(children), width) uint64: :func:`splitmix` of counters ``child * width + j``."""
    firsts = np.asarray([child * width for child in children], dtype=np.uint64)
    return mixed(seed, firsts.reshape(-1, 1) + np.arange(width, dtype=np.uint64))


def mixed(seed: int, counters: np.ndarray) -> np.ndarray:
    """:func:`splitmix` of every uint64 in ``counters``."""
    bits = counters * np.uint64(_GOLDEN)
    bits += np.uint64(seed)
    bits ^= bits >> np.uint64(30)
    bits *= np.uint64(0xBF58476D1CE4E5B9)
    bits ^= bits >> np.uint64(27)
    bits *= np.uint64(0x94D049BB133111EB)
    bits ^= bits >> np.uint64(31)
    return bits


def draw_seed(generator: torch.Generator) -> int:
    """A 62-bit seed from ``generator`` (a mutation step's, an island's stream key)."""
    return int(torch.randint(2**62, (1,), generator=generator, dtype=torch.int64))


def _seeds(seed: int) -> tuple[int, int, int]:
    """Seeds of the positions, the values and the second values of one mutation step (the C
    replay derives the first two the same way)."""
    return splitmix(seed, 0), splitmix(seed, 1), splitmix(seed, 2)


def _children(count: int, only: int | None) -> range:
    if only is None:
        return range(count)
    if not 0 <= only < count:
        raise ValueError(f"child {only} does not exist among {count} children")
    return range(only, only + 1)


def chosen_positions(size: int, chosen: int, seed: int, child: int) -> np.ndarray:
    """The ``chosen`` positions child ``child`` mutates, ascending: the first distinct values
    of the draws ``splitmix(seed, child * 2**32 + i) * size >> 64`` (the C kernel's
    ``choose``)."""
    if chosen == size:
        return np.arange(size, dtype=np.int64)
    if size >= 2**32:
        raise ValueError(f"genomes of {size} weights need the C kernel (numpy path: < 2**32)")
    found = np.empty(0, dtype=np.int64)
    start, batch = child << 32, chosen + chosen // 2 + 16
    while found.size < chosen:
        bits = mixed(seed, np.arange(start, start + batch, dtype=np.uint64))
        drawn = _scaled(bits, size)
        sequence = np.concatenate([found, drawn])  # earlier finds first: they keep their place
        _, first = np.unique(sequence, return_index=True)
        found = sequence[np.sort(first)][:chosen]
        start += batch
    return np.sort(found)


def _scaled(bits: np.ndarray, size: int) -> np.ndarray:
    """``bits * size >> 64`` without 128-bit integers (size < 2**32): a uniform index."""
    high, low = bits >> np.uint64(32), bits & np.uint64(0xFFFFFFFF)
    n = np.uint64(size)
    return ((high * n + ((low * n) >> np.uint64(32))) >> np.uint64(32)).astype(np.int64)


def mutation_mask(size: int, chosen: int, seed: int, children: range) -> np.ndarray:
    """(len(children), size) bool: the positions each child mutates (``chosen`` per row)."""
    mask = np.zeros((len(children), size), dtype=bool)
    for row, child in enumerate(children):
        mask[row, chosen_positions(size, chosen, seed, child)] = True
    return mask


@functools.cache
def kernel() -> ctypes.CDLL | None:
    """The point-mutation kernel, or None (then the numpy twin runs)."""
    pointer, count, word, real = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_double
    mutation = [pointer, count, count, word, word, count, count, real, pointer, pointer]
    replay = [pointer, count, count, *[pointer] * 5, count, pointer, pointer]
    signatures = {"evogan_point_mutation": mutation, "evogan_point_replay": replay}
    return native.load(
        SOURCE, "the mutation kernel", "mutation uses the slower numpy path", signatures
    )


def point_mutation(
    parent: Tensor,
    count: int,
    rate: float,
    power: float,
    seed: int,
    only: int | None = None,
) -> Tensor:
    """Children of ``parent`` (or just child ``only``) of the step ``seed``: the chosen weights
    get ``power * U(-1, 1)`` added."""
    positions, values, _ = _seeds(seed)
    children = _children(count, only)
    size = parent.numel()
    chosen = mutated_count(size, rate)
    source = parent.detach().reshape(-1).to("cpu", torch.float32).contiguous()
    library = kernel()
    if library is not None:
        rows = torch.empty(len(children), size)
        scratch = torch.empty(2 * size, dtype=torch.int64)  # the kernel's positions and marks
        status = library.evogan_point_mutation(
            source.data_ptr(), size, chosen, positions, values, children.start, len(children),
            float(power), rows.data_ptr(), scratch.data_ptr(),
        )  # fmt: skip
        if status != 0:
            raise RuntimeError(f"evogan_point_mutation rejected its arguments (status {status})")
    else:
        mask = mutation_mask(size, chosen, positions, children)
        bits = counter_bits(values, children, chosen) >> np.uint64(12)
        unit = ((bits << np.uint64(1)).astype(np.int64) - 2**52).astype(np.float64) * _UNIT
        array = np.broadcast_to(source.numpy(), mask.shape).copy()
        array[mask] += (unit * power).astype(np.float32).reshape(-1)
        rows = torch.from_numpy(array)
    return rows.to(parent.device, parent.dtype)


def point_replay(
    genome: Tensor, steps: Sequence[ReplayStep], keep: Sequence[int] = ()
) -> list[Tensor]:
    """``genome`` (size,) after each step in turn, keeping that step's child ``only``: what
    ``point_mutation(..., only=...)[0]`` step by step gives, in one kernel call. Returns the
    genomes after the step counts in ``keep`` (ascending, each in 1..len(steps)), then the
    final one."""
    if list(keep) != sorted(set(keep)) or any(not 0 < after <= len(steps) for after in keep):
        raise ValueError(f"keep must be ascending step counts in 1..{len(steps)}, got {keep}")
    library = kernel()
    if library is None or not steps:
        kept = []
        for done, (seed, count, only, rate, power) in enumerate(steps, start=1):
            genome = point_mutation(genome, count, rate, power, seed, only)[0]
            if done in keep:
                kept.append(genome)
        return [*kept, genome]
    size = genome.numel()
    seeds, counts, chosen_children, rates, powers = zip(*steps, strict=True)
    for count, only in zip(counts, chosen_children, strict=True):
        _children(count, only)  # an index outside its draw is a corrupt lineage: say so
    # array.array, not numpy: a few short rows, whose addresses cost nothing to take
    arrays = (
        array.array("q", [mutated_count(size, rate) for rate in rates]),
        array.array("Q", seeds),
        array.array("q", chosen_children),
        array.array("d", powers),
    )
    out = genome.detach().to("cpu", torch.float32).numpy().reshape(-1).copy()  # replayed in place
    kept = np.empty((len(keep), size), dtype=np.float32)
    after = array.array("q", keep)
    addresses = [values.buffer_info()[0] for values in arrays]
    scratch = torch.empty(2 * size, dtype=torch.int64)  # the kernel's positions and marks
    status = library.evogan_point_replay(
        out.ctypes.data, size, len(steps), *addresses, scratch.data_ptr(),
        len(keep), after.buffer_info()[0], kept.ctypes.data,
    )  # fmt: skip
    if status != 0:
        raise RuntimeError(f"evogan_point_replay rejected its arguments (status {status})")
    return [torch.from_numpy(row).to(genome.device, genome.dtype) for row in (*kept, out)]


def replace_mutation(
    parent: Tensor,
    count: int,
    rate: float,
    sigma: float,
    seed: int,
    only: int | None = None,
) -> Tensor:
    """Children of ``parent`` (or just child ``only``) of the step ``seed``: the chosen weights
    are redrawn from N(0, sigma^2) (original code), by Box-Muller from counter-based uniforms."""
    positions, radii, angles = _seeds(seed)
    children = _children(count, only)
    size = parent.numel()
    chosen = mutated_count(size, rate)
    mask = mutation_mask(size, chosen, positions, children)
    uniform = [
        (counter_bits(seed, children, chosen) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        for seed in (radii, angles)
    ]
    fresh = np.sqrt(-2 * np.log1p(-uniform[0])) * np.cos(2 * np.pi * uniform[1]) * sigma
    source = parent.detach().reshape(-1).to("cpu", torch.float32).numpy()
    array = np.broadcast_to(source, mask.shape).copy()
    array[mask] = fresh.astype(np.float32).reshape(-1)
    return torch.from_numpy(array).to(parent.device, parent.dtype)
