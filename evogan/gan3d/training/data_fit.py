"""Whether a GAN training's data fit its batch and spec: every rank's shard holds a batch, the
held-out set a validation, the showers the spec's cell window. :func:`check_planned_data`
asks it of the data a config will read before torch and MPI load (``evogan train``), the
trainer again of the data it has read (:class:`~evogan.gan3d.training.trainer.GanTrainer`),
with the same functions and so the same lines."""

from __future__ import annotations

from evogan.config.gan import Gan3dConfig
from evogan.config.trainer import TrainerConfig
from evogan.data.plan import planned_dataset
from evogan.data.reader import ShowerDataset
from evogan.errors import EvoganError
from evogan.gan3d.model.spec import check_window

MIN_VALIDATION_EVENTS = 8
"""The score's floor compares two halves of the reference, each of at least 4 showers."""


def held_out_view(settings: TrainerConfig, test: ShowerDataset) -> ShowerDataset:
    """The showers validation scores against: ``trainer.validation_events`` of the test split
    (all of it when that asks for more or is unset)."""
    return test.take(settings.validation_events or len(test))


def epoch_shape(
    settings: TrainerConfig, spec_batch: int, smallest_shard: int, held_out: int
) -> tuple[int, int]:
    """(batch per rank, steps per epoch) when the smallest rank shard holds a batch and the
    ``held_out`` showers a validation; a one-line refusal naming the fix otherwise."""
    batch = settings.rank_batch(spec_batch)
    steps = smallest_shard // batch
    if steps < 1:
        raise EvoganError(
            f"every rank needs at least one batch of trainer.batch_size = {batch} showers, but a "
            f"rank holds {smallest_shard}; use more events, fewer ranks or a smaller batch"
        )
    needed = max(batch, MIN_VALIDATION_EVENTS)
    if settings.validates and held_out < needed:
        raise EvoganError(
            f"the held-out validation set has {held_out} showers, fewer than {needed} (one "
            f"batch, and 8 for the score's floor); raise trainer.validation_events or "
            "data.test_fraction"
        )
    return batch, min(steps, settings.steps_per_epoch or steps)


def check_planned_data(config: Gan3dConfig, ranks: int) -> None:
    """Refuse, from the data's metadata (:func:`evogan.data.plan.planned_dataset`), a training
    of ``config`` on ``ranks`` ranks whose data are missing, too few for a batch on every rank
    or a validation, or of another cell window than the spec's. Every rank's shard holds
    ``len(train) // ranks`` showers or one more (:meth:`ShowerDataset.shard`)."""
    train, test = planned_dataset(config.data)
    held_out = held_out_view(config.trainer, test)
    check_window(config.spec, held_out.shape, held_out.files)
    epoch_shape(config.trainer, config.spec.batch_size, len(train) // ranks, len(held_out))
