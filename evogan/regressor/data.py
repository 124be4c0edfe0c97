"""The regressor's data and loss, shared by every method (GA, hybrid, RMSprop): the splits as
tensors, the per-epoch minibatch order and MAPE, checked against the config before any run
directory exists."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from evogan.config.regressor import RegressorConfig
from evogan.regressor.data_fit import fit_layout
from evogan.regressor.network import RegressorLayout

if TYPE_CHECKING:
    from evogan.data.transforms import RegressorArrays


@dataclass
class RegressorData:
    """Tensors of one split: images x (n, C, H, W), targets y = energy/scale, energy in GeV;
    the showers' detector (described) and the grid axis the images sum over, for reports."""

    x: Tensor
    y: Tensor
    energy: Tensor
    detector: str = ""
    axis: str = ""

    @classmethod
    def from_arrays(cls, arrays: RegressorArrays) -> RegressorData:
        """From :class:`evogan.data.transforms.RegressorArrays` (numpy)."""
        return cls(
            torch.as_tensor(np.ascontiguousarray(arrays.x), dtype=torch.float32),
            torch.as_tensor(np.asarray(arrays.y), dtype=torch.float32),
            torch.as_tensor(np.asarray(arrays.energy), dtype=torch.float32),
            arrays.detector,
            arrays.axis,
        )

    def __len__(self) -> int:
        return int(self.y.shape[0])


def absolute_percentage_errors(prediction: Tensor, target: Tensor) -> Tensor:
    """|prediction - target| / |target| element by element, as fractions."""
    return (prediction - target).abs() / target.abs()


def mape(prediction: Tensor, target: Tensor) -> Tensor:
    """Mean absolute percentage error as a fraction, over the last axis (0.05 means 5%)."""
    return absolute_percentage_errors(prediction, target).mean(dim=-1)


def epoch_indices(events: int, batch_size: int, generator: torch.Generator) -> Iterator[Tensor]:
    """Event indices of each minibatch of one epoch: a fresh permutation, full batches only, so
    every step sees the same number of events."""
    order = torch.randperm(events, generator=generator)
    for start in range(0, events - batch_size + 1, batch_size):
        yield order[start : start + batch_size]


def load_and_check(
    cfg: RegressorConfig,
    batch_size: int,
    announce: Callable[[str], object] = print,
    batch_key: str = "ga.batch_size",
) -> tuple[RegressorLayout, RegressorData, RegressorData]:
    """Load the data and check every setting against it, before any run directory exists."""
    from evogan.data.transforms import load_regressor_data

    train_arrays, test_arrays = load_regressor_data(cfg.data, rank=0, size=1, announce=announce)
    train, test = RegressorData.from_arrays(train_arrays), RegressorData.from_arrays(test_arrays)
    events = (len(train), len(test))
    layout = fit_layout(cfg, batch_key, batch_size, events, tuple(train.x.shape[1:]))
    return layout, train, test
