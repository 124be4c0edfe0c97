"""An exponential moving average of the generator's weights, validated and saved in place of
the weights of the last step (``trainer.generator_average``).

With batches of 8-16 showers the generator's overall energy scale swings from step to step: on
the small spec two snapshots 70 steps apart differ by 10-25% in mean sampling fraction, so
which snapshot a validation happens to catch decides the energy scale of the saved model
(docs/history/benchmarks.md, "A 3DGAN that learns"). Averaging the weights over the last few hundred
steps (Yazici et al., "The unusual effectiveness of averaging in GAN training", 2019) scores where
the oscillation is centred instead. Batch-norm statistics are not averaged: validation recomputes
them at the averaged weights (:mod:`evogan.gan3d.training.standing_stats`).
"""

from __future__ import annotations

import copy

import torch

from evogan.gan3d.model.networks import Generator

WARMUP_STEPS = 10
"""The decay ramps up as (1 + n) / (WARMUP_STEPS + n) over the first updates, so the average
does not remember the random initial weights for the first ~1 / (1 - decay) steps."""


class WeightAverage:
    """The running average of one generator's parameters (a copy; training is untouched)."""

    def __init__(self, generator: Generator, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"the weight average's decay must lie in (0, 1), got {decay}")
        self.decay = decay
        self.updates = 0
        self.params = [p.detach().clone() for p in generator.parameters()]

    def update(self, generator: Generator) -> None:
        """Fold in the generator's current weights (call after every generator update)."""
        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (WARMUP_STEPS + self.updates))
        with torch.no_grad():
            for mine, current in zip(self.params, generator.parameters(), strict=True):
                mine.lerp_(current.detach(), 1.0 - decay)

    def applied(self, generator: Generator) -> Generator:
        """A copy of ``generator`` (its buffers and mode) carrying the averaged weights."""
        model = copy.deepcopy(generator)
        with torch.no_grad():
            for target, value in zip(model.parameters(), self.params, strict=True):
                target.copy_(value)
        return model

    def tensors(self) -> dict[str, torch.Tensor]:
        """The state a checkpoint keeps."""
        state = {f"generator_average/{i}": p for i, p in enumerate(self.params)}
        state["generator_average/updates"] = torch.tensor(self.updates)
        return state

    def load(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore from a checkpoint's tensors (as :meth:`tensors` wrote them)."""
        with torch.no_grad():
            for i, mine in enumerate(self.params):
                mine.copy_(tensors[f"generator_average/{i}"])
        self.updates = int(tensors["generator_average/updates"])
