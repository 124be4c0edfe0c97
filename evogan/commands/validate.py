"""``evogan validate MODEL_OR_RUN DATA``: physics validation of a 3DGAN generator (or ensemble).

Generates one GAN shower per reference shower (same primary energy and angle), compares the
observables of :mod:`evogan.physics.validation`, and writes ``score.json`` and
``validation.png`` into ``--out`` (default: ``RUN/validation`` for a run directory, else
``validation/`` next to the model file).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evogan.commands.options import require_counts
from evogan.errors import EvoganError


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(name, help="compare a 3DGAN generator's showers with data")
    parser.add_argument("model", type=Path, help="generator .h5 file or gan3d run directory")
    parser.add_argument("data", help="reference HDF5 shower file(s): path or glob")
    parser.add_argument("--out", type=Path, help="output directory (created if missing)")
    parser.add_argument(
        "--events", type=int, default=2000, help="reference showers to use (default: 2000)"
    )
    parser.add_argument(
        "--ensemble",
        nargs="+",
        type=Path,
        default=[],
        metavar="MODEL",
        help="more generators (files or run directories): validate MODEL plus these as an "
        "ensemble, same noise and conditions for every member",
    )
    parser.add_argument("--bins", type=int, default=5, help="equal-count energy bins (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="noise seed (same seed, same showers)")
    parser.add_argument("--batch-size", type=int, default=128, help="showers per generator call")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    require_counts(args, "--events", "--bins", "--batch-size")
    from evogan.data.reader import ShowerDataset, open_files
    from evogan.models.gan_io import find_generator, load_generator

    paths = [find_generator(p) for p in [args.model, *args.ensemble]]
    models = [load_generator(p)[:2] for p in paths]
    spec = models[0][0]
    dataset = ShowerDataset.from_files(open_files(args.data))
    if tuple(dataset.shape) != tuple(spec.output_shape):
        raise EvoganError(
            f"data cells {dataset.shape} must match the generator's output_shape "
            f"{tuple(spec.output_shape)}; pass showers of the window the model was trained on"
        )
    out = args.out or _default_out(args.model)
    out.mkdir(parents=True, exist_ok=True)
    chunk = dataset.read(args.events)
    files = [str(p) for p in dataset.files]
    print(f"validating {paths[0]} on {len(chunk)} showers from {', '.join(files)}")
    report = _validate(models, paths, chunk, out / "validation.png", args)
    report["data"] = files
    from evogan.store import atomic_write, to_json

    atomic_write(out / "score.json", to_json(report, indent=2) + "\n")
    line = f"score {report['score']:.4f} (sampling fraction {report['sampling_fraction']:.4f}, "
    line += f"profiles {report['profiles']:.4f}, moments {report['moments']:.4f})"
    if "ensemble" in report:
        ens = report["ensemble"]
        line += (
            f"; ensemble of {ens['members']}: score {ens['score_mean']:.4f} +- "
            f"{ens['score_std']:.4f}, ensemble-mean score {ens['ensemble_mean_score']['score']:.4f}"
        )
    print(line)
    print(f"wrote {out / 'score.json'} and {out / 'validation.png'}")
    return 0


def _validate(models: list, paths: list[Path], chunk, png: Path, args) -> dict:
    import torch

    from evogan.physics.ensemble import ensemble_validation
    from evogan.physics.validation import (
        equal_count_edges,
        generate_showers,
        shower_stats,
        validation_score,
    )
    from evogan.plots.gan import plot_validation

    spec, generator = models[0]
    theta = chunk.theta if spec.conditioning.angle else None
    edges = equal_count_edges(chunk.energy, args.bins)
    reference = shower_stats(chunk.ecal, chunk.energy, edges)
    rng = torch.Generator().manual_seed(args.seed)
    showers = generate_showers(spec, generator, chunk.energy, theta, rng, args.batch_size)
    stats = shower_stats(showers, chunk.energy, edges)
    report: dict = {
        **validation_score(reference, stats),
        "model": str(paths[0]),
        "spec": spec.name,
        "events": len(chunk),
        "seed": args.seed,
        "reference": reference.to_json(),
        "gan": stats.to_json(),
    }
    if len(models) > 1:
        result = ensemble_validation(
            models, reference, chunk.energy, theta, args.seed, args.batch_size
        )
        report["ensemble"] = {"models": [str(p) for p in paths], **result.to_json()}
        plot_validation(
            reference,
            result.mean,
            png,
            gan_std=result.std,
            label=f"GAN ensemble ({len(models)})",
            title=f"{spec.name}: ensemble of {len(models)}",
        )
    else:
        plot_validation(reference, stats, png, title=f"{spec.name}: {paths[0].name}")
    return report


def _default_out(model: Path) -> Path:
    return model / "validation" if model.is_dir() else model.parent / "validation"
