"""The evolution engine, workload-agnostic: what a problem supplies (``problem``), the generation
loop and its records (``loop``), the (1+lambda) and hybrid strategies (``strategies``), point
mutation with its C kernel (``operators``), rate schedules (``schedules``) and random streams
derived from (root seed, labels) (``seeding``). It imports nothing of CNNs, MPI or configs."""

from evogan.engine.loop import (
    Evolution,
    EvolutionResult,
    FitnessMin,
    Individual,
    Observer,
    Streams,
    rank_safe,
)
from evogan.engine.operators import (
    mutated_count,
    mutation_mask,
    point_mutation,
    replace_mutation,
)
from evogan.engine.problem import DifferentiableProblem, GenerationContext, Problem
from evogan.engine.schedules import Constant, Exponential, Schedule, Step, make_schedule
from evogan.engine.seeding import derive_seed, numpy_generator, torch_generator
from evogan.engine.strategies import Hybrid, PlusLambda

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
