"""A whole GA (or hybrid) run of the energy regressor: checks, strategy, run directory, summary."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from evogan.config.regressor import RegressorConfig
from evogan.evolution import EvolutionResult, Hybrid, Observer, PlusLambda, Streams, make_schedule
from evogan.problems.regressor import RegressorData, RegressorProblem, load_and_check
from evogan.problems.regressor_report import Progress, epoch_test_mape, finish_run, start_run
from evogan.store import RunDir


def build_strategy(
    cfg: RegressorConfig,
    problem: RegressorProblem,
    *,
    island: int = 0,
    observers: Iterable[Observer] = (),
    epoch_report: Callable[..., dict[str, Any]] | None = None,
) -> PlusLambda:
    """The configured strategy, with random streams derived from (seed, island)."""
    ga = cfg.ga
    common = {
        "children": ga.children,
        "initial_parents": ga.initial_parents,
        "epochs": ga.epochs,
        "streams": Streams.derive(cfg.seed, island),
        "rate": make_schedule(
            ga.rate_schedule, ga.mutation_rate, ga.schedule_milestones, ga.schedule_factor,
            ga.schedule_gamma,
        ),
        "power": make_schedule(
            ga.power_schedule, ga.mutation_power, ga.schedule_milestones, ga.schedule_factor,
            ga.schedule_gamma,
        ),
        "hall_of_fame": ga.hall_of_fame,
        "observers": observers,
        "epoch_report": epoch_report,
    }
    if ga.strategy == "hybrid":
        return Hybrid(problem, steps=ga.hybrid_steps, lr=ga.hybrid_lr, **common)
    return PlusLambda(problem, **common)


def method_name(cfg: RegressorConfig) -> str:
    return "hybrid" if cfg.ga.strategy == "hybrid" else "ga"


def evolve_regressor(
    cfg: RegressorConfig, run_dir: str | Path | None = None, announce: Callable[[str], Any] = print
) -> RunDir:
    """Check everything, then evolve and write the run directory; returns it."""
    make_schedule(cfg.ga.rate_schedule, cfg.ga.mutation_rate, cfg.ga.schedule_milestones)
    layout, train, test = load_and_check(cfg, cfg.ga.batch_size, announce)
    problem = RegressorProblem(
        layout, train, batch_size=cfg.ga.batch_size, mutation=cfg.ga.mutation,
        replace_sigma=cfg.ga.replace_sigma, eval_block=cfg.ga.eval_block,
    )
    method = method_name(cfg)
    run, writer = start_run(cfg, method, None if run_dir is None else str(run_dir))
    announce(
        f"{method}: {layout.size} weights, {len(train)} training / {len(test)} test events, "
        f"1+{cfg.ga.children} per generation, {len(train) // cfg.ga.batch_size} generations "
        f"per epoch, {cfg.ga.epochs} epochs -> {run.path}"
    )
    with writer:
        progress = Progress(writer, cfg.ga.epochs, cfg.run.progress_every)
        strategy = build_strategy(
            cfg, problem, observers=[progress],
            epoch_report=lambda genome: epoch_test_mape(
                lambda x: problem.predict(genome, x), test.x, test.y
            ),
        )
        result = strategy.run()
    summary = _summarise(cfg, run, method, problem, strategy, result, test)
    announce(
        f"{method}: test MAPE {summary['test_mape']:.4f} after {result.generations} generations "
        f"({result.train_seconds:.1f} s); summary in {run.file('summary.json')}"
    )
    return run


def _summarise(
    cfg: RegressorConfig,
    run: RunDir,
    method: str,
    problem: RegressorProblem,
    strategy: PlusLambda,
    result: EvolutionResult,
    test: RegressorData,
) -> dict[str, Any]:
    extra = {
        "eval_seconds": result.eval_seconds,
        "eval_share": result.eval_seconds / max(result.train_seconds, 1e-12),
        "train_events": len(problem.train),
        "test_events": len(test),
        "final_elite_fitness": result.elite_fitness,
    }
    if isinstance(strategy, Hybrid):
        extra["gradient_steps"] = strategy.gradient_steps
    return finish_run(
        run, cfg, method=method, layout=problem.layout, best=result.best,
        best_fitness=result.best_fitness, test_energy=test.energy,
        test_prediction=problem.predict(result.best, test.x), epochs=result.epochs,
        generations=result.generations, evaluations=result.evaluations,
        train_seconds=result.train_seconds, wall_seconds=result.wall_seconds,
        extra=extra,
    )
