"""``evogan validate GENERATED REFERENCE``: score showers against reference showers.

GENERATED is a 3DGAN generator file, a gan3d run directory (one shower per reference shower,
same primary energy and angle) or shower files in any layout the reader reads (another tool's
output, or Geant4 against Geant4). The selection score of :mod:`evogan.physics.score` is
printed next to its independent-sample floor, and with ``--calochallenge`` (automatic for
cylindrical detectors) the CaloChallenge metric set of :mod:`evogan.physics.calochallenge`;
``score.json``, ``features.png``, ``profiles.png`` and ``calochallenge.png`` go to ``--out``
(default ``RUN/validation`` for a run directory, else ``validation/`` beside GENERATED);
``--no-figures`` writes ``score.json`` alone (the figures take most of a small validation's
time: a loop over many checkpoints that reads only the scores skips them).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from evogan.commands.options import (
    add_precision,
    add_read_options,
    check_out_dir,
    hint_precision,
    read_options,
    refuse_campaign,
    require_counts,
    require_finite,
)
from evogan.commands.validate_calochallenge import add_calochallenge_options
from evogan.errors import DataError, EvoganError

if TYPE_CHECKING:  # these load only when the command reads and scores data
    from evogan.data import ShowerChunk
    from evogan.data.reader import ShowerDataset
    from evogan.physics import Reference

RANGE_TOLERANCE = 0.05  # of the reference's energy span: sampling noise at the range ends
DEFAULT_EVENTS = 2000


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(name, help="score generated showers against reference showers")
    parser.add_argument(
        "generated", help="generator .h5 file, gan3d run directory, or shower file(s) (path/glob)"
    )
    parser.add_argument("reference", help="reference HDF5 shower file(s): path or glob")
    parser.add_argument("--out", type=Path, help="output directory (created if missing)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument(
        "--no-figures",
        action="store_true",
        help="write score.json only, no figures (they take most of a small validation's time)",
    )
    parser.add_argument(
        "--events", type=int, help=f"reference showers to use (default: {DEFAULT_EVENTS})"
    )
    parser.add_argument(
        "--ensemble",
        nargs="+",
        type=Path,
        default=[],
        metavar="MODEL_OR_RUN",
        help="more generators (files, or run directories: their per-rank generators): score "
        "GENERATED plus these as an ensemble, same noise and conditions for every member",
    )
    parser.add_argument("--beta", type=float, help="ensemble score = mean + beta x std (default 1)")
    parser.add_argument("--bins", type=int, default=5, help="equal-count energy bins (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="noise seed (same seed, same showers)")
    parser.add_argument("--batch-size", type=int, default=128, help="showers per generator call")
    add_calochallenge_options(parser)
    add_read_options(parser, "the REFERENCE files")
    add_precision(parser)
    parser.set_defaults(handler=run)


@dataclass
class Job:
    """What to score: generator members or a shower set, with the reference."""

    reference: object  # evogan.physics.Reference
    chunk: object  # the reference ShowerChunk
    files: list[str]
    members: list[Path] = field(default_factory=list)
    models: list = field(default_factory=list)  # (GanSpec, generator) per member
    showers: object = None  # a generated ShowerChunk
    notes: list[str] = field(default_factory=list)


def run(args: argparse.Namespace) -> int:
    require_counts(args, "--events", "--bins", "--batch-size")
    require_finite(args, "--beta")
    if args.json and args.format != "text":
        raise EvoganError(f"--json and --format {args.format} both choose the output; pass one")
    read = read_options(args)
    generated = Path(args.generated)
    out = args.out or _default_out(generated)
    check_out_dir(out)
    generators = _generator_files(generated, args)
    from evogan.commands.validate_calochallenge import calochallenge_section, require_detector
    from evogan.data.reader import ShowerDataset, open_files
    from evogan.physics.score import require_bin_events, require_floor_events

    dataset = ShowerDataset.from_files(open_files(args.reference, **read))
    view = dataset.take(args.events or DEFAULT_EVENTS)
    require_detector(view, args)
    require_floor_events(len(view))
    require_bin_events(len(view), args.bins)
    showers, members, models = None, [], []
    if generators:
        members, models, notes = _checked_generators(generators, view)
    else:
        showers, notes = _checked_showers(args, view)
    if args.events and args.events > len(view):
        notes.append(
            f"the reference holds {len(view)} showers, fewer than --events {args.events}; "
            f"all {len(view)} are scored"
        )
    reference, chunk = _reference(view, args)
    job = Job(reference, chunk, [str(p) for p in dataset.files], members, models, notes=notes)
    say = _printer(args.json)
    if showers is not None:
        job.showers = _read(showers, "generated")
    elif generated.is_dir():
        say(f"scoring {members[0]}")
    report, figures = _score(job, args)
    from evogan.physics.targets import compare_targets

    report["targets"] = compare_targets(figures["table"], reference.table, reference.edges)
    for note in job.notes:
        say(f"note: {note}")
    report["floor"] = _floor(reference)
    figures["calochallenge"] = calochallenge_section(
        job.chunk, job.showers, job.models, args, report, view.detector, not args.no_figures
    )
    from evogan.commands.validate_report import calochallenge_table, print_summary, write_report

    report["reference"], report["notes"] = job.files, job.notes
    write_report(report, figures if not args.no_figures else None, out, job.reference)
    if args.json:
        from evogan.store import to_json

        print(to_json(report))
    elif args.format == "calochallenge":
        print(calochallenge_table(report, Path(report["generated"]).name))
        print(f"wrote {', '.join(report['files'])}")
    else:
        print_summary(report)
    return 0


def _reference(view: ShowerDataset, args: argparse.Namespace) -> tuple[Reference, ShowerChunk]:
    """The reference showers read and condensed to features under one progress task: a
    reference that cannot serve (too few showers per bin, empty ones) ends with its error line
    alone."""
    from evogan.physics import Reference
    from evogan.progress import progress

    with progress("read reference", total=len(view), unit="showers") as task:
        chunk = view.read(on_read=task.advance)
        theta = chunk.theta if np.ptp(chunk.theta) > 0 else None
        settings = {"cell_threshold": view.cell_threshold, "bins": args.bins, "seed": args.seed}
        settings["detector"] = view.detector
        reference = Reference.from_showers(chunk.ecal, chunk.energy, theta=theta, **settings)
    return reference, chunk


def _read(view: ShowerDataset, what: str) -> ShowerChunk:
    """The showers of ``view``, with progress, once every check that needs no cells passed."""
    from evogan.progress import progress

    with progress(f"read {what}", total=len(view), unit="showers") as task:
        return view.read(on_read=task.advance)


def _floor(reference) -> dict:
    """The reference's floor, with progress: a few scores of half the reference."""
    from evogan.physics.score import FLOOR_SPLITS
    from evogan.progress import progress

    with progress("floor", total=FLOOR_SPLITS, unit="splits") as task:
        return reference.floor(lambda score: task.advance(1, note=f"split {score:.3f}"))


