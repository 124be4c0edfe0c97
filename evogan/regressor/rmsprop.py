"""The gradient baseline of the GA study: the same network, data, batch and loss, RMSprop.

Initial weights come from the same initialisation as the GA's genomes, drawn from the same
(seed, "init") stream, and minibatches from the same kind of per-epoch permutation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evogan.config.regressor import RegressorConfig
from evogan.engine import Streams
from evogan.regressor.network import RegressorNet
from evogan.regressor.problem import RegressorData, RegressorProblem, load_and_check, mape
from evogan.regressor.report import Progress, epoch_test_mape, finish_run, start_run
from evogan.store import RunDir


@dataclass
class TrainResult:
    """``best`` holds the weights of the epoch with the lowest training-set MAPE (the same rule
    the GA's hall of fame applies), ``net`` the final ones."""

    net: RegressorNet
    best: torch.Tensor
    best_fitness: float
    steps: int
    train_seconds: float
    wall_seconds: float
    epochs: list[dict[str, Any]] = field(default_factory=list)


def train_rmsprop(
    problem: RegressorProblem,
    *,
    epochs: int,
    lr: float,
    streams: Streams,
    observers: Iterable[Callable[[dict[str, Any]], None]] = (),
    epoch_report: Callable[[RegressorNet], dict[str, Any]] | None = None,
) -> TrainResult:
    """Minimise the problem's MAPE with RMSprop; one record per step and per epoch."""
    net = RegressorNet.from_genome(problem.layout, problem.initial_genomes(1, streams.init)[0])
    optimizer = torch.optim.RMSprop(net.parameters(), lr=lr)
    observers = list(observers)
    started = time.perf_counter()
    steps, train_seconds, records = 0, 0.0, []
    best, best_fitness = net.genome(), float("inf")
    for epoch in range(epochs):
        for x, y in problem.batches(epoch, streams.data):
            tick = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = mape(net(x), y)
            loss.backward()
            optimizer.step()
            train_seconds += time.perf_counter() - tick
            record = {
                "kind": "generation",
                "generation": steps,
                "epoch": epoch,
                "best": loss.item(),
                "mean": loss.item(),
                "std": 0.0,
                "evaluations": steps + 1,
                "evaluations_per_s": (steps + 1) / max(train_seconds, 1e-12),
                "train_seconds": train_seconds,
                "wall_seconds": time.perf_counter() - started,
            }
            steps += 1
            for observer in observers:
                observer(record)
        train_loss = float(problem.reference_fitness(net.genome().unsqueeze(0))[0])
        if train_loss < best_fitness:
            best, best_fitness = net.genome(), train_loss
        record = {
            "kind": "epoch",
            "epoch": epoch,
            "generation": steps,
            "evaluations": steps,
            "reference_fitness": train_loss,
            "train_seconds": train_seconds,
            "wall_seconds": time.perf_counter() - started,
        }
        if epoch_report is not None:
            record.update(epoch_report(net))
        records.append(record)
        for observer in observers:
            observer(record)
    wall_seconds = time.perf_counter() - started
    return TrainResult(net, best, best_fitness, steps, train_seconds, wall_seconds, records)


def train_regressor(
    cfg: RegressorConfig, run_dir: str | Path | None = None, announce: Callable[[str], Any] = print
) -> RunDir:
    """``evogan train`` for ``task: regressor``: check, train, write the run directory."""
    layout, train, test = load_and_check(cfg, cfg.train.batch_size, announce, "train.batch_size")
    problem = RegressorProblem(layout, train, batch_size=cfg.train.batch_size)
    run, writer = start_run(cfg, "rmsprop", None if run_dir is None else str(run_dir))
    announce(
        f"rmsprop: {layout.size} weights, {len(train)} training / {len(test)} test events, "
        f"batch {cfg.train.batch_size}, lr {cfg.train.lr:g}, {cfg.train.epochs} epochs "
        f"-> {run.path}"
    )
    with writer:
        progress = Progress(writer, cfg.train.epochs, cfg.run.progress_every, unit="step")
        result = train_rmsprop(
            problem,
            epochs=cfg.train.epochs,
            lr=cfg.train.lr,
            streams=Streams.derive(cfg.seed),
            observers=[progress],
            epoch_report=lambda net: epoch_test_mape(net, test.x, test.y),
        )
    summary = _summarise(cfg, run, problem, result, test)
    announce(
        f"rmsprop: test MAPE {summary['test_mape']:.4f} after {result.steps} steps "
        f"({result.train_seconds:.1f} s); summary in {run.file('summary.json')}"
    )
    return run


def _summarise(
    cfg: RegressorConfig,
    run: RunDir,
    problem: RegressorProblem,
    result: TrainResult,
    test: RegressorData,
) -> dict[str, Any]:
    prediction = problem.predict(result.best, test.x)
    return finish_run(
        run,
        cfg,
        method="rmsprop",
        layout=problem.layout,
        best=result.best,
        best_fitness=result.best_fitness,
        test_energy=test.energy,
        test_prediction=prediction,
        epochs=result.epochs,
        generations=result.steps,
        evaluations=result.steps,
        train_seconds=result.train_seconds,
        wall_seconds=result.wall_seconds,
        extra={
            "train_events": len(problem.train),
            "test_events": len(test),
            "lr": cfg.train.lr,
            "final_train_fitness": result.epochs[-1]["reference_fitness"],
        },
    )
