"""Score known damage to a synthetic shower set against the independent-sample floor.

The evidence that the selection score ranks generators correctly (docs/explanation/validation.md): a
reference and an independent sample of the same physics are drawn from the synthetic GFLASH
generator, the sample is damaged by every distortion of :mod:`evogan.physics.distortions`, and
each damaged copy is scored. Prints a Markdown table::

    python scripts/validation_distortions.py --events 1000

``--angles`` draws both sets at polar angles of 60-120 deg (as the variable-angle public files)
and scores, instead of the distortions, the two ways a generator can ignore its angle label:
each shower made at another event's angle, and every shower made at 90 deg.
"""

from __future__ import annotations

import argparse

import numpy as np

from evogan.config.data import DataConfig
from evogan.data.synthetic import generate_showers, synthesize
from evogan.physics import Reference
from evogan.physics.distortions import SINGLE, SUITE
from evogan.progress import progress


def _sample(events: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    parts = list(synthesize(events, (10.0, 100.0), seed))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _inclined(events: int, seed: int, made: str = "true") -> tuple[np.ndarray, ...]:
    """Showers, energies and true angles (rad) of 60-120 deg; ``made``: the angle each shower
    is made at, its own (``true``), another event's (``shuffled``) or 90 deg (``perpendicular``)."""
    rng = np.random.default_rng(seed)
    energy = rng.uniform(10.0, 100.0, events).astype(np.float32)
    theta = rng.uniform(np.radians(60.0), np.radians(120.0), events).astype(np.float32)
    angle = {
        "true": theta,
        "shuffled": rng.permutation(theta),
        "perpendicular": np.full(events, np.pi / 2, dtype=np.float32),
    }[made]
    blocks = range(0, events, 50)
    ecal = [generate_showers(energy[i : i + 50], rng, theta=angle[i : i + 50]) for i in blocks]
    return np.concatenate(ecal), energy, theta


def _angle_cases(events: int, seed: int) -> tuple[tuple, list]:
    """The inclined reference, and the independent sample with the two label failures."""
    sample = {
        made: _inclined(events, seed + 1, made) for made in ("true", "shuffled", "perpendicular")
    }
    cases = [
        ("independent sample (no damage)", sample["true"]),
        ("angle label ignored: another event's angle", sample["shuffled"]),
        ("angle label ignored: all at 90 deg", sample["perpendicular"]),
    ]
    return _inclined(events, seed), cases


def _damage_cases(events: int, seed: int) -> tuple[tuple, list]:
    """The reference, and the independent sample with every distortion of the suite."""
    ecal, energy = _sample(events, seed + 1)
    distortions = [("independent sample (no damage)", lambda e, _energy, _rng: e)]
    for small, large in SUITE.values():
        distortions += [small, large]
    distortions += list(SINGLE.items())
    cases = [
        (name, (distortion(ecal, energy, np.random.default_rng(5)), energy, None))
        for name, distortion in distortions
    ]
    return (*_sample(events, seed), None), cases


def _row(name: str, result, floor: dict) -> str:
    m = result.metrics

    def cell(key: str, digits: int = 3) -> str:
        if key not in m:
            return "-"
        return f"{m[key]['value']:.{digits}g} +- {m[key]['error']:.2g}"

    sigma = (result.score - floor["score"]) / max(floor["spread"], 1e-12)
    return (
        f"| {name} | {result.score:.3f} | {sigma:.0f} | {cell('separation')} | "
        f"{cell('classifier_auc')} | {cell('fpd')} | {cell('sf_error', 2)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000, help="showers per set")
    parser.add_argument("--bins", type=int, default=5, help="energy bins")
    parser.add_argument("--seed", type=int, default=1, help="reference seed (sample: seed + 1)")
    parser.add_argument(
        "--angles", action="store_true", help="inclined showers and angle-label failures"
    )
    args = parser.parse_args()
    cases_of = _angle_cases if args.angles else _damage_cases
    (ref_ecal, ref_energy, ref_theta), cases = cases_of(args.events, args.seed)
    reference = Reference.from_showers(
        ref_ecal,
        ref_energy,
        cell_threshold=DataConfig().cell_threshold,  # as the data would be read
        bins=args.bins,
        theta=ref_theta,
    )
    floor = reference.floor()
    rows = []
    with progress("distortions", total=len(cases), unit="sets") as task:
        for name, (ecal, energy, theta) in cases:
            result = reference.score(ecal, energy, theta)
            rows.append(_row(name, result, floor))
            task.advance(1, note=f"{name}: {result.score:.3f}")
    angles = ", 60-120 deg" if args.angles else ""
    print(
        f"{args.events} reference and {args.events} generated showers (10-100 GeV{angles}, "
        f"{args.bins} energy bins); floor {floor['score']:.3f} +- {floor['spread']:.3f} "
        f"(halves of {floor['events']}, {len(floor['splits'])} splits)\n"
    )
    print("| distortion | score | (score - floor) / spread | separation | AUC | FPD | SF term |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
