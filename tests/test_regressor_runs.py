"""End-to-end regressor runs through the CLI on a tiny synthetic set (real data reader)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from evogan.cli import main
from evogan.config import load_config
from evogan.data.transforms import load_regressor_data
from evogan.regressor.data import mape
from evogan.regressor.network import load_regressor
from evogan.store import load_weights, read_metrics
from evogan.store.checkpoint import read_checkpoint
from tests.conftest import REPO, evogan, evogan_here, mpi_env, mpirun, untimed

TINY = {
    "task": "regressor",
    "seed": 3,
    "data": {"synthetic": {"events": 300}, "train_events": 240, "test_events": 60},
    "ga": {"batch_size": 32, "epochs": 2, "schedule_milestones": [1]},
    "train": {"batch_size": 32, "epochs": 4, "lr": 0.003},
    "run": {"progress_every": 3},
}
SUMMARY_KEYS = {
    "method",
    "test_mape",
    "best_fitness",
    "epochs",
    "generations",
    "evaluations",
    "wall_seconds",
    "seconds_to_mape_10",
    "seconds_to_mape_5",
    "energy_response",
}


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory) -> tuple[Path, Path]:
    """A folder with the tiny config in it, and the data cache beside it."""
    root = tmp_path_factory.mktemp("regressor_runs")
    config = root / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    return root, config


@pytest.fixture(scope="module")
def runs(tiny_config):
    """A GA run, its repetition with the same seed, and an RMSprop run (one cache)."""
    root, config = tiny_config
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
        done = {
            "ga": evogan_here("evolve", str(config), "--run-dir", str(root / "ga")),
            "again": evogan("evolve", str(config), "--run-dir", str(root / "again")),
            "rmsprop": evogan_here("train", str(config), "--run-dir", str(root / "rmsprop")),
        }
        for name, process in done.items():
            assert process.returncode == 0, f"{name}: {process.stderr}"
        yield root, config, done


@pytest.mark.slow
def test_ga_run_writes_a_complete_run_directory(runs) -> None:
    root, _, done = runs
    run = root / "ga"
    assert {p.name for p in run.iterdir()} == {
        "config.yaml",
        "metrics.jsonl",
        "best_model.h5",
        "summary.json",
        "manifest.json",
        "checkpoints",
        "status.json",
        "learning_curve.png",
        ".lock",
    }
    assert json.loads((run / "status.json").read_text())["status"] == "finished"
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary) >= SUMMARY_KEYS
    assert summary["method"] == "ga" and summary["epochs"] == 2
    assert summary["generations"] == 2 * (240 // 32)
    assert summary["evaluations"] == 8 + (summary["generations"] - 1) * 9
    assert 0 < summary["test_mape"] < 1.5 and 0 < summary["best_fitness"] < 1.5
    bins = summary["energy_response"]
    assert sum(b["count"] for b in bins) == 60
    fields = {"true_mean", "pred_mean", "relative_error", "relative_error_std"}
    assert all(fields <= set(b) for b in bins)
    generations = read_metrics(run / "metrics.jsonl", "generation")
    epochs = read_metrics(run / "metrics.jsonl", "epoch")
    assert len(generations) == summary["generations"] and len(epochs) == 2
    assert {"best", "mean", "std", "evaluations", "evaluations_per_s", "wall_seconds"} <= set(
        generations[0]
    )
    assert all(r["test_mape"] > 0 for r in epochs)
    assert load_config(run / "config.yaml").ga.batch_size == 32  # the resolved config reloads
    assert "gen 0 |" in done["ga"].stdout  # errors in percent, as the docs and tables give them
    assert f"ga: test MAPE {100 * summary['test_mape']:.2f}% after" in done["ga"].stdout


@pytest.mark.slow
def test_saved_model_is_the_best_individual(runs) -> None:
    root, config, _ = runs
    summary = json.loads((root / "ga" / "summary.json").read_text())
    epochs = read_metrics(root / "ga" / "metrics.jsonl", "epoch")
    net = load_regressor(root / "ga" / "best_model.h5")
    cfg = load_config(config)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
        train, test = load_regressor_data(cfg.data, announce=lambda line: None)
    with torch.no_grad():
        train_mape = float(mape(net(torch.from_numpy(train.x)), torch.from_numpy(train.y)))
        test_mape = float(mape(net(torch.from_numpy(test.x)), torch.from_numpy(test.y)))
    # the saved weights are the hall of fame's best: lowest full-training-set MAPE of all
    # epoch-end elites, and the summary's test MAPE is theirs
    assert train_mape == pytest.approx(summary["best_fitness"], rel=1e-4)
    assert summary["best_fitness"] == pytest.approx(min(r["reference_fitness"] for r in epochs))
    assert test_mape == pytest.approx(summary["test_mape"], rel=1e-4)


def low_energy_check(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """``scripts/check_low_energy.py`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "scripts/check_low_energy.py", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**mpi_env(), "EVOGAN_CACHE_DIR": str(cache)},
    )


@pytest.mark.slow
def test_low_energy_check_scores_each_saved_model_on_fresh_showers(runs, tmp_path) -> None:
    root, config, _ = runs
    out = tmp_path / "low.json"
    args = [str(root / "ga"), str(root / "rmsprop"), "--range", "3", "9", "--events", "200"]
    done = low_energy_check(*args, "--json", str(out), cache=root / "cache")
    assert done.returncode == 0, done.stderr
    scores = json.loads(out.read_text())
    fresh = load_config(
        config,
        [
            "data.synthetic.seed=777",
            "data.synthetic.energy_range=[3,9]",
            "data.synthetic.events=200",
            "data.train_events=null",
            "data.test_events=null",
        ],
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
        parts = load_regressor_data(fresh.data, announce=lambda line: None)
    x = torch.cat([torch.from_numpy(p.x) for p in parts])
    energy = torch.cat([torch.from_numpy(p.energy) for p in parts])
    assert len(energy) == 200 and float(energy.min()) >= 3 and float(energy.max()) <= 9
    for score, name in zip(scores, ("ga", "rmsprop"), strict=True):
        with torch.no_grad():
            predicted = load_regressor(root / name / "best_model.h5")(x).reshape(-1) * 100
        expected = float(((predicted - energy).abs() / energy).mean())
        assert score["events"] == 200
        assert score["relative_error"] == pytest.approx(expected, rel=1e-5)
    assert scores[0]["relative_error"] != scores[1]["relative_error"]


@pytest.mark.slow
def test_low_energy_check_refuses_a_directory_without_a_model(tmp_path) -> None:
    done = low_energy_check(str(tmp_path), cache=tmp_path / "cache")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "best_model.h5" in done.stderr
    assert not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_same_seed_gives_identical_runs(runs) -> None:
    root, _, _ = runs
    first = read_metrics(root / "ga" / "metrics.jsonl")
    second = read_metrics(root / "again" / "metrics.jsonl")
    assert [untimed(r) for r in first] == [untimed(r) for r in second]
    a, _ = load_weights(root / "ga" / "best_model.h5")
    b, _ = load_weights(root / "again" / "best_model.h5")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_rmsprop_reduces_the_loss_on_a_tiny_set(runs) -> None:
    root, _, done = runs
    summary = json.loads((root / "rmsprop" / "summary.json").read_text())
    epochs = read_metrics(root / "rmsprop" / "metrics.jsonl", "epoch")
    last = f"test MAPE {100 * epochs[-1]['test_mape']:.2f}% | "
    assert f"epoch 4/4 | train {100 * epochs[-1]['reference_fitness']:.2f}% | {last}" in (
        done["rmsprop"].stdout
    )
    assert summary["method"] == "rmsprop" and len(epochs) == 4
    train_loss = [r["reference_fitness"] for r in epochs]
    assert train_loss[-1] < 0.5 * train_loss[0]
    assert epochs[-1]["test_mape"] < epochs[0]["test_mape"]
    assert summary["generations"] == 4 * (240 // 32)


@pytest.mark.slow
def test_hybrid_strategy_runs_and_reports_gradient_steps(runs) -> None:
    root, config, _ = runs
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
        from evogan.regressor.evolve import evolve_regressor

        cfg = load_config(config, ["ga.strategy=hybrid", "ga.hybrid_steps=2", "ga.epochs=1"])
        run = evolve_regressor(cfg, root / "hybrid", announce=lambda line: None)
    summary = run.summary()
    assert summary["method"] == "hybrid"
    assert summary["gradient_steps"] == 2 * (240 // 32)
    assert summary["discarded_refinements"] == 0  # ga.hybrid_keep_steps: always
    assert np.isfinite(summary["test_mape"])


ADAPTIVE = [
    "ga.rate_schedule=constant",
    "ga.step_adaptation=success_rule",
    "ga.adaptation_window=3",
    "ga.acceptance=reevaluate",
    "ga.reevaluation_events=64",
    "checkpoint.every=5",
    "checkpoint.keep=2",
]


COMPETING_HYBRID = [  # as configs/regressor_hybrid.yaml ships it: the adaptive GA's keys
    *ADAPTIVE,
    "ga.strategy=hybrid",
    "ga.hybrid_keep_steps=compete",
    "ga.hybrid_lr=0.003",
]


def _resumed_at_generation_10(root: Path, config: Path, overrides: list[str], name: str):
    """A 14-generation run, and a copy resumed from its checkpoint at generation 10."""
    from evogan.regressor.evolve import evolve_regressor

    cfg = load_config(config, overrides)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
        whole = evolve_regressor(cfg, root / name, announce=lambda line: None).path
        resumed = root / f"{name}-resumed"
        shutil.copytree(whole, resumed)
        (resumed / "checkpoints/island-0000/gen-00000014.h5").unlink()  # back to gen 10 of 14
        evolve_regressor(cfg, resumed, announce=lambda line: None, resume=True)
    untimed_metrics = [read_metrics(run / "metrics.jsonl") for run in (whole, resumed)]
    assert [untimed(r) for r in untimed_metrics[0]] == [untimed(r) for r in untimed_metrics[1]]
    a, _ = load_weights(whole / "best_model.h5")
    b, _ = load_weights(resumed / "best_model.h5")
    assert all(torch.equal(a[k], b[k]) for k in a)
    return untimed_metrics[0], resumed


@pytest.mark.slow
def test_adaptive_ga_resumed_mid_epoch_ends_bit_identical(runs) -> None:
    root, config, _ = runs
    metrics, _ = _resumed_at_generation_10(root, config, ADAPTIVE, "adaptive")
    powers = {r["power"] for r in metrics if r["kind"] == "generation"}
    assert len(powers) > 1  # the step size did adapt


@pytest.mark.slow
def test_hybrid_resumed_with_trained_weights_waiting_ends_bit_identical(runs) -> None:
    root, config, _ = runs
    _, resumed = _resumed_at_generation_10(root, config, COMPETING_HYBRID, "compete")
    arrays, meta = read_checkpoint(resumed / "checkpoints/island-0000/gen-00000010.h5")
    assert arrays["strategy_trained"].shape == arrays["genomes"][0].shape
    assert meta["wall_seconds"] >= meta["train_seconds"] > 0  # a resume's clock goes on from it


@pytest.mark.slow
def test_adaptive_islands_sending_lineages_equal_islands_sending_weights(runs) -> None:
    """Noise-aware acceptance keeps the old elite although a child won on the minibatch: the
    elite's lineage must follow the kept row, or a replayed migrant differs from the sent one.
    The shipped least-squares start is refitted where a lineage is replayed: to the same bits
    (a drawn readout's lineage, in process: tests/test_lineage.py)."""
    root, config, _ = runs
    best = []
    for send in ("lineage", "weights"):
        run = root / f"islands-{send}"
        sync = ["migration.mode=sync", "migration.every=2", f"migration.send={send}"]
        start = ["model.readout=least_squares", "model.readout_events=64"]
        args = [f"--set={item}" for item in [*ADAPTIVE, *start, *sync]]
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
            command = ["-m", "evogan", "evolve", str(config), "--run-dir", str(run), *args]
            done = mpirun(2, command, timeout=120)
        assert done.returncode == 0, done.stderr
        best.append(load_weights(run / "best_model.h5")[0])
    assert all(torch.equal(best[0][k], best[1][k]) for k in best[0])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("ga.children=0", "ga.children = 0 is not allowed"),
        ("ga.mutation_rate=1.5", "ga.mutation_rate = 1.5 is not allowed"),
        ("ga.mutation_rate=0", "ga.mutation_rate = 0 is not allowed"),
        ("ga.batch_size=5000", "ga.batch_size must not exceed the 240 training events"),
        ("model.kernel=40", "model.kernel must not exceed the input size 51x25"),
        ("ga.adaptation_factor=1", "ga.adaptation_factor = 1 is not allowed"),
        ("ga.adaptation_min=2", "ga.adaptation_min = 2 is not allowed"),
        ("model.readout_ridge=0", "model.readout_ridge = 0 is not allowed"),
        ("model.readout=fitted", "model.readout = 'fitted' is not allowed"),
        ("ga.hybrid_keep_steps=maybe", "ga.hybrid_keep_steps = 'maybe' is not allowed"),
        ("ga.mutation_power=.nan", "ga.mutation_power = nan is not allowed: it must be a finite"),
        (
            "ga.children=1000000000000",
            "ga.children = 1,000,000,000,000 (genomes of 2,049 weights) needs at least 16.4 PB "
            "of memory, more than the ",
        ),
        ("ga.initial_parents=10000000000000", "ga.initial_parents = 10,000,000,000,000 ("),
    ],
)
def test_impossible_settings_fail_in_one_line_before_any_work(
    tiny_config, override, message, capsys
) -> None:
    """In process, as the CLI's ``main`` runs them: test_train_refuses_a_config_without_a_trainer
    runs a refusal in a process of its own."""
    root, config = tiny_config
    target = root / f"bad-{override.replace('=', '-')}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
        code = main(["evolve", str(config), "--set", override, "--run-dir", str(target)])
    out, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evogan: error:"), err
    assert message in lines[0]
    assert "Traceback" not in out + err
    assert not target.exists()


def test_train_refuses_a_config_without_a_trainer(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: regressor\ntrain: {lr: -1}\n")
    process = evogan_here("train", str(bad))
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        line for line in process.stderr.strip().splitlines() if line.startswith("evogan: error:")
    ]
    assert "train.lr = -1 is not allowed" in process.stderr
