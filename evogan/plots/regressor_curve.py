"""``learning_curve.png`` of a regressor run (GA, hybrid, RMSprop), drawn into its run
directory when it ends, as a GAN training draws its own: the training MAPE per generation (GA:
the best child's, on that generation's minibatch; one thin line per island) or per optimiser
step (RMSprop: the minibatch loss), and per epoch the MAPE on the whole training set and on
the test set, against generations or steps and against training time, with the config's
test-MAPE targets as lines that leave the range to the curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from evogan.plots import save_figure
from evogan.plots.compare import RunRecord, percent_log_axis, target_lines
from evogan.plots.scales import readable_log_ticks, reference_lines
from evogan.store import METRICS, RunDir, read_metrics

LEARNING_CURVE = "learning_curve.png"
PROGRESS = {"generation": ("generation", "best"), "step": ("step", "loss")}
"""Per-generation or per-step record kinds: their counter and their training MAPE."""


def progress_records(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The per-generation (or per-step) records of a run, by island ("" for one island)."""
    files = {"": path / METRICS}
    for folder in sorted((path / "islands").glob("island-*")):
        files[f"island {int(folder.name.removeprefix('island-'))}"] = folder / METRICS
    found = {}
    for name, file in files.items():
        records = read_metrics(file) if file.is_file() else []
        records = [r for r in records if r.get("kind") in PROGRESS]
        if records:
            found[name] = records
    return found


def plot_run_curve(path: str | Path) -> Path:
    """Draw ``learning_curve.png`` of the finished regressor run at ``path`` (its summary and
    metrics) into it."""
    run = RunDir.open(path)
    figure = learning_curve_figure(RunRecord.load(run.path), progress_records(run.path))
    return save_figure(figure, run.file(LEARNING_CURVE))


def learning_curve_figure(record: RunRecord, progress: dict[str, list[dict[str, Any]]]) -> Figure:
    """Two panels, against generations or steps and against training seconds."""
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    by_count, by_time = fig.subplots(1, 2, sharey=True)
    gradient = any(r["kind"] == "step" for records in progress.values() for r in records)
    unit = "optimiser step" if gradient else "generation"
    for axis, key in ((by_count, "count"), (by_time, "train_seconds")):
        _progress(axis, progress, key, gradient)
        _epochs(axis, record.epochs, key, " (best island)" if len(record.islands) > 1 else "")
        percent_log_axis(axis)
        reference_lines(axis, target_lines([record]))
        readable_log_ticks(axis)
        axis.set_ylabel("mean absolute percentage error [%]")
    by_count.set_xlabel(f"{unit}s completed")
    by_count.xaxis.set_major_locator(MaxNLocator(integer=True))
    by_time.set_xlabel("training time [s]")
    by_count.legend(fontsize=8)
    fig.suptitle(f"{record.method} learning curve: {record.label}\n{record.image}")
    return fig


def _progress(
    axis: Axes, progress: dict[str, list[dict[str, Any]]], key: str, gradient: bool
) -> None:
    what = "minibatch loss per step" if gradient else "best child per generation (minibatch)"
    several = len(progress) > 1
    for index, records in enumerate(progress.values()):
        kind = records[0]["kind"]
        counter, value = PROGRESS[kind]
        xs = [r[counter] + 1 if key == "count" else r[key] for r in records]
        label = f"training MAPE: {what}" + (", one line per island" if several else "")
        axis.plot(
            xs,
            [100 * r[value] for r in records],
            lw=0.8,
            alpha=0.6 if several else 0.8,
            color="tab:grey" if several else "tab:blue",
            label=label if index == 0 else None,
        )


def _epochs(axis: Axes, epochs: list[dict[str, Any]], key: str, which: str) -> None:
    points = [r for r in epochs if r.get("test_mape") is not None]
    xs = [
        (r.get("generation") or r.get("steps") or 0) if key == "count" else r[key] for r in points
    ]
    axis.plot(
        xs,
        [100 * r["reference_fitness"] for r in points],
        marker="s",
        ms=4,
        color="tab:green",
        label=f"training-set MAPE at each epoch's end{which}",
    )
    axis.plot(
        xs,
        [100 * r["test_mape"] for r in points],
        marker="o",
        ms=4,
        color="tab:red",
        label=f"test MAPE at each epoch's end{which}",
    )
