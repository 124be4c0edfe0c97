"""``evogan compare RUN_DIR... --out DIR``: figures and a table comparing training runs.

Regressor runs (GA, hybrid, RMSprop) get Figure-3-style test-loss curves and the energy
response with the resolution fit; 3DGAN runs get their losses and validation score against the
optimiser step. Search campaigns are refused (``evogan report`` draws them).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from evogan.commands.options import check_out_dir
from evogan.errors import EvoganError

if TYPE_CHECKING:
    from evogan.plots.compare import RunRecord
    from evogan.plots.compare_gan import GanRunRecord

ACCEPTS = ("regressor", "gan3d")


def add_parser(subparsers: argparse._SubParsersAction, name: str) -> None:
    parser = subparsers.add_parser(
        name,
        help="compare training runs: test loss and energy response (regressor), "
        "losses and validation score (3DGAN)",
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories")
    parser.add_argument("--out", required=True, type=Path, help="directory for figures and table")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from evogan.plots.compare import RunRecord
    from evogan.plots.compare_gan import GanRunRecord
    from evogan.plots.runs import refuse, run_labels, run_task
    from evogan.store import RunDir, atomic_write

    tasks = []
    for path in args.runs:
        if not (path / "config.yaml").is_file():
            RunDir.open(path)  # names what is missing
        task = run_task(path)
        refuse(path, task, "compare", ACCEPTS, "use evogan report for search campaigns")
        tasks.append(task)
    labels = run_labels(args.runs)
    check_out_dir(args.out)
    runs = list(zip(args.runs, tasks, labels, strict=True))
    regressors = [RunRecord.load(p, label) for p, t, label in runs if t == ACCEPTS[0]]
    gans = [GanRunRecord.load(p, label) for p, t, label in runs if t == ACCEPTS[1]]
    for record in gans:
        if not record.epochs:
            raise EvoganError(
                f"{record.label} has no finished epoch in its metrics.jsonl yet; "
                "compare it after its first epoch"
            )
    args.out.mkdir(parents=True, exist_ok=True)
    tables, written = [], []
    if regressors:
        table, figures = _regressor_views(regressors, args.out)
        tables.append(table)
        written += figures
    if gans:
        table, figures = _gan_views(gans, args.out)
        tables.append(table)
        written += figures
    text = "\n".join(tables)
    written.append(atomic_write(args.out / "summary.md", "# Run comparison\n\n" + text))
    print(text, end="")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def _regressor_views(records: list[RunRecord], out: Path) -> tuple[str, list[Path]]:
    from evogan.plots.compare import (
        images_caption,
        plot_energy_response,
        plot_island_curves,
        plot_relative_error,
        plot_test_loss,
        response_table,
        summary_table,
    )

    for record in records:
        if not record.response:
            print(
                f"note: {record.label} has no resolution per energy bin in its summary.json "
                "(written by an older evogan); it is left out of the energy-response figures"
            )
    written = [
        plot_test_loss(records, out / "test_loss.png"),
        plot_energy_response(records, out / "energy_response.png"),
        plot_relative_error(records, out / "relative_error.png"),
    ]
    islands = plot_island_curves(records, out / "island_curves.png")
    if islands is not None:
        written.append(islands)
    images = f"Images: {images_caption(records)}\n\n"
    table = images + summary_table(records) + "\n## Energy response\n\n" + response_table(records)
    return table, written


def _gan_views(records: list[GanRunRecord], out: Path) -> tuple[str, list[Path]]:
    from evogan.plots.compare_gan import gan_table, plot_gan_losses, plot_gan_validation

    written = [plot_gan_losses(records, out / "gan_losses.png")]
    validation = plot_gan_validation(records, out / "gan_validation.png")
    if validation is None:
        print("note: no run has validation records yet; gan_validation.png not drawn")
    else:
        written.append(validation)
    return "## 3DGAN training\n\n" + gan_table(records), written
