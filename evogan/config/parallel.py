"""The ``trainer`` section of data-parallel GAN training (sync all-reduce or SAGIPS ARAR)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from evogan.config.base import StrictModel


class ParallelConfig(StrictModel):
    """How ranks share the work of one training (draft; owned by the data-parallel trainer)."""

    mode: Literal["sync", "arar"] = "sync"
    group_size: PositiveInt = 1
    outer_every: PositiveInt = 1
    rma: bool = False
    epochs: PositiveInt = 1
    steps_per_epoch: PositiveInt | None = None
    checkpoint_every: PositiveInt = 1
