"""The weight-genome evolution engine: genomes are rows of one float32 tensor (a network's
weights), so mutation and evaluation are vectorised over candidates. It owns what a problem
supplies (``problem``), the generation loop with its hook lists (``loop``) and what it produces
and hands to hooks (``records``), the (1+lambda) and hybrid strategies with their one seed scheme
(``strategies``), their step-size adaptation (``adaptation``) and noise-aware elite acceptance
(``acceptance``), point mutation with its C kernel (``operators``) and rate schedules
(``schedules``). Architectures, whose genomes are dicts of genes and whose every evaluation is a
training, have their own GA (:mod:`evogan.search.ga_backend`). It imports nothing of CNNs, MPI
or configs."""

from evogan.engine.acceptance import Reevaluation
from evogan.engine.adaptation import SuccessRule
from evogan.engine.loop import Evolution, Observer, Streams
from evogan.engine.module_problem import ModuleProblem
from evogan.engine.operators import (
    mutated_count,
    mutation_mask,
    point_mutation,
    replace_mutation,
)
from evogan.engine.problem import DifferentiableProblem, GenerationContext, Problem
from evogan.engine.records import (
    ChildDraw,
    Draw,
    EvolutionResult,
    FitnessMin,
    Individual,
    InitialDraw,
    LoopState,
    Selection,
    rank_safe,
)
from evogan.engine.schedules import Constant, Exponential, Schedule, Step, make_schedule
from evogan.engine.strategies import Hybrid, PlusLambda

__all__ = [
    "ChildDraw",
    "Constant",
    "DifferentiableProblem",
    "Draw",
    "Evolution",
    "EvolutionResult",
    "Exponential",
    "FitnessMin",
    "GenerationContext",
    "Hybrid",
    "Individual",
    "InitialDraw",
    "LoopState",
    "ModuleProblem",
    "Observer",
    "PlusLambda",
    "Problem",
    "Reevaluation",
    "Schedule",
    "Selection",
    "Step",
    "Streams",
    "SuccessRule",
    "make_schedule",
    "mutated_count",
    "mutation_mask",
    "point_mutation",
    "rank_safe",
    "replace_mutation",
]
