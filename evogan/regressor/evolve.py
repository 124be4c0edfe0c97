"""A whole GA (or hybrid) run of the energy regressor: checks, strategy, run directory, summary."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from evogan.config.regressor import RegressorConfig
from evogan.engine import Observer, PlusLambda, Streams, make_schedule
from evogan.islands.island import IslandHybrid, IslandPlusLambda, IslandSettings
from evogan.engine.problem import Problem
from evogan.store import RunDir


def build_strategy(
    cfg: RegressorConfig,
    problem: Problem,
    *,
    island: int = 0,
    observers: Iterable[Observer] = (),
    epoch_report: Callable[..., dict[str, Any]] | None = None,
) -> PlusLambda:
    """The configured strategy as an island, with random streams derived from (seed, island);
    alone until :meth:`~evogan.islands.island.IslandModel.setup_island` wires it in."""
    ga = cfg.ga
    common = {
        "children": ga.children,
        "initial_parents": ga.initial_parents,
        "epochs": ga.epochs,
        "streams": Streams.derive(cfg.seed, island),
        "rate": make_schedule(
            ga.rate_schedule,
            ga.mutation_rate,
            ga.schedule_milestones,
            ga.schedule_factor,
            ga.schedule_gamma,
        ),
        "power": make_schedule(
            ga.power_schedule,
            ga.mutation_power,
            ga.schedule_milestones,
            ga.schedule_factor,
            ga.schedule_gamma,
        ),
        "hall_of_fame": ga.hall_of_fame,
        "observers": observers,
        "epoch_report": epoch_report,
    }
    if ga.strategy == "hybrid":
        strategy = IslandHybrid(problem, steps=ga.hybrid_steps, lr=ga.hybrid_lr, **common)
    else:
        strategy = IslandPlusLambda(problem, **common)
    strategy.setup_island(IslandSettings(index=island))
    return strategy


def method_name(cfg: RegressorConfig) -> str:
    return "hybrid" if cfg.ga.strategy == "hybrid" else "ga"


def evolve_regressor(
    cfg: RegressorConfig,
    run_dir: str | Path | None = None,
    announce: Callable[[str], Any] = print,
    resume: bool = False,
) -> RunDir:
    """Check everything, then evolve (one island per ``islands.ranks_per_island`` ranks under
    mpirun, one island otherwise) and write the run directory; returns it.

    ``resume`` continues ``run_dir`` from its checkpoints. A SIGTERM/SIGINT ends every rank
    after a checkpoint, without a summary; the run is then resumed with ``--resume``.
    """
    from evogan.regressor.islands import IslandRun

    return IslandRun(cfg, announce).execute(run_dir, resume)