def _generator_files(generated: Path, args: argparse.Namespace) -> list[Path]:
    """GENERATED's generator and the ``--ensemble`` ones, found before the reference is read
    so that a wrong directory is refused first; none when GENERATED holds showers."""
    from evogan.data.reader import expand_pattern
    from evogan.gan3d.model.ensemble_members import expand
    from evogan.gan3d.model.model_file import find_generator, is_generator

    if not expand_pattern(str(generated))[0].exists():
        raise DataError(
            f"GENERATED {generated} does not exist; pass a generator .h5 file, a gan3d run "
            "directory or shower file(s)"
        )
    if not (generated.is_dir() or is_generator(generated)):
        return []
    for path in (generated, *args.ensemble):
        refuse_campaign(path)

    paths = [find_generator(generated)]
    for extra in args.ensemble:
        paths += expand(extra)
    return paths


def _checked_generators(
    paths: list[Path], reference: ShowerDataset
) -> tuple[list[Path], list, list[str]]:
    """The distinct generators of GENERATED and ``--ensemble``, loaded and checked against the
    reference's cell window and each other before any cells are read; with their notes."""
    from evogan.gan3d.model.conditions import beyond_training
    from evogan.gan3d.model.ensemble_members import check_compatible, check_origin, unique_members
    from evogan.gan3d.model.model_file import load_generator

    members, notes = unique_members(paths)
    loaded = [load_generator(p) for p in members]
    models = [(spec, generator) for spec, generator, _ in loaded]
    specs = [spec for spec, _ in models]
    _check_window(tuple(specs[0].output_shape), tuple(reference.shape), "generator showers")
    if len(models) > 1:
        check_compatible(specs)
        notes += check_origin(members, specs)
    spec, _, meta = loaded[0]
    energy, theta = reference.conditions()
    theta = theta if spec.conditioning.angle else None
    return members, models, notes + beyond_training(meta, energy, theta, "the reference's")


