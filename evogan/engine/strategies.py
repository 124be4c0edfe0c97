"""Strategies: the elitist (1+lambda) of the GA study and its Lamarckian hybrid with RMSprop.

One seed scheme, counter-based, so that every candidate can be named by a few numbers (a
lineage) and rebuilt from them: the initial genomes come from one seed drawn from the ``init``
stream, and the children of generation ``g`` from the mutation seed ``splitmix(key, g)``,
where ``key`` is drawn from the ``mutation`` stream when the strategy is built
(:func:`stream_key`).
:attr:`~evogan.engine.loop.Evolution.last_draw` says how the last proposal was made.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor

from evogan.engine.acceptance import Reevaluation
from evogan.engine.adaptation import SuccessRule
from evogan.engine.loop import Evolution, Streams
from evogan.engine.operators import draw_seed, splitmix
from evogan.engine.problem import DifferentiableProblem, GenerationContext, Problem
from evogan.engine.records import ChildDraw, InitialDraw, rank_safe
from evogan.optimizer import RMSprop
from evogan.seeding import seeded


def stream_key(streams: Streams) -> int:
    """The key of a strategy's child seeds: the mutation stream's second 62-bit draw (the
    first is passed over), the key the lineages and checkpoints of existing runs name their
    children by."""
    draw_seed(streams.mutation)
    return draw_seed(streams.mutation)


class PlusLambda(Evolution):
    """(1+lambda): the elite is re-evaluated on every batch together with its lambda children,
    and the best of the lambda+1 becomes the elite (ties keep the elite).

    The first generation evaluates ``initial_parents`` random genomes and keeps the best.
    With ``reevaluation_events``, a candidate that beat the elite on the batch replaces it only
    when it is also better on a fresh, larger sample (:class:`~evogan.engine.acceptance.
    Reevaluation`; with ``reevaluation_first``, a clear difference on the sample's first
    examples decides); with ``adaptation``, the success rule scales the scheduled mutation
    (:class:`~evogan.engine.adaptation.SuccessRule`), a success being a replaced elite.
    """

    def __init__(
        self,
        problem: Problem,
        *,
        children: int = 8,
        initial_parents: int = 8,
        adaptation: SuccessRule | None = None,
        reevaluation_events: int | None = None,
        reevaluation_first: int = 0,
        reevaluation_z: float = 3.0,
        **kwargs: Any,
    ) -> None:
        if children < 1:
            raise ValueError(f"lambda (children) must be at least 1, got {children}")
        if initial_parents < 1:
            raise ValueError(f"initial_parents must be at least 1, got {initial_parents}")
        super().__init__(problem, **kwargs)
        self.children = children
        self.initial_parents = initial_parents
        self.stream_key = stream_key(self.streams)
        self.adaptation = adaptation
        self.acceptance = (
            None
            if reevaluation_events is None
            else Reevaluation(
                problem,
                reevaluation_events,
                self.stream_key,
                reevaluation_first,
                reevaluation_z,
            )
        )
        self.replacements = 0
        self.rejections = 0

    def context(self, epoch: int) -> GenerationContext:
        context = super().context(epoch)
        if self.adaptation is None:
            return context
        rate, power = self.adaptation.apply(context.rate, context.power)
        return GenerationContext(context.epoch, context.generation, rate, power)

    def propose(self, context: GenerationContext) -> Tensor:
        if self.elite is None:
            draw = InitialDraw(draw_seed(self.streams.init), self.initial_parents)
            self.last_draw = draw
            return self.problem.initial_genomes(draw.count, seeded(draw.seed))
        self.last_draw = ChildDraw(
            self.stream_key, self.generation, self.children, context.rate, context.power
        )
        seed = splitmix(self.stream_key, self.generation)
        children = self.problem.mutate(self.elite, self.children, seed, context)
        return torch.cat([self.elite.unsqueeze(0), children])

    def select(self, candidates: Tensor, fitness: Tensor, context: GenerationContext) -> int:
        best = int(torch.argmin(fitness))  # the first minimum: row 0 (the elite) wins ties
        if self.elite is not None:
            if best != 0 and self.acceptance is not None:
                start = self.clock()
                accepted = self.acceptance.accepts(
                    candidates[0], candidates[best], context.generation
                )
                self.selection_eval_seconds += self.clock() - start
                if not accepted:
                    best = 0
                    self.rejections += 1
            self.replacements += best != 0
            if self.adaptation is not None:
                self.adaptation.record(best != 0)
        self.elite = candidates[best].detach().clone()
        self.elite_fitness = float(fitness[best])
        return best

    def strategy_state(self) -> dict[str, Any] | None:
        """The step-size adaptation's state and the replacement counters (None without
        adaptation or acceptance: nothing to keep)."""
        if self.adaptation is None and self.acceptance is None:
            return None
        state: dict[str, Any] = {"replacements": self.replacements, "rejections": self.rejections}
        if self.adaptation is not None:
            state["adaptation"] = self.adaptation.state()
        return state

    def load_strategy_state(self, state: dict[str, Any]) -> None:
        self.replacements = int(state.get("replacements", 0))
        self.rejections = int(state.get("rejections", 0))
        if self.adaptation is not None and "adaptation" in state:
            self.adaptation.load(state["adaptation"])


KEEP_STEPS = ("always", "no_worse", "compete")


class Hybrid(PlusLambda):
    """(1+lambda) whose elite takes ``steps`` RMSprop steps on the current batch after every
    selection; the trained weights are written back into the genome (Lamarckian).

    The optimiser state persists across generations, as in a gradient run. RMSprop's first
    steps are about ten times ``lr`` per weight (no bias correction) and would throw a fitted
    start away; two settings of ``keep_steps`` guard the elite against such steps as selection
    guards it against a bad child:

    - ``"no_worse"``: the elite keeps its steps only when they do not raise its fitness on the
      batch they were taken on (one more evaluation per generation); otherwise it stays as
      selected and only the optimiser's statistics move on.
    - ``"compete"``: the elite stays as selected, and the trained weights join the next
      generation as one more candidate, after the elite's children, so they become the elite
      only by winning on a fresh batch. One more row in the batched evaluation instead of a
      call of its own (a migrant arriving under ``replace_worst`` takes that row first).
    """

    def __init__(
        self,
        problem: DifferentiableProblem,
        *,
        steps: int = 1,
        lr: float = 1e-3,
        keep_steps: Literal["always", "no_worse", "compete"] = "always",
        **kwargs: Any,
    ) -> None:
        if not isinstance(problem, DifferentiableProblem):
            raise TypeError(f"the hybrid strategy needs a DifferentiableProblem, got {problem!r}")
        if steps < 1:
            raise ValueError(f"hybrid steps must be at least 1, got {steps}")
        if keep_steps not in KEEP_STEPS:
            raise ValueError(
                f"keep_steps must be one of {', '.join(KEEP_STEPS)}, got {keep_steps!r}"
            )
        super().__init__(problem, **kwargs)
        self.steps = steps
        self.lr = lr
        self.keep_steps = keep_steps
        self.gradient_steps = 0
        self.discarded_refinements = 0
        self.trained: Tensor | None = None
        """``compete``: the weights the last steps gave, a candidate of the next generation."""
        self._weights: torch.nn.Parameter | None = None
        self._optimizer: RMSprop | None = None

    def propose(self, context: GenerationContext) -> Tensor:
        candidates = super().propose(context)
        if self.trained is None:
            return candidates
        return torch.cat([candidates, self.trained.unsqueeze(0)])

    def select(self, candidates: Tensor, fitness: Tensor, context: GenerationContext) -> int:
        trained, self.trained = self.trained, None
        best = super().select(candidates, fitness, context)
        if trained is not None and not torch.equal(candidates[best], trained):
            self.discarded_refinements += 1
        return best

    def refine(self, batch: Any, context: GenerationContext) -> bool:
        if self.elite is None or batch is None:
            return False
        optimizer = self._optimizer or self._start_optimizer()
        with torch.no_grad():
            self._weights.copy_(self.elite)
        before = self.gradient_steps
        for _ in range(self.steps):
            optimizer.zero_grad(set_to_none=True)
            loss = self.problem.loss(self._weights, batch)
            if not torch.isfinite(loss):
                break
            loss.backward()
            optimizer.step()
            self.gradient_steps += 1
        if self.gradient_steps == before:
            return False
        trained = self._weights.detach().clone()
        if self.keep_steps == "compete":
            self.trained = trained
            return False
        if self.keep_steps == "no_worse":
            start = self.clock()
            fitness = float(rank_safe(self.problem.evaluate(trained.unsqueeze(0), batch))[0])
            self.selection_eval_seconds += self.clock() - start
            if fitness > self.elite_fitness:
                self.discarded_refinements += 1
                return False
            self.elite_fitness = fitness
        self.elite = trained
        return True

    def _start_optimizer(self) -> RMSprop:
        self._weights = torch.nn.Parameter(self.elite.detach().clone())
        self._optimizer = RMSprop([self._weights], lr=self.lr)
        return self._optimizer

    def strategy_state(self) -> dict[str, Any] | None:
        """The (1+lambda)'s state with the RMSprop state (before the first refinement: none),
        the steps taken and, with ``compete``, the trained weights waiting for their
        generation."""
        state = super().strategy_state()
        if self._optimizer is None:
            return state
        state = {
            **(state or {}),
            "optimizer": self._optimizer.state_dict(),
            "gradient_steps": self.gradient_steps,
            "discarded_refinements": self.discarded_refinements,
        }
        if self.trained is not None:
            state["trained"] = self.trained.clone()
        return state

    def load_strategy_state(self, state: dict[str, Any]) -> None:
        super().load_strategy_state(state)
        if self.elite is None or "optimizer" not in state:
            return
        self._start_optimizer().load_state_dict(state["optimizer"])
        self.gradient_steps = int(state["gradient_steps"])
        self.discarded_refinements = int(state.get("discarded_refinements", 0))
        trained = state.get("trained")
        self.trained = None if trained is None else trained.clone()
