"""A linear learning-rate decay over the end of a GAN training (``trainer.lr_decay_from``).

With batches of 8-16 showers the generator's energy scale swings by 10-25% from step to step at
a constant learning rate, so the snapshot a validation catches decides the saved model's scale
(docs/history/benchmarks.md, "A 3DGAN that learns"). Letting both learning rates fall linearly to
zero over the last part of the training (as pix2pix and CycleGAN train) shrinks the swing while
keeping a real generator, where weight averaging (:mod:`evogan.gan3d.training.weight_average`)
scores an average of generators.
"""

from __future__ import annotations


def lr_factor(step: int, total_steps: int, decay_from: float) -> float:
    """The learning rates' multiplier for global step ``step`` (0-based) of ``total_steps``:
    1 before ``decay_from * total_steps``, then falling linearly to ``1 / decay steps`` at the
    last step (never 0; steps past ``total_steps`` keep the last step's factor)."""
    start = round(decay_from * total_steps)
    if step < start or start >= total_steps:
        return 1.0
    return max(total_steps - step, 1) / (total_steps - start)
