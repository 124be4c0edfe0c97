"""How far does a trained generator's energy scale swing between saved snapshots?

    python scripts/gan_energy_scale.py populations/RUN/best_model.h5 populations/RUN/last_model.h5

For each generator file: the mean sampling fraction (ECAL sum / primary energy) of generated
showers over that of synthetic showers for the same primaries (uniform in the run's training
range), with the generator in train mode on batches of the training size per rank, as the
generator's batch terms see it during training; with its standard error over batches. Two
snapshots of one training that differ by more than their errors show the step-to-step
oscillation that ``trainer.generator_average`` averages out (docs/tutorials/gan.md).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from evogan.data.synthetic import generate_showers
from evogan.errors import EvoganError
from evogan.gan3d.model.model_file import load_generator
from evogan.gan3d.model.networks import sample, to_gev


def scale_ratio(path: str, batches: int, energy_range: tuple[float, float], seed: int) -> tuple:
    """(mean of per-batch generated / real mean sampling fraction, its standard error)."""
    spec, generator, _ = load_generator(path)
    generator.train()
    draws = np.random.default_rng(seed)
    noise = torch.Generator().manual_seed(seed)
    ratios = []
    for _ in range(batches):
        energy = draws.uniform(*energy_range, spec.batch_size)
        real = generate_showers(energy, draws).sum(axis=(1, 2, 3)) / energy
        conditions = torch.as_tensor(energy, dtype=torch.float32)
        theta = torch.full_like(conditions, np.pi / 2) if spec.conditioning.angle else None
        with torch.no_grad():
            fake = to_gev(spec, sample(spec, generator, conditions, theta, noise))
        generated = fake.sum(dim=(1, 2, 3)).numpy() / energy
        ratios.append(generated.mean() / real.mean())
    return float(np.mean(ratios)), float(np.std(ratios, ddof=1) / np.sqrt(batches))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="generator files (.h5)")
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--energy-range", type=float, nargs=2, default=(10.0, 200.0))
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    if args.batches < 2:
        raise SystemExit("gan_energy_scale: --batches must be at least 2 (for the error)")
    for path in args.models:
        try:
            ratio, error = scale_ratio(path, args.batches, tuple(args.energy_range), args.seed)
        except EvoganError as exc:
            raise SystemExit(f"gan_energy_scale: {exc}") from None
        print(f"{path}: generated / real sampling fraction {ratio:.3f} +- {error:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
