"""Small 3DGAN helpers shared by the GAN tests: the tiny spec, saved generators, shower files."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from evogan.config import load_config
from evogan.data.writer import ShowerWriter
from evogan.gan3d.model.model_file import save_generator
from evogan.gan3d.model.networks import Generator, build_models
from evogan.gan3d.model.spec import GanSpec, load_spec
from evogan.store import BEST_MODEL, load_weights

REPO = Path(__file__).resolve().parents[1]
TRAINED_FILES = ("best_model.h5", "last_model.h5", "discriminator.h5")
"""The weight files a GAN training leaves in its run directory."""
TINY = REPO / "configs" / "gan3d_tiny.yaml"


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one thread in the block, as the ``evogan`` subprocesses of the tests run
    (``OMP_NUM_THREADS=1``): matrix products round differently on more threads, and showers
    made again must match a command's bit for bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def tiny_spec() -> GanSpec:
    return load_spec(TINY)


def tiny_generator(seed: int) -> Generator:
    return build_models(tiny_spec(), torch.Generator().manual_seed(seed))[0]


def save_tiny_generator(path: Path, seed: int, trained_on: dict | None = None) -> Path:
    """A freshly initialised tiny generator, saved like a trainer saves one (``trained_on``:
    the conditions it records, :mod:`evogan.gan3d.model.conditions`)."""
    meta = {"seed": seed} if trained_on is None else {"seed": seed, "trained_on": trained_on}
    return save_generator(path, tiny_spec(), tiny_generator(seed), meta)


def toy_showers(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shower-like 51x51x25 images in GeV: a Gaussian core whose sum is 2% of the energy."""
    rng = np.random.default_rng(seed)
    energy = rng.uniform(20.0, 150.0, n).astype(np.float32)
    theta = rng.uniform(1.3, 1.8, n).astype(np.float32)
    x = np.arange(51)[:, None, None]
    y = np.arange(51)[None, :, None]
    z = np.arange(25)[None, None, :]
    shape = np.exp(-((x - 25) ** 2 + (y - 25) ** 2) / 4.0) * np.exp(-((z - 10) ** 2) / 30.0)
    shape = (shape / shape.sum()).astype(np.float32)
    noise = rng.uniform(0.8, 1.2, (n, 51, 51, 25)).astype(np.float32)
    ecal = 0.02 * energy[:, None, None, None] * shape[None] * noise
    ecal[ecal < 1e-6] = 0.0
    return ecal, energy, theta


def write_showers(path: Path, n: int, seed: int = 0) -> Path:
    ecal, energy, theta = toy_showers(n, seed)
    with ShowerWriter(path, (51, 51, 25)) as writer:
        writer.append(ecal, energy, theta)
    return path


def tiny_campaign(path: Path, fitness: dict[str, float]) -> Path:
    """A search campaign directory laid out as ``evogan search`` leaves it: one table row and
    one tiny generator (member 0) per candidate id, written in ``fitness``'s order (the last
    is the newest file); a non-finite fitness is a diverged candidate."""
    from evogan.search.campaign import Campaign

    config = load_config(REPO / "configs" / "arch_search_tiny.yaml", [f"base={TINY}"])
    campaign = Campaign.create(config, 1, path)
    for seed, (name, value) in enumerate(fitness.items()):
        save_tiny_generator(campaign.candidate_dir(name) / "member-0" / BEST_MODEL, seed)
        status = "ok" if np.isfinite(value) else "nan"
        row = {"id": name, "status": status, "fitness": value, "params": 100, "flops": 200}
        campaign.append("island-000", {**row, "member_seeds": [seed], "elapsed_s": seed})
    return campaign.path


def assert_same_weights(run: Path, straight: Path) -> None:
    """Every weight file of ``run`` equals ``straight``'s tensor for tensor (a resumed run
    against an uninterrupted one)."""
    for name in TRAINED_FILES:
        resumed, _ = load_weights(run / name)
        expected, _ = load_weights(straight / name)
        assert resumed.keys() == expected.keys()
        assert all(resumed[k].equal(expected[k]) for k in expected), name
