"""Noise-aware elite acceptance: a challenger that beat the elite on the minibatch replaces it
only when it is also better on a fresh re-evaluation sample.

On one noisy minibatch the best of lambda children beats the elite by chance once the
mutation is large next to the improvement left, and an elitist GA then drifts uphill. Scoring
the elite and the challenger again on ``events`` examples drawn for this comparison alone
(from a seed derived from the strategy's key and the generation) filters those chance wins
at the cost of two evaluations per minibatch win. The sample is fresh every time: an elite
compared on one fixed sample again and again settles in a corner of that sample's
(piecewise-linear, for MAPE) fitness, where nearly every child looks worse, and stops
moving. Nothing is kept between generations, so a resumed run needs no state from here.
"""

from __future__ import annotations

import torch
from torch import Tensor

from evogan.engine.problem import Problem
from evogan.engine.records import rank_safe
from evogan.engine.seeding import derive_seed, seeded


class Reevaluation:
    """Accept a challenger only when it is strictly better than the elite on a fresh sample of
    ``events`` examples (:meth:`Problem.sample`)."""

    def __init__(self, problem: Problem, events: int, key: int) -> None:
        if events < 1:
            raise ValueError(f"re-evaluation events must be at least 1, got {events}")
        self.problem = problem
        self.events = events
        self.key = key
        self.evaluations = 0
        self.last_sample = None
        """The sample of the last comparison (tests check decisions against it)."""

    def accepts(self, elite: Tensor, challenger: Tensor, generation: int) -> bool:
        """Whether ``challenger`` replaces ``elite`` at ``generation``."""
        generator = seeded(derive_seed(self.key, "reevaluation", generation))
        sample = self.problem.sample(self.events, generator)
        if sample is None:
            raise ValueError(f"{self.problem!r} has no sample() for re-evaluation")
        fitness = rank_safe(self.problem.evaluate(torch.stack([challenger, elite]), sample))
        self.evaluations += 2
        self.last_sample = sample
        return bool(fitness[0] < fitness[1])
