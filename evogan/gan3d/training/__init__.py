"""Data-parallel 3DGAN training: :class:`GanTrainer` (``trainer``: open, resume, train epochs,
save), its setup per rank (``setup``), the epoch loop (``epoch_loop``), one step (``step``)
and the parallel modes that run it (``modes``: sync all-reduce, SAGIPS ARAR rings over
:mod:`evogan.distributed.gradients`), checkpoints (``checkpoint``) and resuming (``resume``),
when ranks checkpoint, validate or stop (``cadence``), validation during training
(``validation``, with ``standing_stats``), the learning-rate schedule (``lr_decay``), the
generator's weight average (``weight_average``), the first step's estimate of a long CPU
epoch (``estimate``) and which of a run's generators to export (``run_models``: best, last,
or a stopped run's last checkpoint).

The names are imported on first use (PEP 562): the trainer needs torch and MPI.
"""

from __future__ import annotations

from evogan.lazy import lazy_names

_LAZY = {
    "GanTrainer": ".trainer",
    "StepInfo": ".epoch_loop",
    "pick_generator": ".run_models",
    "train_gan3d": ".trainer",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_names(__name__, _LAZY)
