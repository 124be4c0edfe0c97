"""Mutation operators on weight genomes (rows of one float tensor), vectorised over children.

Exactly ``max(1, round(rate * size))`` weights of every child change, so a low rate late in a
run still moves every child (a Bernoulli mask would leave many children identical to the
parent and waste their evaluations).

Random numbers are counter-based: one seed is drawn from the torch generator, and every number
after it is splitmix64 of (seed, counter), so child ``i`` of a draw can be made alone
(``only=i``), equal to row ``i`` of the whole draw, and a lineage replay rebuilds only the
child that survived. A child's mutated positions are those whose 64-bit key is among the m
smallest (every m-subset equally likely), in ascending order. Point mutation runs in a small C
kernel (:mod:`evogan.native`, about 100x fewer microseconds than per-row torch ``topk``) with a
numpy twin that gives the same bits where no compiler exists.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from evogan import native

SOURCE = Path(__file__).with_name("_mutation.c")
ReplayStep = tuple[torch.Generator, int, int, float, float]
"""``(generator, children drawn, the child kept, rate, power)`` of one mutation step."""
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
    bits = (firsts.reshape(-1, 1) + np.arange(width, dtype=np.uint64)) * np.uint64(_GOLDEN)
    bits += np.uint64(seed)
    bits ^= bits >> np.uint64(30)
    bits *= np.uint64(0xBF58476D1CE4E5B9)
    bits ^= bits >> np.uint64(27)
    bits *= np.uint64(0x94D049BB133111EB)
    bits ^= bits >> np.uint64(31)
    return bits


def _seeds(generator: torch.Generator) -> tuple[int, int, int]:
    """Seeds of the positions, the values and the second values from one generator draw."""
    seed = int(torch.randint(2**62, (1,), generator=generator, dtype=torch.int64))
    return splitmix(seed, 0), splitmix(seed, 1), splitmix(seed, 2)


def _children(count: int, only: int | None) -> range:
    if only is None:
        return range(count)
    if not 0 <= only < count:
        raise ValueError(f"child {only} does not exist among {count} children")
    return range(only, only + 1)


def mutation_mask(size: int, chosen: int, seed: int, children: range) -> np.ndarray:
    """(len(children), size) bool: the positions each child mutates (``chosen`` per row)."""
    if chosen == size:
        return np.ones((len(children), size), dtype=bool)
    keys = counter_bits(seed, children, size)
    threshold = np.partition(keys, chosen - 1, axis=1)[:, chosen - 1 : chosen]
    mask = keys <= threshold
    return mask & (np.cumsum(mask, axis=1) <= chosen)  # equal keys: the first ones, as in C


@functools.cache
def kernel() -> ctypes.CDLL | None:
    """The point-mutation kernel, or None (then the numpy twin runs)."""
    library = native.load(SOURCE, "the mutation kernel", "mutation uses the slower numpy path")
    if library is None:
        return None
    function = library.evogan_point_mutation
    function.restype = ctypes.c_int
    pointer, count, word = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64
    function.argtypes = [pointer, count, count, word, word, count, count, ctypes.c_double]
    function.argtypes += [pointer, pointer]
    replay = library.evogan_point_replay
    replay.restype = ctypes.c_int
    replay.argtypes = [pointer, count, count, pointer, pointer, pointer, pointer, pointer, pointer]
    return library


def point_mutation(
    parent: Tensor,
    count: int,
    rate: float,
    power: float,
    generator: torch.Generator,
    only: int | None = None,
) -> Tensor:
    """Children of ``parent`` (or just child ``only``): the chosen weights get
    ``power * U(-1, 1)`` added."""
    positions, values, _ = _seeds(generator)
    children = _children(count, only)
    size = parent.numel()
    chosen = mutated_count(size, rate)
    source = parent.detach().reshape(-1).to("cpu", torch.float32).contiguous()
    library = kernel()
    if library is not None:
        rows = torch.empty(len(children), size)
        scratch = torch.empty(2 * size, dtype=torch.int64)  # the kernel's uint64 keys
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


def point_replay(genome: Tensor, steps: Sequence[ReplayStep]) -> Tensor:
    """``genome`` (size,) after each step in turn, keeping that step's child ``only``: what
    ``point_mutation(..., only=...)[0]`` step by step gives, in one kernel call."""
    library = kernel()
    if library is None:
        for generator, count, only, rate, power in steps:
            genome = point_mutation(genome, count, rate, power, generator, only)[0]
        return genome
    size = genome.numel()
    seeds = np.asarray([_seeds(step[0])[:2] for step in steps], dtype=np.uint64).reshape(-1, 2)
    chosen = np.asarray([mutated_count(size, step[3]) for step in steps], dtype=np.int64)
    children = np.asarray([_children(step[1], step[2]).start for step in steps], dtype=np.int64)
    powers = np.asarray([step[4] for step in steps], dtype=np.float64)
    positions, values = np.ascontiguousarray(seeds[:, 0]), np.ascontiguousarray(seeds[:, 1])
    out = genome.detach().reshape(-1).to("cpu", torch.float32).clone()
    scratch = torch.empty(2 * size, dtype=torch.int64)
    status = library.evogan_point_replay(
        out.data_ptr(), size, len(steps), chosen.ctypes.data, positions.ctypes.data,
        values.ctypes.data, children.ctypes.data, powers.ctypes.data, scratch.data_ptr(),
    )  # fmt: skip
    if status != 0:
        raise RuntimeError(f"evogan_point_replay rejected its arguments (status {status})")
    return out.to(genome.device, genome.dtype)


def replace_mutation(
    parent: Tensor,
    count: int,
    rate: float,
    sigma: float,
    generator: torch.Generator,
    only: int | None = None,
) -> Tensor:
    """Children of ``parent`` (or just child ``only``): the chosen weights are redrawn from
    N(0, sigma^2) (original code), by Box-Muller from counter-based uniforms."""
    positions, radii, angles = _seeds(generator)
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
