"""``evogan report CAMPAIGN_DIR... --out DIR``: compare architecture search campaigns;
``--final`` first runs a campaign's missing significance test, ``--reproduce ID:M`` re-trains
one member of a candidate (both train, so they run under ``mpirun`` like the campaign)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from evogan.commands.options import check_out_dir, require_counts
from evogan.errors import EvoganError


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name,
        help="report search campaigns: best architectures, convergence, Pareto plot",
        usage=f"evogan {name} CAMPAIGN_DIR [CAMPAIGN_DIR ...] --out DIR [--top TOP] "
        "[--size {params,flops}] [--final]\n"
        f"       evogan {name} CAMPAIGN_DIR --reproduce ID:MEMBER [--out DIR]",
    )
    parser.add_argument(
        "campaigns", nargs="+", type=Path, metavar="CAMPAIGN_DIR", help="search campaign dirs"
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="directory for figures and table (required, except with --reproduce)",
    )
    parser.add_argument("--top", type=int, default=5, help="best candidates per campaign")
    parser.add_argument(
        "--size",
        choices=("params", "flops"),
        default="params",
        help="model size axis of the Pareto plot (default: params)",
    )
    parser.add_argument(
        "--final",
        action="store_true",
        help="first run the final significance test (top candidates and the base spec re-trained "
        "with fresh seeds) of every campaign whose summary.json has none yet; under mpirun -n N, "
        "N a multiple of the campaign's ranks_per_group",
    )
    parser.add_argument(
        "--reproduce",
        metavar="ID:MEMBER",
        help="re-train member MEMBER of candidate ID with its recorded seed and print its score "
        "beside the table's (one campaign; mpirun -n as the candidate's group; --out: where "
        "the training goes, default CAMPAIGN/reproduce)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    require_counts(args, "--top")
    if args.out is None and args.reproduce is None:
        raise EvoganError("evogan report needs --out DIR (or --reproduce ID:MEMBER)")
    from evogan.plots.runs import run_labels
    from evogan.plots.search import plot_convergence, plot_final, plot_pareto
    from evogan.search.campaign_report import (
        CampaignRecord,
        best_table,
        final_table,
        winners_table,
    )
    from evogan.store import atomic_write

    if args.reproduce is not None:
        CampaignRecord.load(args.campaigns[0])  # refuses what is not a campaign, in one line
        if args.out is not None:
            check_out_dir(args.out)
        return _reproduce(args)
    named = list(zip(args.campaigns, run_labels(args.campaigns), strict=True))
    records = [CampaignRecord.load(path, label) for path, label in named]  # refuses non-campaigns
    check_out_dir(args.out)
    if args.final:
        if not _finals(args.campaigns, _again()):
            return 0  # not world rank 0: the report is written once
        records = [CampaignRecord.load(path, label) for path, label in named]  # with `final`
    args.out.mkdir(parents=True, exist_ok=True)
    table = best_table(records, args.top) + final_table(records) + winners_table(records)
    views = [record.view() for record in records]
    written = [
        atomic_write(args.out / "report.md", "# Architecture search report\n\n" + table),
        plot_convergence(views, args.out / "convergence.png"),
        plot_pareto(views, args.out / "pareto.png", args.size),
    ]
    final = plot_final(views, args.out / "final.png")
    written += [final] if final is not None else []
    print(table, end="")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def _again() -> str:
    """This command line again: a stopped final step continues from its finished trainings."""
    from evogan.distributed.launcher import launch_prefix
    from evogan.distributed.mpi import MPI

    launcher = launch_prefix(MPI.COMM_WORLD.size)
    again = shlex.join(["evogan", *sys.argv[1:]])
    return f"{launcher} {again}" if launcher else again


def _finals(campaigns: list[Path], again: str) -> bool:
    """Collective on the job's ranks: the final step of each campaign that lacks a current
    one; True on world rank 0 (the rank that writes the report)."""
    from evogan.distributed.mpi import MPI
    from evogan.search import Campaign
    from evogan.search.final import campaign_config, run_final

    world = MPI.COMM_WORLD
    for path in campaigns:
        config = campaign_config(path)
        if world.size % config.ranks_per_group:
            raise EvoganError(
                f"--final re-trains on groups of ranks_per_group = {config.ranks_per_group} ranks "
                f"({path}); run it with mpirun -n a multiple of that, got {world.size}"
            )
        if run_final(config, Campaign(path), world, again) is None and world.rank == 0:
            print(f"report: {path}: final.top = 0, no final test")
    return world.rank == 0


def _reproduce(args: argparse.Namespace) -> int:
    """``--reproduce ID:MEMBER``: one member re-trained and scored, printed by world rank 0."""
    from evogan.distributed.mpi import MPI
    from evogan.search.final import reproduce_member

    if len(args.campaigns) != 1:
        raise EvoganError(f"--reproduce takes one campaign directory, got {len(args.campaigns)}")
    world = MPI.COMM_WORLD
    score, recorded = reproduce_member(args.campaigns[0], args.reproduce, world, args.out)
    if world.rank == 0:
        table = "-" if recorded is None else f"{recorded:.10g}"
        print(
            f"reproduce: {args.campaigns[0]} {args.reproduce}: score {score:.10g} (table {table})"
        )
    return 0
