"""What every regressor run (GA, hybrid, RMSprop) writes: metrics, progress, model, summary
and its learning curve.

One module for all methods, so ``evogan compare`` reads the same fields from every run.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from evogan.config import dump
from evogan.config.regressor import RegressorConfig
from evogan.physics.resolution import energy_response
from evogan.progress import format_seconds
from evogan.regressor.data import RegressorData
from evogan.regressor.network import RegressorLayout, RegressorNet
from evogan.store import BEST_MODEL, MetricsWriter, RunDir, save_weights
from evogan.store import mlflow_runs as tracking

EXPERIMENT = "evogan-regressor"


def target_key(target: float) -> str:
    """``0.10 -> "seconds_to_mape_10"`` (targets are fractions, keys name percent)."""
    return f"seconds_to_mape_{100 * target:g}"


def seconds_to_targets(epochs: list[dict[str, Any]], targets: list[float]) -> dict[str, Any]:
    """Training seconds at the first epoch whose test MAPE reached each target (None if never)."""
    reached: dict[str, Any] = {}
    for target in targets:
        hit = next(
            (r for r in epochs if r.get("test_mape") is not None and r["test_mape"] <= target),
            None,
        )
        reached[target_key(target)] = None if hit is None else hit["train_seconds"]
    return reached


class Progress:
    """Metrics to JSONL plus a progress line every ``every`` generations/steps and each epoch."""

    def __init__(
        self,
        writer: MetricsWriter,
        epochs: int,
        every: int,
        unit: str = "gen",
        stream: Any = None,
    ) -> None:
        self.writer = writer
        self.unit = unit
        self.epochs = epochs
        self.every = every
        self.stream = stream or sys.stdout
        self.test_mape: float | None = None

    def __call__(self, record: dict[str, Any]) -> None:
        self.writer.write(record)
        if record["kind"] == "epoch":
            self.test_mape = record.get("test_mape")
            done = record["epoch"] + 1
            left = record["train_seconds"] / done * (self.epochs - done)
            self._print(
                f"epoch {done}/{self.epochs} | "
                f"train {percent(record.get('reference_fitness'))} | "
                f"test MAPE {percent(self.test_mape)} | {record['train_seconds']:.1f} s | "
                f"ETA {format_seconds(left)}"
            )
        elif record["generation"] % self.every == 0:
            rate = (record["generation"] + 1) / max(record["train_seconds"], 1e-12)
            island = (
                ""
                if record.get("global_best") is None
                else (
                    f" | global best {percent(record['global_best'])}"  # island runs: all islands
                )
            )
            self._print(
                f"{self.unit} {record['generation']} | epoch {record['epoch'] + 1}/{self.epochs} | "
                f"best {percent(record['best'])}{island} | test MAPE {percent(self.test_mape)} | "
                f"{rate:.1f} {self.unit}/s | {record['evaluations_per_s']:.0f} evals/s"
            )

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)


def percent(value: float | None) -> str:
    """A relative error (MAPE, a fraction in the records) as the percent users read."""
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.2f}%"


def epoch_test_mape(
    predict: Callable[[Tensor], Tensor], test_x: Tensor, test_y: Tensor
) -> dict[str, float]:
    """Epoch report: test MAPE of a model (``predict`` maps x to energy / scale)."""
    with torch.no_grad():
        prediction = predict(test_x)
    return {"test_mape": float(((prediction - test_y).abs() / test_y.abs()).mean())}


def track_run(run: RunDir, cfg: RegressorConfig) -> tracking.TrackedRun | None:
    """The run's MLflow run when ``run.mlflow`` asks for one (new, or the one a resumed run
    continues), with the config as params; call before the run's metrics writer opens."""
    return tracking.start(run.path, cfg.run.mlflow, EXPERIMENT, cfg.model_dump(mode="json"))


def start_run(
    cfg: RegressorConfig, method: str, run_dir: str | None
) -> tuple[RunDir, MetricsWriter, tracking.TrackedRun | None]:
    """Create the run directory (after all checks passed), write the resolved config and open
    its MLflow run (``run.mlflow``)."""
    run = RunDir.create(method, root=cfg.run.root, name=cfg.run.name, path=run_dir)
    run.write_config(dump(cfg))
    tracked = track_run(run, cfg)
    return run, run.metrics_writer(), tracked


def finish_run(
    run: RunDir,
    cfg: RegressorConfig,
    *,
    method: str,
    layout: RegressorLayout,
    best: Tensor,
    best_fitness: float,
    test: RegressorData,
    test_prediction: Tensor,
    epochs: list[dict[str, Any]],
    generations: int,
    evaluations: int,
    train_seconds: float,
    wall_seconds: float,
    extra: dict[str, Any] | None = None,
    tracked: tracking.TrackedRun | None = None,
) -> dict[str, Any]:
    """Save the best model, write ``summary.json`` (with the detector and projection the
    test set's images come from, for the figures) and draw ``learning_curve.png`` from the
    run's metrics, then end the MLflow run ``tracked`` with the model and the curve; returns
    the summary.

    For gradient runs ``generations`` counts optimiser steps and ``evaluations`` minibatch
    forward passes of the one model, the closest analogues. Long because the summary is one
    flat record that every method writes alike; split, its keys would be spread over helpers.
    """
    scale = cfg.data.energy_scale
    test_y = test.energy / scale
    net = RegressorNet.from_genome(layout, best)
    save_weights(
        run.file(BEST_MODEL),
        net.state_dict(),
        {
            "model": layout.to_meta(),
            "method": method,
            "fitness": best_fitness,
            "energy_scale": scale,
        },
    )
    summary = {
        "method": method,
        "test_mape": float(((test_prediction - test_y).abs() / test_y).mean()),
        "best_fitness": best_fitness,
        "epochs": len(epochs),
        "generations": generations,
        "evaluations": evaluations,
        "train_seconds": train_seconds,
        "wall_seconds": wall_seconds,
        "generations_per_s": generations / max(train_seconds, 1e-12),
        "evaluations_per_s": evaluations / max(train_seconds, 1e-12),
        **(extra or {}),
        **seconds_to_targets(epochs, list(cfg.test_target_mape)),
        "params": layout.size,
        "detector": test.detector,
        "projection_axis": test.axis,
        "image": list(layout.input_shape[1:]),
        "seed": cfg.seed,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "energy_response": energy_response(
            test.energy, test_prediction * scale, cfg.run.energy_bins
        ),
    }
    run.write_summary(summary)
    from evogan.plots.regressor_curve import plot_run_curve

    curve = plot_run_curve(run.path)
    if tracked is not None:
        tracked.end("FINISHED", [run.file(BEST_MODEL), curve])
    return summary
