"""``evogan export RUN --format onnx --out FILE.onnx``: a run's generator as an ONNX file that
C++ frameworks load through ONNX Runtime (docs/howto/deploy.md).

The graph takes standard normal draws and primary energies in the detector file's unit (and
the angle, for angle-conditioned specs) and returns the detector file's voxel array, exactly
what ``evogan generate`` writes for the same draws. ``--model best`` (the default: the best
model, else the last with a note) or ``last``; a run that has not finished says which model
is exported. An existing ``--out`` is refused unless ``--force``; the file appears only once
complete.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evogan.commands.options import refuse_campaign
from evogan.errors import DataError

FORMATS = ("onnx",)
MODELS = ("best", "last")


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name, help="write a 3DGAN generator as an ONNX file for ONNX Runtime (docs/howto/deploy.md)"
    )
    parser.add_argument("model", type=Path, help="gan3d run directory or generator .h5 file")
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="file format (onnx)")
    parser.add_argument("--out", type=Path, required=True, help="file to write (FILE.onnx)")
    parser.add_argument(
        "--model",
        dest="which",
        choices=MODELS,
        default=None,
        help="the run's best_model.h5 (default; a run without one exports its last, saying so) "
        "or its last generator: last_model.h5, or a run that has not finished: its last "
        "checkpoint",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from evogan.data.writer import check_writable

    check_writable(args.out)
    existed = args.out.exists()
    if existed and not args.force:
        raise DataError(f"{args.out} exists; pass --force to replace it, or another --out")
    refuse_campaign(args.model)
    from evogan.gan3d.model.onnx_file import export_onnx, require_onnx
    from evogan.gan3d.model.shower_graph import describe_inputs
    from evogan.gan3d.training.run_models import pick_generator

    require_onnx()
    picked = pick_generator(args.model, args.which)
    if picked.note is not None:
        print(picked.note, file=sys.stderr)
    meta = {k: v for k, v in picked.meta.items() if k != "spec"}
    about = {"model": picked.model, "source": str(picked.source), "generator_meta": meta}
    if "score" in meta:
        about["score"] = meta["score"]
    export_onnx(picked.spec, picked.generator, args.out, about)
    verb = "replaced" if existed else "wrote"
    origin = args.model if args.model.is_dir() else args.model.parent
    print(
        f"{verb} {args.out} from {origin}: {picked.what} as ONNX "
        f"({describe_inputs(picked.spec)}; docs/howto/deploy.md)"
    )
    return 0
