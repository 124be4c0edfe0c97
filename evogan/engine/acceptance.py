"""Noise-aware elite acceptance: a challenger that beat the elite on the minibatch replaces it
only when it is also better on a fresh re-evaluation sample.

On one noisy minibatch the best of lambda children beats the elite by chance once the
mutation is large next to the improvement left, and an elitist GA then drifts uphill. Scoring
the elite and the challenger again on ``events`` examples drawn for this comparison alone
(from a seed derived from the strategy's key and the generation) filters those chance wins
at the cost of two evaluations per minibatch win. The sample is fresh every time: an elite
compared on one fixed sample again and again settles in a corner of that sample's
(piecewise-linear, for MAPE) fitness, where nearly every child looks worse, and stops
moving. Scored in two stages, a comparison whose difference is already clear on the first
examples costs a fraction of the sample. Nothing is kept between generations, so a resumed run
needs no state from here.
"""

from __future__ import annotations

import torch
from torch import Tensor

from evogan.engine.problem import Problem
from evogan.engine.records import rank_safe
from evogan.seeding import derive_seed, seeded


class Reevaluation:
    """Accept a challenger only when it is strictly better than the elite on a fresh sample of
    ``events`` examples (:meth:`Problem.sample`).

    With ``first``, the pair is scored on the sample's first ``first`` examples before the
    rest: when the paired per-example differences already put the challenger ``z`` standard
    errors better or worse, that decides (early in a run most challengers are far better);
    otherwise the rest is scored and the whole sample decides, exactly as without ``first``.
    Needs :meth:`Problem.example_losses`; problems without it score the whole sample.
    """

    def __init__(
        self, problem: Problem, events: int, key: int, first: int = 0, z: float = 3.0
    ) -> None:
        if events < 1:
            raise ValueError(f"re-evaluation events must be at least 1, got {events}")
        if not 0 <= first < events:
            raise ValueError(f"the first stage must hold 0 to {events - 1} examples, got {first}")
        if z <= 0:
            raise ValueError(f"the early-decision threshold must be positive, got {z}")
        self.problem = problem
        self.events = events
        self.key = key
        self.first = first
        self.z = z
        self.evaluations = 0
        self.early = 0
        """Comparisons decided on the first stage alone."""
        self.last_sample = None
        """The sample of the last comparison (tests check decisions against it)."""
        self.last_examples = events
        """How many of its examples the last comparison scored."""

    def accepts(self, elite: Tensor, challenger: Tensor, generation: int) -> bool:
        """Whether ``challenger`` replaces ``elite`` at ``generation``."""
        generator = seeded(derive_seed(self.key, "reevaluation", generation))
        sample = self.problem.sample(self.events, generator)
        if sample is None:
            raise ValueError(f"{self.problem!r} has no sample() for re-evaluation")
        pair = torch.stack([challenger, elite])
        self.evaluations += 2
        self.last_sample = sample
        self.last_examples = self.events
        head = self.problem.example_losses(pair, sample, 0, self.first) if self.first else None
        if head is None:
            fitness = rank_safe(self.problem.evaluate(pair, sample))
            return bool(fitness[0] < fitness[1])
        score = _paired_z(head[0].double() - head[1].double())
        if abs(score) >= self.z:
            self.early += 1
            self.last_examples = head.shape[1]
            return score < 0
        rest = self.problem.example_losses(pair, sample, self.first, self.events)
        fitness = rank_safe(torch.cat([head, rest], dim=1).mean(dim=1))
        return bool(fitness[0] < fitness[1])


def _paired_z(difference: Tensor) -> float:
    """Mean of the paired differences over its standard error (0 when it is undefined)."""
    if difference.numel() < 2 or not bool(torch.isfinite(difference).all()):
        return 0.0
    spread = float(difference.std())
    if spread == 0:
        return 0.0
    return float(difference.mean()) / (spread / difference.numel() ** 0.5)
