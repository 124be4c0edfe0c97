"""``evogan data synth`` and ``evogan data inspect``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evogan.commands.options import (
    add_read_options,
    read_options,
    require_counts,
    require_finite,
)
from evogan.errors import EvoganError


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(name, help="generate and inspect calorimeter shower files")
    actions = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    synth = actions.add_parser(
        "synth",
        help="write a synthetic GFLASH-style file of electromagnetic showers (an electron "
        "model: not meant for hadrons)",
    )
    synth.add_argument(
        "--out",
        required=True,
        type=Path,
        help="HDF5 file to write; an existing one is replaced once the new one is complete, "
        "as evogan generate does",
    )
    synth.add_argument("--events", required=True, type=int, help="number of showers")
    synth.add_argument(
        "--energy-range",
        nargs=2,
        type=float,
        default=(2.0, 500.0),
        metavar=("LO", "HI"),
        help="primary energy range in GeV, drawn uniformly (default: 2 500; within 1 1000)",
    )
    synth.add_argument(
        "--log-uniform",
        action="store_true",
        help="draw energies uniformly in log E (as CaloChallenge datasets 2 and 3)",
    )
    synth.add_argument(
        "--detector",
        default="clic-ecal",
        metavar="NAME|XML",
        help="detector to deposit the showers in: a shipped name (clic-ecal, calochallenge-2, "
        "...) or a CaloChallenge binning .xml file; written in its own file format (the "
        "CaloChallenge one for cylindrical detectors; default: clic-ecal)",
    )
    synth.add_argument(
        "--seed", type=int, default=0, help="random seed, 0 or more (same seed, same file)"
    )
    synth.set_defaults(handler=_synth)

    inspect = actions.add_parser("inspect", help="summarise a shower file (any public layout)")
    inspect.add_argument("file", type=Path, help="HDF5 shower file")
    inspect.add_argument("--json", action="store_true", help="print one JSON object")
    inspect.add_argument(
        "--plot",
        type=Path,
        metavar="FIGURE",
        help="write shower-shape figures, in the format the suffix names (.png, .pdf, .svg)",
    )
    add_read_options(inspect, "the file")
    inspect.set_defaults(handler=_inspect)


def _synth(args: argparse.Namespace) -> int:
    from evogan.data.synthetic import write_synthetic
    from evogan.detectors.shipped import DEFAULT, detector_for

    require_counts(args, "--events")
    require_finite(args, "--energy-range")
    low, high = args.energy_range
    if not 0 < low < high:
        raise EvoganError(f"--energy-range must satisfy 0 < LO < HI, got {low:g} {high:g}")
    if args.seed < 0:
        raise EvoganError(f"--seed must be a non-negative integer, got {args.seed}")
    detector = detector_for(args.detector)
    replaced = " (replacing the file that was there)" if args.out.is_file() else ""
    path = write_synthetic(
        args.out,
        args.events,
        (low, high),
        args.seed,
        detector=detector,
        log_uniform=args.log_uniform,
        progress=True,
    )
    spacing = ", log-uniform" if args.log_uniform else ""
    where = "" if detector.name == DEFAULT else f" in {detector.describe()}"
    described = (
        f"{args.events} synthetic showers{where} ({low:g}-{high:g} GeV{spacing}, seed {args.seed})"
    )
    print(f"wrote {described} to {path}{replaced}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from evogan.physics.inspect import format_report, scan_file, summarise

    if args.plot is not None:
        from evogan.plots import figure_format

        figure_format(args.plot)
    scan = scan_file(args.file, **read_options(args))  # streamed once: report and figure
    detector = scan.dataset.detector
    named = detector.describe() if detector else "none recorded or shipped with these cells"
    report = {"detector": detector.name if detector else None, **summarise(scan)}
    if args.plot is not None and scan.detector_profiles is not None:
        from evogan.plots.calochallenge import plot_detector_profiles

        title = f"{args.file.name}: {named}, {len(scan.dataset)} showers"
        plot_detector_profiles(scan.detector_profiles, args.plot, title=title)
    elif args.plot is not None:
        from evogan.plots.data import plot_inspection

        plot_inspection(scan, args.plot)
    if args.json:
        print(json.dumps(report))
    else:
        file_line, rest = format_report(report).split("\n", 1)
        print(f"{file_line}\n{'detector':<18}{named}\n{rest}")
    if args.plot is not None and not args.json:
        print(f"figures written to {args.plot}")
    return 0
