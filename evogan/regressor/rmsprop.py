"""The gradient baseline of the GA study: the same network, data, batch and loss, RMSprop.

It trains the network on the regressor data directly, not through the GA's problem adapter.
Initial weights come from the same initialisation as the GA's genomes, drawn from the same
(seed, "init") stream (with the same least-squares readout start when ``model.readout`` asks
for it), and minibatches from the same per-epoch permutation, so the two methods start from the
same point and see the same batches. Each optimiser step writes a ``step`` record (its loss);
each epoch an ``epoch`` record like the GA's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from evogan.config.regressor import RegressorConfig
from evogan.distributed.signals import check_stop
from evogan.engine import Streams
from evogan.optimizer import RMSprop
from evogan.progress import format_seconds
from evogan.regressor.data import RegressorData, epoch_indices, load_and_check, mape
from evogan.regressor.network import RegressorLayout, RegressorNet, batched_predict
from evogan.regressor.one_process import refuse_several_ranks
from evogan.regressor.readout import ReadoutStart, initial_networks
from evogan.regressor.report import Progress, epoch_test_mape, finish_run, percent, start_run
from evogan.store import RunDir
from evogan.store import mlflow_runs as tracking

_BLOCK_EVENTS = 36
"""Events per block on the torch path of :func:`batched_predict` for one model: cache-sized."""


@dataclass
class TrainResult:
    """``best`` holds the weights of the epoch with the lowest training-set MAPE (the same rule
    the GA's hall of fame applies), ``net`` the final ones."""

    net: RegressorNet
    best: Tensor
    best_fitness: float
    steps: int
    train_seconds: float
    wall_seconds: float
    epochs: list[dict[str, Any]] = field(default_factory=list)


def predict(layout: RegressorLayout, weights: Tensor, x: Tensor) -> Tensor:
    """Output (energy / scale) of the network with flat ``weights`` on x, as the GA scores it."""
    with torch.no_grad():
        return batched_predict(layout, weights.reshape(1, -1), x, _BLOCK_EVENTS)[0]


def train_rmsprop(
    layout: RegressorLayout,
    train: RegressorData,
    *,
    batch_size: int,
    epochs: int,
    lr: float,
    streams: Streams,
    observers: Sequence[Callable[[dict[str, Any]], None]] = (),
    epoch_report: Callable[[RegressorNet], dict[str, Any]] | None = None,
    readout: ReadoutStart | None = None,
) -> TrainResult:
    """Minimise the training MAPE with RMSprop; one record per step and per epoch. Every step
    starts with :func:`~evogan.distributed.signals.check_stop`, so a stop signal ends the run
    within a step even when its exception was raised inside code that discarded it. A
    ``readout`` fit counts as training time."""
    started = time.perf_counter()
    start = initial_networks(layout, 1, streams.init, train, readout)[0]
    net = RegressorNet.from_genome(layout, start)
    steps, train_seconds, records = 0, time.perf_counter() - started, []
    optimizer = RMSprop(net.parameters(), lr=lr)
    best, best_fitness = net.genome(), float("inf")
    for epoch in range(epochs):
        for index in epoch_indices(len(train), batch_size, streams.data):
            check_stop()
            tick = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = mape(net(train.x.index_select(0, index)), train.y.index_select(0, index))
            loss.backward()
            optimizer.step()
            train_seconds += time.perf_counter() - tick
            record = {
                "kind": "step",
                "step": steps,
                "epoch": epoch,
                "loss": loss.item(),
                "train_seconds": train_seconds,
                "wall_seconds": time.perf_counter() - started,
            }
            steps += 1
            for observer in observers:
                observer(record)
        train_loss = float(mape(predict(layout, net.genome(), train.x), train.y))
        if train_loss < best_fitness:
            best, best_fitness = net.genome(), train_loss
        record = {
            "kind": "epoch",
            "epoch": epoch,
            "steps": steps,
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


class StepProgress:
    """Metrics and progress lines of a gradient run: a line every ``every`` steps here, epoch
    records and their lines through the shared :class:`~evogan.regressor.report.Progress`."""

    def __init__(self, progress: Progress, every: int) -> None:
        self.progress = progress
        self.every = every

    def __call__(self, record: dict[str, Any]) -> None:
        if record["kind"] != "step":
            self.progress(record)
            return
        self.progress.writer.write(record)
        if record["step"] % self.every == 0:
            done = record["step"] + 1
            test = self.progress.test_mape
            print(
                f"step {record['step']} | epoch {record['epoch'] + 1}/{self.progress.epochs} | "
                f"loss {percent(record['loss'])} | test MAPE {percent(test)}"
                f" | {done / max(record['train_seconds'], 1e-12):.1f} step/s | "
                f"{format_seconds(record['wall_seconds'])}",
                file=self.progress.stream,
                flush=True,
            )


def train_regressor(
    cfg: RegressorConfig, run_dir: str | Path | None = None, announce: Callable[[str], Any] = print
) -> RunDir:
    """``evogan train`` for ``task: regressor``: check, train, write the run directory."""
    refuse_several_ranks()
    layout, train, test = load_and_check(cfg, cfg.train.batch_size, announce, "train.batch_size")
    run, writer, tracked = start_run(cfg, "rmsprop", None if run_dir is None else str(run_dir))
    announce(
        f"rmsprop: {layout.size} weights, {len(train)} training / {len(test)} test events, "
        f"batch {cfg.train.batch_size}, lr {cfg.train.lr:g}, {cfg.train.epochs} epochs "
        f"-> {run.path}"
    )
    with tracking.ending_on_error(tracked):
        with writer:
            progress = Progress(writer, cfg.train.epochs, cfg.run.progress_every, unit="step")
            result = train_rmsprop(
                layout,
                train,
                batch_size=cfg.train.batch_size,
                epochs=cfg.train.epochs,
                lr=cfg.train.lr,
                streams=Streams.derive(cfg.seed),
                observers=[StepProgress(progress, cfg.run.progress_every)],
                epoch_report=lambda net: epoch_test_mape(net, test.x, test.y),
                readout=ReadoutStart.from_config(cfg.model),
            )
        summary = finish_run(
            run,
            cfg,
            method="rmsprop",
            layout=layout,
            best=result.best,
            best_fitness=result.best_fitness,
            test=test,
            test_prediction=predict(layout, result.best, test.x),
            epochs=result.epochs,
            generations=result.steps,
            evaluations=result.steps,
            train_seconds=result.train_seconds,
            wall_seconds=result.wall_seconds,
            extra={
                "steps": result.steps,
                "train_events": len(train),
                "test_events": len(test),
                "lr": cfg.train.lr,
                "final_train_fitness": result.epochs[-1]["reference_fitness"],
            },
            tracked=tracked,
        )
    announce(
        f"rmsprop: test MAPE {percent(summary['test_mape'])} after {result.steps} steps "
        f"({result.train_seconds:.1f} s); summary in {run.file('summary.json')}"
    )
    return run
