"""Random streams derived from one root seed and a path of keys (island, rank, purpose).

Every consumer gets its own ``torch.Generator``; nothing seeds global state, so islands and ranks
are independent and a run is reproducible from (root seed, keys).
"""

from __future__ import annotations

import zlib

import numpy as np
import torch


def derive_seed(root: int, *keys: int | str) -> int:
    """A 63-bit seed for ``keys`` under ``root`` (strings hash stably across processes)."""
    words = [k if isinstance(k, int) else zlib.crc32(k.encode()) for k in keys]
    spawn_key = tuple(abs(w) for w in words)
    sequence = np.random.SeedSequence(entropy=abs(int(root)), spawn_key=spawn_key)
    return int(sequence.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def torch_generator(
    root: int, *keys: int | str, device: str | torch.device = "cpu"
) -> torch.Generator:
    """A ``torch.Generator`` seeded with :func:`derive_seed`."""
    generator = torch.Generator(device=device)
    generator.manual_seed(derive_seed(root, *keys))
    return generator


def numpy_generator(root: int, *keys: int | str) -> np.random.Generator:
    """A numpy ``Generator`` seeded with :func:`derive_seed`."""
    return np.random.default_rng(derive_seed(root, *keys))


def seeded(seed: int) -> torch.Generator:
    """A ``torch.Generator`` seeded with ``seed`` itself (a draw a lineage names by its seed)."""
    generator = torch.Generator()
    generator.manual_seed(int(seed))
    return generator
