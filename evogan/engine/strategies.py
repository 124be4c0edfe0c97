"""Strategies: the elitist (1+lambda) of the GA study and its Lamarckian hybrid with RMSprop."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from evogan.engine.loop import Evolution
from evogan.engine.operators import draw_seed
from evogan.engine.problem import DifferentiableProblem, GenerationContext, Problem


class PlusLambda(Evolution):
    """(1+lambda): the elite is re-evaluated on every batch together with its lambda children,
    and the best of the lambda+1 becomes the elite (ties keep the elite).

    The first generation evaluates ``initial_parents`` random genomes and keeps the best.
    """

    def __init__(
        self, problem: Problem, *, children: int = 8, initial_parents: int = 8, **kwargs: Any
    ) -> None:
        if children < 1:
            raise ValueError(f"lambda (children) must be at least 1, got {children}")
        if initial_parents < 1:
            raise ValueError(f"initial_parents must be at least 1, got {initial_parents}")
        super().__init__(problem, **kwargs)
        self.children = children
        self.initial_parents = initial_parents

    def propose(self, context: GenerationContext) -> Tensor:
        if self.elite is None:
            return self.problem.initial_genomes(self.initial_parents, self.streams.init)
        seed = draw_seed(self.streams.mutation)
        children = self.problem.mutate(self.elite, self.children, seed, context)
        return torch.cat([self.elite.unsqueeze(0), children])

    def select(self, candidates: Tensor, fitness: Tensor, context: GenerationContext) -> None:
        best = int(torch.argmin(fitness))  # the first minimum: row 0 (the elite) wins ties
        self.elite = candidates[best].detach().clone()
        self.elite_fitness = float(fitness[best])


class Hybrid(PlusLambda):
    """(1+lambda) whose elite takes ``steps`` RMSprop steps on the current batch after every
    selection; the trained weights are written back into the genome (Lamarckian).

    The optimiser state persists across generations, as in a gradient run.
    """

    def __init__(
        self, problem: DifferentiableProblem, *, steps: int = 1, lr: float = 1e-3, **kwargs: Any
    ) -> None:
        if not isinstance(problem, DifferentiableProblem):
            raise TypeError(f"the hybrid strategy needs a DifferentiableProblem, got {problem!r}")
        if steps < 1:
            raise ValueError(f"hybrid steps must be at least 1, got {steps}")
        super().__init__(problem, **kwargs)
        self.steps = steps
        self.lr = lr
        self.gradient_steps = 0
        self._weights: torch.nn.Parameter | None = None
        self._optimizer: torch.optim.Optimizer | None = None

    def refine(self, batch: Any, context: GenerationContext) -> None:
        if self.elite is None or batch is None:
            return
        if self._weights is None:
            self._weights = torch.nn.Parameter(self.elite.detach().clone())
            self._optimizer = torch.optim.RMSprop([self._weights], lr=self.lr)
        with torch.no_grad():
            self._weights.copy_(self.elite)
        for _ in range(self.steps):
            self._optimizer.zero_grad(set_to_none=True)
            loss = self.problem.loss(self._weights, batch)
            if not torch.isfinite(loss):
                break
            loss.backward()
            self._optimizer.step()
            self.gradient_steps += 1
        self.elite = self._weights.detach().clone()
