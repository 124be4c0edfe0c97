"""``evogan report CAMPAIGN_DIR... --out DIR``: compare architecture search campaigns."""

from __future__ import annotations

import argparse
from pathlib import Path

from evogan.commands.options import require_counts
from evogan.errors import EvoganError


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name, help="report search campaigns: best architectures, convergence, Pareto plot"
    )
    parser.add_argument(
        "campaigns", nargs="+", type=Path, metavar="CAMPAIGN_DIR", help="search campaign dirs"
    )
    parser.add_argument("--out", required=True, type=Path, help="directory for figures and table")
    parser.add_argument("--top", type=int, default=5, help="best candidates per campaign")
    parser.add_argument(
        "--size",
        choices=("params", "flops"),
        default="params",
        help="model size axis of the Pareto plot (default: params)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    require_counts(args, "--top")
    from evogan.plots.search import CampaignRecord, best_table, plot_convergence, plot_pareto
    from evogan.store import atomic_write

    records = [CampaignRecord.load(path) for path in args.campaigns]
    if args.out.exists() and not args.out.is_dir():
        raise EvoganError(f"--out must be a directory, got the file {args.out}")
    args.out.mkdir(parents=True, exist_ok=True)
    table = best_table(records, args.top)
    written = [
        atomic_write(args.out / "report.md", "# Architecture search report\n\n" + table),
        plot_convergence(records, args.out / "convergence.png"),
        plot_pareto(records, args.out / "pareto.png", args.size),
    ]
    print(table, end="")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0
