"""``evogan compare RUN_DIR... --out DIR``: Figure-3-style comparison of regressor runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from evogan.errors import EvoganError


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name, help="compare finished runs: test loss, energy response, summary table"
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories")
    parser.add_argument("--out", required=True, type=Path, help="directory for figures and table")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from evogan.plots.compare import (
        RunRecord,
        plot_energy_response,
        plot_island_curves,
        plot_relative_error,
        plot_test_loss,
        summary_table,
    )
    from evogan.store import atomic_write

    records = [RunRecord.load(path) for path in args.runs]
    if args.out.exists() and not args.out.is_dir():
        raise EvoganError(f"--out must be a directory, got the file {args.out}")
    args.out.mkdir(parents=True, exist_ok=True)
    written = [
        plot_test_loss(records, args.out / "test_loss.png"),
        plot_energy_response(records, args.out / "energy_response.png"),
        plot_relative_error(records, args.out / "relative_error.png"),
        atomic_write(args.out / "summary.md", "# Run comparison\n\n" + summary_table(records)),
    ]
    islands = plot_island_curves(records, args.out / "island_curves.png")
    if islands is not None:
        written.append(islands)
    print(summary_table(records), end="")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0
