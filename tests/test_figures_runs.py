"""Figures of runs and campaigns, read from their matplotlib axes: ``pareto.png`` leaves a
far-off candidate out of its range and marks it, ``test_loss.png``'s target lines are in the
legend and do not set the range, ``gan_validation.png`` draws the score's error bars as
``learning_curve.png`` does, and GA and RMSprop runs draw their own ``learning_curve.png``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.container import ErrorbarContainer

from evogan.config import load_config
from evogan.plots.compare import RunRecord, loss_figure
from evogan.plots.compare_gan import GanRunRecord, gan_validation_figure
from evogan.plots.regressor_curve import LEARNING_CURVE, learning_curve_figure, progress_records
from evogan.plots.search import CampaignView, convergence_figure, final_figure, pareto_figure
from evogan.regressor.evolve import evolve_regressor
from evogan.regressor.rmsprop import train_regressor
from evogan.store import read_metrics

PNG = b"\x89PNG\r\n\x1a\n"


def _legend(ax: Axes) -> list[str]:
    return [text.get_text() for text in ax.get_legend().get_texts()]


def _campaign(fitness: list[float]) -> CampaignView:
    rows = [
        {"id": f"c{i}", "status": "ok", "fitness": f, "params": 1000 * (1 + i % 4), "flops": 1}
        for i, f in enumerate(fitness)
    ]
    return CampaignView("ga", rows, [], ([], [], []), None)


def test_pareto_leaves_a_diverged_candidate_off_its_range_and_marks_it() -> None:
    bulk = [5.8, 6.3, 6.7, 7.1, 7.4, 7.9, 8.5, 9.5, 11.2, 12.4]
    axis = pareto_figure([_campaign([*bulk, 48.0])], "params").axes[0]
    low, high = axis.get_ylim()
    assert axis.get_yscale() == "linear"
    assert low < min(bulk) and max(bulk) < high < 14.0  # the bulk fills the axis
    (marker,) = [line for line in axis.lines if line.get_marker() == "^"]
    assert list(marker.get_xdata()) == [1000 * (1 + 10 % 4)] and marker.get_ydata()[0] == high
    assert any("1 worse, above the axis (up to 48)" in label for label in _legend(axis))
    plain = pareto_figure([_campaign(bulk)], "params").axes[0]
    assert not [line for line in plain.lines if line.get_marker() == "^"]
    assert plain.get_ylim()[1] > max(bulk)


def _run(label: str, mape: list[float]) -> RunRecord:
    epochs = [
        {"epoch": i, "train_seconds": 10.0 * (i + 1), "test_mape": m} for i, m in enumerate(mape)
    ]
    summary = {"seconds_to_mape_10": 10.0, "seconds_to_mape_5": 20.0, "seconds_to_mape_1": None}
    return RunRecord(label, "ga", summary, epochs, image="clic-ecal, summed over y")


def test_test_loss_targets_are_in_the_legend_and_leave_the_range_to_the_curves() -> None:
    mape = [0.031, 0.022, 0.017, 0.014, 0.012]
    fig = loss_figure([_run("a", mape), _run("b", [m * 1.1 for m in mape])])
    by_epoch, by_time = fig.axes
    for axis in (by_epoch, by_time):
        low, high = axis.get_ylim()
        assert axis.get_yscale() == "log"
        assert low < 1.2 and 3.4 < high < 5.0, (low, high)  # the curves' 1.2-3.4%, not 10%
        levels = sorted(line.get_ydata()[0] for line in axis.lines if line.get_linestyle() != "-")
        assert levels == [1.0, 5.0, 10.0]
    labels = _legend(by_epoch)
    assert "target 10% (test_target_mape) (above the axis)" in labels
    assert "target 5% (test_target_mape) (above the axis)" in labels
    assert "target 1% (test_target_mape) (below the axis)" in labels
    shown = [t.get_text() for t in by_epoch.get_yticklabels()]
    assert {"1.2", "1.5", "2", "3"} <= set(shown), shown


def test_gan_validation_draws_the_scores_error_bars() -> None:
    validations = [
        {"step": 5 * (i + 1), "score": s, "floor": 1.48, "floor_spread": 0.57, "best": True}
        for i, s in enumerate([19.3, 17.7, 16.2, 14.6])
    ]
    record = GanRunRecord("walk", "sync", True, [], validations)
    axis = gan_validation_figure([record]).axes[0]
    (bars,) = [c for c in axis.containers if isinstance(c, ErrorbarContainer)]
    assert bars.has_yerr and bars.get_label() == "walk"
    segments = bars.lines[2][-1].get_segments()
    assert np.allclose([s[1][1] - s[0][1] for s in segments], 2 * 0.57)
    assert np.allclose([s[0][1] for s in segments], [v["score"] - 0.57 for v in validations])
    assert any("floor's spread" in label for label in _legend(axis))


TINY = {
    "task": "regressor",
    "seed": 1,
    "data": {"synthetic": {"events": 300}, "train_events": 240, "test_events": 60},
    "ga": {"batch_size": 48, "epochs": 2},
    "train": {"batch_size": 48, "epochs": 2},
    "test_target_mape": [0.5, 0.02],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("curves")
    (root / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    cfg = load_config(root / "tiny.yaml")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
        quiet = {"announce": lambda line: None}
        ga = evolve_regressor(cfg, root / "ga", **quiet)
        rmsprop = train_regressor(cfg, root / "rmsprop", **quiet)
    return {"ga": ga.path, "rmsprop": rmsprop.path}


@pytest.mark.parametrize(
    ("method", "kind", "value"), [("ga", "generation", "best"), ("rmsprop", "step", "loss")]
)
@pytest.mark.slow
def test_ga_and_rmsprop_runs_draw_their_learning_curve(runs, method, kind, value) -> None:
    path = runs[method]
    assert (path / LEARNING_CURVE).read_bytes()[:8] == PNG
    progress = progress_records(path)
    fig = learning_curve_figure(RunRecord.load(path), progress)
    by_count, by_time = fig.axes
    records = read_metrics(path / "metrics.jsonl", kind)
    epochs = read_metrics(path / "metrics.jsonl", "epoch")
    training, trainset, test = by_count.lines[:3]
    assert np.allclose(training.get_ydata(), [100 * r[value] for r in records])
    assert np.allclose(training.get_xdata(), np.arange(1, len(records) + 1))
    assert np.allclose(trainset.get_ydata(), [100 * r["reference_fitness"] for r in epochs])
    assert np.allclose(test.get_ydata(), [100 * r["test_mape"] for r in epochs])
    assert np.allclose(by_time.lines[2].get_xdata(), [r["train_seconds"] for r in epochs])
    assert by_count.get_xlabel() == (
        "generations completed" if method == "ga" else "optimiser steps completed"
    )
    labels = _legend(by_count)
    assert any(label.startswith("target 50%") for label in labels)
    assert any(label.startswith("target 2%") for label in labels)


def _final(p_values: list[float], p_holm: list[float]) -> dict:
    blocks = [
        {
            "id": f"t{i}",
            "scores": [6.0, 6.2, 6.4],
            "mean": 6.2,
            "sem": 0.12,
            "p_value": p,
            "p_holm": h,
        }
        for i, (p, h) in enumerate(zip(p_values, p_holm, strict=True))
    ]
    baseline = {"id": "baseline", "scores": [7.1, 7.5, 7.3], "mean": 7.3, "sem": 0.12}
    return {"candidates": blocks, "baseline": baseline, "retrain_seeds": 3}


def test_final_figure_shows_each_seed_the_standard_error_and_holm_where_it_adjusted() -> None:
    view = CampaignView("ga", [], [], ([], [], []), _final([0.05, 0.35], [0.1, 0.35]))
    axis = final_figure([view]).axes[0]
    labels = [t.get_text() for t in axis.get_xticklabels()]
    assert labels[0].endswith("t0\np = 0.05 vs baseline\n(Holm 0.1)")
    assert labels[1].endswith("t1\np = 0.35 vs baseline") and labels[2].endswith("baseline")
    _, _, (stems,) = axis.containers[0]  # the first candidate's error bar
    low, high = stems.get_segments()[0][:, 1]
    assert (low, high) == pytest.approx((6.2 - 0.12, 6.2 + 0.12))  # the standard error
    dots = [c for c in axis.collections if isinstance(c, PathCollection)]
    assert [len(c.get_offsets()) for c in dots] == [3, 3, 3]  # every seed's score
    title = axis.get_title()
    assert title.count("\n") == 2 and title.endswith("; Holm: adjusted over the campaign's tests")
    single = final_figure([CampaignView("ga", [], [], ([], [], []), _final([0.05], [0.05]))])
    assert "Holm" not in single.axes[0].get_title()
    assert final_figure([_campaign([1.0])]) is None


def test_convergence_draws_the_best_so_far_against_candidates_and_minutes() -> None:
    view = CampaignView("ga", [], [], ([1, 2, 3], [120.0, 300.0, 5400.0], [8.0, 6.5, 6.5]), None)
    by_count, by_time = convergence_figure([view]).axes
    (count_line,), (time_line,) = by_count.lines, by_time.lines
    assert list(count_line.get_xdata()) == [1, 2, 3]
    assert list(time_line.get_xdata()) == [2.0, 5.0, 90.0]  # minutes
    assert list(time_line.get_ydata()) == [8.0, 6.5, 6.5]
    assert by_time.get_xlabel() == "campaign wall time [min]"
    assert time_line.get_drawstyle() == "steps-post"


def test_a_gan_curve_without_a_finite_loss_says_so_instead_of_an_empty_legend(
    tmp_path: Path,
) -> None:
    import warnings

    from evogan.plots.learning import plot_learning_curve

    records = [
        {"kind": "epoch", "step": s, "wall_seconds": 2.0 * s, "d_loss": None, "g_loss": None}
        for s in (10, 20)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns of a legend without labelled artists
        png = plot_learning_curve(records, tmp_path / "curve.png", "diverged")
    assert png.stat().st_size > 0
