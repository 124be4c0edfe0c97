"""The ``run`` section every task shares: where results go, how often progress is printed,
whether metrics also go to TensorBoard."""

from __future__ import annotations

import importlib.util

from pydantic import PositiveInt, field_validator
from pydantic_core import PydanticCustomError

from evogan.config.base import StrictModel

TENSORBOARD_INSTALL = "pip install 'evogan[tensorboard]'"


def tensorboard_installed(requested: bool) -> bool:
    """Refuse ``tensorboard: true`` when the optional package is missing, at config load, so a
    run never starts and then fails at its first metrics record."""
    if requested and importlib.util.find_spec("tensorboard") is None:
        raise PydanticCustomError(
            "tensorboard_missing",
            f"the tensorboard package is not installed; {TENSORBOARD_INSTALL}",
        )
    return requested


class RunConfig(StrictModel):
    """Where results go, how often progress is printed, whether metrics go to TensorBoard."""

    root: str | None = None
    name: str | None = None
    progress_every: PositiveInt = 20
    tensorboard: bool = False

    _tensorboard = field_validator("tensorboard")(tensorboard_installed)
