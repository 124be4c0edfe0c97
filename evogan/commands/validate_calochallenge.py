"""The CaloChallenge part of ``evogan validate``: the metric set of
:mod:`evogan.physics.calochallenge` for the scored showers, and the data of its figure."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from evogan.errors import DataError

if TYPE_CHECKING:
    from evogan.data import ShowerChunk, ShowerDataset
    from evogan.detectors import Detector


def calochallenge_section(
    reference: ShowerChunk,
    generated: ShowerChunk | None,
    models: list,
    args: argparse.Namespace,
    report: dict,
    detector: Detector | None = None,
    draw: bool = True,
) -> dict | None:
    """The CaloChallenge metric set into ``report`` when asked for (or the detector is a
    cylinder), and the figure data of both samples (None when ``draw`` is false); None without
    generated showers in hand (a generator's, the first of ``models``, are made again, same
    seed, only for the metric set). ``detector``: the reference's, as read; None for a cell
    window no shipped detector has, which gets no CaloChallenge section."""
    from evogan.physics.calochallenge import calochallenge_metrics, figure_data
    from evogan.progress import progress

    if detector is None:  # refused up front when asked for: require_detector
        return None
    wanted = args.calochallenge or args.format == "calochallenge"
    wanted = wanted or detector.geometry.kind == "cylindrical"
    if generated is not None:
        gen, gen_energy = generated.ecal, generated.energy
    elif wanted:
        gen, gen_energy = _regenerate(reference, models[0], args), reference.energy
    else:
        return None
    to_flat = detector.geometry.to_flat
    gen_flat, ref_flat = to_flat(np.asarray(gen)), to_flat(np.asarray(reference.ecal))
    if wanted:
        with progress("CaloChallenge metrics", total=1, unit="sets") as task:
            report["calochallenge"] = calochallenge_metrics(
                gen_flat, gen_energy, ref_flat, reference.energy, detector, seed=args.seed
            )
            task.advance(1)
    if not draw:
        return None
    return {
        "reference": figure_data(ref_flat, reference.energy, detector),
        "generated": figure_data(gen_flat, gen_energy, detector),
        "title": f"{detector.describe()}: {Path(report['generated']).name} against the reference",
    }


def require_detector(view: ShowerDataset, args: argparse.Namespace) -> None:
    """Refuse the CaloChallenge metric set, before any showers are read, for a reference
    whose cells are no known detector's."""
    if view.detector is None and (args.calochallenge or args.format == "calochallenge"):
        raise DataError(
            f"the reference's cells {tuple(view.shape)} are no shipped detector's: set "
            "data.detector for the CaloChallenge metric set"
        )


def _regenerate(reference: ShowerChunk, model: tuple, args: argparse.Namespace) -> np.ndarray:
    """The first generator's showers for the reference's conditions, exactly those it was
    scored on (same seed, same noise stream)."""
    import torch

    from evogan.gan3d.model.generate import generate_showers

    spec, generator = model
    theta = reference.theta if spec.conditioning.angle else None
    rng = torch.Generator().manual_seed(args.seed)
    return generate_showers(
        spec, generator, reference.energy, theta, rng, args.batch_size, precision=args.precision
    )


def add_calochallenge_options(parser: argparse.ArgumentParser) -> None:
    """``--calochallenge`` and ``--format``."""
    parser.add_argument(
        "--calochallenge",
        action="store_true",
        help="also report the CaloChallenge metric set (classifier AUC/JSD on voxels and on "
        "high-level features, FPD, KPD, separation power per feature; each with its error and "
        "the floor of the reference's halves). Automatic for cylindrical (CaloChallenge) "
        "detectors; asked for on Cartesian ones, as its four network trainings add seconds to "
        "minutes to a run that the selection score alone keeps short",
    )
    parser.add_argument(
        "--format",
        choices=("text", "calochallenge"),
        default="text",
        help="text: the score summary (default); calochallenge: the metric set as a table "
        "laid out like the published results (implies --calochallenge)",
    )


def calochallenge_figure(data: dict, out: Path, label: str) -> Path:
    """``calochallenge.png`` in ``out``: the challenge's kind of figures for both samples."""
    from evogan.plots.calochallenge import plot_calochallenge

    return plot_calochallenge(
        data["reference"],
        data["generated"],
        out / "calochallenge.png",
        title=data["title"],
        label=label,
    )
