"""A least-squares start for the regressor's linear readout.

The convolution of a freshly drawn network already gives features from which a linear map
predicts the energy well; what random weights lack is that map. Solving for it (ridge
regression of the targets on the pooled features, each event weighted by 1/target so that the
squared *relative* error is minimised, as MAPE weighs events) gives every method a start at
about 1.5% test MAPE on the built-in set instead of about 100%. The convolution keeps its
random draw; evolution or gradient steps go on from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from evogan.config.regressor import RegressorModelConfig
from evogan.regressor.data import RegressorData
from evogan.regressor.network import (
    RegressorLayout,
    batched_features,
    initial_weights,
    unflatten,
)

NETWORKS_PER_CALL = 8  # features of this many networks at a time: the GA's M = 8 in one kernel
# call, and the features (15 MB for 256 events of the shipped layout) bounded for any M


def relative_ridge(features: Tensor, target: Tensor, ridge: float) -> Tensor:
    """Weights w minimising sum(((f.w - y) / y)^2) + lam |w|^2, with lam = ``ridge`` times the
    mean squared norm of a scaled feature row (so ``ridge`` does not depend on the units).

    Solved in float64, in the dual form (an events x events system) when there are fewer
    events than features and in the primal form otherwise: the smaller system either way.
    Features that are all zero (every ReLU dead on these events) get zero weights.
    """
    f = features.to(torch.float64)
    inverse = 1 / target.to(torch.float64)
    events, width = f.shape
    dual = events <= width
    if dual:  # (D^-1 F)(D^-1 F)^T = D^-1 (F F^T) D^-1: scaled on the small matrix
        gram = _gram(f).mul_(inverse.unsqueeze(1)).mul_(inverse.unsqueeze(0))
    else:
        gram = _gram((f * inverse.unsqueeze(1)).T)
    trace = float(gram.diagonal().sum())
    if trace == 0:
        return torch.zeros(width, dtype=torch.float64)
    gram.diagonal().add_(ridge * trace / events)
    if dual:
        return f.T @ (torch.linalg.solve(gram, torch.ones_like(inverse)) * inverse)
    return torch.linalg.solve(gram, f.T @ inverse)


def _gram(rows: Tensor, block: int = 64) -> Tensor:
    """``rows @ rows.T`` from its upper triangle of ``block``-row blocks, mirrored. A matrix
    product does not use the symmetry; this does 5/8 of its work for 256 rows, and the
    least-squares fits of the GA's initial networks are mostly this product."""
    count = rows.shape[0]
    gram = rows.new_empty(count, count)
    for first in range(0, count, block):
        upper = rows[first : first + block] @ rows[first:].T
        gram[first : first + block, first:] = upper
        gram[first + block :, first : first + block] = upper[:, block:].T
    return gram


def fit_readouts(
    layout: RegressorLayout, genomes: Tensor, x: Tensor, y: Tensor, ridge: float
) -> Tensor:
    """``genomes`` (P, size) with each one's linear weights (and bias, where the network has
    one) replaced by the relative ridge solution on the events (x, y); the convolution is
    kept. A new tensor; ``genomes`` is not changed.

    One thread, whatever the process uses: island ranks rebuild a migrant's initial draw from
    its seed (:mod:`evogan.islands.lineage`) and must get the same bits, and a BLAS sums in an
    order that depends on its thread count.
    """
    fitted = genomes.clone()
    views = unflatten(layout, fitted)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        design = torch.ones(x.shape[0], layout.features + layout.bias, dtype=torch.float64)
        for first in range(0, fitted.shape[0], NETWORKS_PER_CALL):
            with torch.no_grad():
                chunk = batched_features(layout, fitted[first : first + NETWORKS_PER_CALL], x)
            for row, features in enumerate(chunk, start=first):
                design[:, : layout.features] = features  # and a column of ones for the bias
                weights = relative_ridge(design, y, ridge).float()
                views["linear.weight"][row].view(-1).copy_(weights[: layout.features])
                if layout.bias:
                    views["linear.bias"][row].copy_(weights[layout.features :])
    finally:
        torch.set_num_threads(threads)
    return fitted


@dataclass(frozen=True)
class ReadoutStart:
    """Fit the readouts of new networks on ``events`` training events (all when fewer),
    drawn without replacement from the caller's generator, with ``ridge``."""

    events: int
    ridge: float

    @classmethod
    def from_config(cls, cfg: RegressorModelConfig) -> ReadoutStart | None:
        """The configured start (None with ``model.readout: random``: the drawn readout)."""
        if cfg.readout == "random":
            return None
        return cls(cfg.readout_events, cfg.readout_ridge)

    def apply(
        self,
        layout: RegressorLayout,
        genomes: Tensor,
        train: RegressorData,
        generator: torch.Generator,
    ) -> Tensor:
        """``genomes`` with readouts fitted on a fresh sample of ``train``."""
        index = torch.randperm(len(train), generator=generator)[: self.events]
        return fit_readouts(
            layout,
            genomes,
            train.x.index_select(0, index),
            train.y.index_select(0, index),
            self.ridge,
        )


def initial_networks(
    layout: RegressorLayout,
    count: int,
    generator: torch.Generator,
    train: RegressorData,
    readout: ReadoutStart | None,
) -> Tensor:
    """``count`` genomes drawn as the GA study draws them, their readouts fitted on ``train``
    when ``readout`` is given: the start of the GA, the hybrid and RMSprop alike."""
    genomes = initial_weights(layout, count, generator)
    if readout is None:
        return genomes
    return readout.apply(layout, genomes, train, generator)
