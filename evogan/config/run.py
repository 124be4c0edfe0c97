"""The ``run`` section every task shares: where results go, how often progress is printed,
whether metrics also go to TensorBoard and to MLflow."""

from __future__ import annotations

import importlib.util

from pydantic import Field, PositiveInt, field_validator
from pydantic_core import PydanticCustomError

from evogan.config.base import StrictModel

TENSORBOARD_INSTALL = "pip install 'evogan[tensorboard]'"
MLFLOW_INSTALL = 'pip install "evogan[mlflow]"'


def tensorboard_installed(requested: bool) -> bool:
    """Refuse ``tensorboard: true`` when the optional package is missing, at config load, so a
    run never starts and then fails at its first metrics record."""
    if requested and importlib.util.find_spec("tensorboard") is None:
        raise PydanticCustomError(
            "tensorboard_missing",
            f"the tensorboard package is not installed; {TENSORBOARD_INSTALL}",
        )
    return requested


def mlflow_setting(requested: bool | str) -> bool | str:
    """``mlflow``: false, true (MLflow's file store ``mlruns/`` beside the run directory) or a
    tracking URI / folder; refused at config load when empty or when the optional package is
    missing, so no run starts that cannot log."""
    if requested == "":
        raise PydanticCustomError(
            "mlflow_empty",
            "give true, false, a tracking URI (sqlite:///..., http://...) or a folder",
        )
    if requested is not False and importlib.util.find_spec("mlflow") is None:
        raise PydanticCustomError(
            "mlflow_missing", f"the mlflow package is not installed; {MLFLOW_INSTALL}"
        )
    return requested


class RunConfig(StrictModel):
    """Where results go, how often progress is printed, whether metrics go to TensorBoard and
    MLflow."""

    root: str | None = Field(
        default=None,
        description="directory of run directories; null: EVOGAN_POPULATIONS or populations/",
    )
    name: str | None = Field(
        default=None,
        description="the run directory's name; null: the method and the UTC start time",
    )
    progress_every: PositiveInt = Field(
        default=20,
        description="generations (GA) or steps (RMSprop) between the regressor's progress lines",
    )
    tensorboard: bool = Field(
        default=False, description="also write metrics as TensorBoard events (needs tensorboard)"
    )
    mlflow: bool | str = Field(
        default=False,
        description="also log to MLflow: true (mlruns/ beside the run directory) or a tracking URI",
    )

    _tensorboard = field_validator("tensorboard")(tensorboard_installed)
    _mlflow = field_validator("mlflow")(mlflow_setting)
