"""The configured GA strategy of a regressor run: (1+lambda) or its RMSprop hybrid, with the
mutation rate and power schedules, the step-size adaptation and the elite acceptance built
from the ``ga`` config section."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from evogan.config.regressor import GAConfig, RegressorConfig
from evogan.engine import (
    Hybrid,
    Observer,
    PlusLambda,
    Schedule,
    Streams,
    SuccessRule,
    make_schedule,
)
from evogan.engine.problem import Problem
from evogan.resources import require_memory


def schedules(ga: GAConfig) -> tuple[Schedule, Schedule]:
    """The mutation rate and power schedules of ``ga`` (checks the milestones)."""
    shape = (ga.schedule_milestones, ga.schedule_factor, ga.schedule_gamma)
    rate = make_schedule(ga.rate_schedule, ga.mutation_rate, *shape)
    power = make_schedule(ga.power_schedule, ga.mutation_power, *shape)
    return rate, power


def check_memory(ga: GAConfig, weights: int) -> None:
    """Refuse a population too large for this machine's memory, before the run starts: a
    generation's ``children`` float32 genomes of ``weights`` weights are in memory twice while
    drawn (the children, then the elite and the children in one table), the first
    generation's ``initial_parents`` at least once."""
    key, count = "ga.children", ga.children
    if ga.initial_parents > 2 * (ga.children + 1):
        key, count = "ga.initial_parents", ga.initial_parents
    need = 4 * weights * max(ga.initial_parents, 2 * (ga.children + 1))
    require_memory(need, f"{key} = {count:,} (genomes of {weights:,} weights)", f"lower {key}")


def adaptation(ga: GAConfig) -> SuccessRule | None:
    """The success rule of ``ga`` (None with ``step_adaptation: none``)."""
    if ga.step_adaptation == "none":
        return None
    return SuccessRule(
        window=ga.adaptation_window,
        factor=ga.adaptation_factor,
        target=ga.adaptation_target,
        low=ga.adaptation_min,
        high=ga.adaptation_max,
        adapts=ga.adapt,
    )


def build_strategy(
    cfg: RegressorConfig,
    problem: Problem,
    *,
    island: int = 0,
    observers: Iterable[Observer] = (),
    epoch_report: Callable[..., dict[str, Any]] | None = None,
) -> PlusLambda:
    """The configured strategy, with random streams derived from (seed, island)."""
    ga = cfg.ga
    rate, power = schedules(ga)
    common: dict[str, Any] = {
        "children": ga.children,
        "initial_parents": ga.initial_parents,
        "epochs": ga.epochs,
        "streams": Streams.derive(cfg.seed, island),
        "rate": rate,
        "power": power,
        "hall_of_fame": ga.hall_of_fame,
        "observers": observers,
        "epoch_report": epoch_report,
        "adaptation": adaptation(ga),
        "reevaluation_events": ga.reevaluation_events if ga.acceptance == "reevaluate" else None,
        "reevaluation_first": ga.reevaluation_first,
        "reevaluation_z": ga.reevaluation_z,
    }
    if ga.strategy == "hybrid":
        return Hybrid(
            problem,
            steps=ga.hybrid_steps,
            lr=ga.hybrid_lr,
            keep_steps=ga.hybrid_keep_steps,
            **common,
        )
    return PlusLambda(problem, **common)


def method_name(cfg: RegressorConfig) -> str:
    """The run's method as run directories and summaries name it."""
    return "hybrid" if cfg.ga.strategy == "hybrid" else "ga"
