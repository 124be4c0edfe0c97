"""Whether the regressor's data fit its settings: a batch within the training events, a test
set, a network that fits the image. :func:`check_planned_data` asks it of the data a config
will read before torch and MPI load (``evogan evolve``, ``evogan train``);
:func:`evogan.regressor.data.load_and_check` again of the data it has read, with the same
function and so the same lines."""

from __future__ import annotations

from evogan.config.regressor import RegressorConfig
from evogan.data.plan import planned_dataset
from evogan.data.transforms import input_shape
from evogan.errors import ConfigError
from evogan.regressor.layout import RegressorLayout


def fit_layout(
    cfg: RegressorConfig,
    batch_key: str,
    batch_size: int,
    events: tuple[int, int],
    image: tuple[int, ...],
) -> RegressorLayout:
    """The network's layout for images of shape ``image`` (channels, H, W), once a batch of
    ``batch_size`` (set by ``batch_key``) fits the (train, test) ``events``; a one-line
    refusal otherwise."""
    train, test = events
    if batch_size > train:
        raise ConfigError(
            f"{batch_key} must not exceed the {train} training events, got {batch_size}; "
            "lower the batch size or use more data (data.train_events)"
        )
    if test == 0:
        raise ConfigError("the test set is empty; raise data.test_events or data.test_fraction")
    return RegressorLayout.from_config(cfg.model, image)


def check_planned_data(cfg: RegressorConfig, batch_key: str, batch_size: int) -> None:
    """Refuse, from the data's metadata (:func:`evogan.data.plan.planned_dataset`), a run of
    ``cfg`` whose data are missing, fewer than a batch, or of showers its network cannot read
    (every rank reads all of the training events)."""
    train, test = planned_dataset(cfg.data)
    fit_layout(cfg, batch_key, batch_size, (len(train), len(test)), input_shape(cfg.data, train))
