"""The evolution engine: problems, operators, schedules and strategies (workload-agnostic)."""

from evogan.evolution.engine import (
    Evolution,
    EvolutionResult,
    FitnessMin,
    Individual,
    Observer,
    Streams,
    rank_safe,
)
from evogan.evolution.operators import (
    mutated_count,
    mutation_mask,
    point_mutation,
    replace_mutation,
)
from evogan.evolution.problem import DifferentiableProblem, GenerationContext, Problem
from evogan.evolution.schedules import Constant, Exponential, Schedule, Step, make_schedule
from evogan.evolution.seeding import derive_seed, numpy_generator, torch_generator
from evogan.evolution.strategies import Hybrid, PlusLambda

__all__ = [
    "Constant",
    "DifferentiableProblem",
    "Evolution",
    "EvolutionResult",
    "Exponential",
    "FitnessMin",
    "GenerationContext",
    "Hybrid",
    "Individual",
    "Observer",
    "PlusLambda",
    "Problem",
    "Schedule",
    "Step",
    "Streams",
    "derive_seed",
    "make_schedule",
    "mutated_count",
    "mutation_mask",
    "numpy_generator",
    "point_mutation",
    "rank_safe",
    "replace_mutation",
    "torch_generator",
]