def _checked_showers(
    args: argparse.Namespace, reference: ShowerDataset
) -> tuple[ShowerDataset, list[str]]:
    """GENERATED's shower files, checked against the reference's cell window and energies
    before any cells are read (a refusal comes before minutes of reading); with its notes."""
    from evogan.data.file_detector import check_same_detector
    from evogan.data.reader import ShowerDataset, open_files

    if args.precision != "float32":
        raise EvoganError(
            f"--precision {args.precision} runs a generator, but {args.generated} holds "
            "showers; drop --precision or give a generator file or run directory"
        )
    if args.ensemble:
        raise EvoganError(
            f"--ensemble needs generators, but GENERATED {args.generated} holds showers; "
            "pass a generator file or run directory"
        )
    view = ShowerDataset.from_files(open_files(args.generated)).take(args.events or DEFAULT_EVENTS)
    check_same_detector(view.detector, reference.detector, args.generated)
    _check_window(tuple(view.shape), tuple(reference.shape), "generated showers")
    if len(view) < args.bins:
        raise DataError(
            f"generated showers must number at least --bins ({args.bins}), got "
            f"{len(view)}; pass more showers or fewer --bins"
        )
    notes: list[str] = []
    _check_energies(view.energies(), reference.energies(), notes)
    return view, notes


def _check_window(found: tuple, expected: tuple, what: str) -> None:
    if tuple(found) != tuple(expected):
        raise DataError(
            f"{what} have cells {tuple(found)}, the reference {tuple(expected)}; compare "
            "showers of the same cell window"
        )


def _check_energies(gen: np.ndarray, ref: np.ndarray, notes: list[str]) -> None:
    """Error when the primary-energy ranges do not overlap, warning when the generated
    energies cover less than the reference's range."""
    g_lo, g_hi, r_lo, r_hi = float(gen.min()), float(gen.max()), float(ref.min()), float(ref.max())
    if g_hi < r_lo or g_lo > r_hi:
        raise DataError(
            f"generated and reference primary energies must overlap, got {g_lo:g}-{g_hi:g} GeV "
            f"and {r_lo:g}-{r_hi:g} GeV; score showers of the reference's energy range"
        )
    slack = RANGE_TOLERANCE * (r_hi - r_lo)
    if g_lo > r_lo + slack or g_hi < r_hi - slack:
        message = (
            f"warning: generated energies {g_lo:g}-{g_hi:g} GeV cover less than the reference's "
            f"{r_lo:g}-{r_hi:g} GeV; energy bins outside are compared with few or no showers"
        )
        print(f"evogan: {message}", file=sys.stderr)
        notes.append(message)


def _score(job: Job, args: argparse.Namespace) -> tuple[dict, dict]:
    from evogan.physics.ensemble import BETA, combine, observables
    from evogan.progress import progress

    ref = job.reference
    if job.showers is not None:
        with progress("validate", total=1, unit="sets") as task:
            chunk = job.showers
            theta = chunk.theta if ref.has_angle else None
            result = ref.score(chunk.ecal, chunk.energy, theta)
            task.advance(1, note=f"score {result.score:.3f}")
        report = {**result.to_json(), "generated": str(args.generated)}
        return report, {
            "table": result.table,
            "label": "generated",
            "table_label": "generated",
            "std": None,
            "observables": observables(result.table, ref.edges),
        }
    results, specs = _score_members(job, args)
    first = results[0]
    report = {**first.to_json(), "generated": str(job.members[0]), "spec": specs[0].name}
    figures = {
        "table": first.table,
        "label": specs[0].name,
        "table_label": f"{job.members[0].name} ({specs[0].name})",
        "std": None,
        "observables": observables(first.table, ref.edges),
    }
    if len(results) > 1:
        beta = BETA if args.beta is None else args.beta
        ensemble = combine(results, ref.edges, beta)
        report["ensemble"] = {"models": [str(p) for p in job.members], **ensemble.to_json()}
        report["score"] = ensemble.score
        figures.update(
            observables=ensemble.mean,
            std=ensemble.std,
            label=f"ensemble of {len(results)} (mean, std)",
        )
    return report, figures


def _score_members(job: Job, args: argparse.Namespace) -> tuple[list, list]:
    from evogan.gan3d.model.generate import score_generator
    from evogan.progress import progress

    models = job.models
    specs = [spec for spec, _ in models]
    hint_precision(args)
    chunk, results = job.chunk, []
    total = len(models) * len(chunk)
    with progress("validate", total=total, unit="showers") as task:
        for (spec, generator), path in zip(models, job.members, strict=True):
            result = score_generator(
                job.reference,
                spec,
                generator,
                chunk.energy,
                chunk.theta,
                args.seed,
                args.batch_size,
                on_batch=task.advance,
                precision=args.precision,
            )
            task.advance(0, note=f"{path.name}: score {result.score:.3f}")
            results.append(result)
    return results, specs


def _printer(quiet_stdout: bool):
    stream = sys.stderr if quiet_stdout else sys.stdout
    return lambda line: print(line, file=stream)


def _default_out(generated: Path) -> Path:
    return (generated if generated.is_dir() else generated.parent) / "validation"
