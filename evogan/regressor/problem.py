"""The GA study's problem: evolve the weights of the 2D energy regressor, fitness = MAPE.

All candidates of a generation are scored in one call of
:func:`evogan.regressor.network.batched_predict` on the same minibatch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from evogan.engine.operators import point_mutation, point_replay, replace_mutation
from evogan.engine.problem import DifferentiableProblem, GenerationContext, MutationStep
from evogan.errors import ConfigError
from evogan.regressor.data import RegressorData, absolute_percentage_errors, epoch_indices, mape
from evogan.regressor.network import (
    RegressorLayout,
    batched_predict,
    functional_forward,
)
from evogan.regressor.readout import ReadoutStart, initial_networks


@dataclass(frozen=True)
class Minibatch:
    """Events ``index`` of ``source`` with their targets ``y``: the fused evaluation reads the
    events in place; anything else unpacks it as ``x, y`` (gathered then)."""

    source: Tensor
    index: Tensor
    y: Tensor

    def __iter__(self) -> Iterator[Tensor]:
        yield self.source.index_select(0, self.index)
        yield self.y


Batch = Minibatch | tuple[Tensor, Tensor]


def require_cuda() -> None:
    """``ga.device: cuda`` needs a GPU torch can see; one line naming the fix where there is
    none."""
    if not torch.cuda.is_available():
        raise ConfigError("ga.device = 'cuda' but torch sees no CUDA GPU here; use ga.device: cpu")


class RegressorProblem(DifferentiableProblem):
    """Weights of :class:`~evogan.regressor.network.RegressorNet` as genomes (rows of a tensor).

    Initial genomes draw each weight from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with biases 0
    (Table 1 of the GA study); with ``readout`` their linear layers are then fitted by least
    squares (:mod:`evogan.regressor.readout`). Mutation is point mutation (``add``) or
    redrawing (``replace``).
    ``eval_block`` (event, genome) pairs go through the network per block (cache blocking).
    Minibatches are a fresh permutation of the training set every epoch, full batches only, so
    every generation's fitness is over the same number of events. With ``device="cuda"`` the
    evaluation runs on the GPU (the training set is copied there once, the candidates every
    generation); mutation, selection and gradient steps stay on the host.
    """

    def __init__(
        self,
        layout: RegressorLayout,
        train: RegressorData,
        *,
        batch_size: int = 128,
        mutation: str = "add",
        replace_sigma: float = 0.1,
        eval_block: int = 36,
        device: str = "cpu",
        readout: ReadoutStart | None = None,
    ) -> None:
        if not 1 <= batch_size <= len(train):
            raise ConfigError(
                f"batch size must be between 1 and the {len(train)} training events, "
                f"got {batch_size}"
            )
        if mutation not in ("add", "replace"):
            raise ConfigError(f"mutation must be 'add' or 'replace', got {mutation!r}")
        self.layout = layout
        self.train = train
        self.batch_size = batch_size
        self.mutation = mutation
        self.replace_sigma = replace_sigma
        self.eval_block = eval_block
        self.readout = readout
        self.device = torch.device(device)
        if self.device.type == "cuda":
            require_cuda()
        self._device_x = train.x.to(self.device)

    def initial_genomes(self, count: int, generator: torch.Generator) -> Tensor:
        return initial_networks(self.layout, count, generator, self.train, self.readout)

    def mutate(
        self,
        parent: Tensor,
        count: int,
        seed: int,
        context: GenerationContext,
        only: int | None = None,
    ) -> Tensor:
        if self.mutation == "replace":
            sigma = self.replace_sigma
            return replace_mutation(parent, count, context.rate, sigma, seed, only)
        return point_mutation(parent, count, context.rate, context.power, seed, only)

    def replay(
        self, genome: Tensor, steps: Sequence[MutationStep], keep: Sequence[int] = ()
    ) -> list[Tensor]:
        if self.mutation == "replace":
            return super().replay(genome, steps, keep)
        return point_replay(genome, steps, keep)

    def evaluate(self, genomes: Tensor, batch: Batch) -> Tensor:
        return self._predict_errors(genomes, batch).mean(dim=-1)

    def _predict_errors(self, genomes: Tensor, batch: Batch) -> Tensor:
        """Absolute percentage errors (P, events) of every genome on every event of ``batch``."""
        if isinstance(batch, Minibatch):
            x, index, y = batch.source, batch.index, batch.y
        else:
            (x, y), index = batch, None
        with torch.no_grad():
            if self.device.type != "cpu":
                x = self._device_x if x is self.train.x else x.to(self.device)
                genomes = genomes.to(self.device)
                index = None if index is None else index.to(self.device)
            prediction = batched_predict(self.layout, genomes, x, self._chunk(genomes), index)
        return absolute_percentage_errors(prediction.cpu(), y)

    def example_losses(self, genomes: Tensor, batch: Batch, start: int, stop: int) -> Tensor:
        """Absolute percentage errors (P, stop - start) on events [start, stop) of ``batch``."""
        if not isinstance(batch, Minibatch):
            x, y = batch
            batch = Minibatch(x, torch.arange(x.shape[0]), y)
        part = Minibatch(batch.source, batch.index[start:stop], batch.y[start:stop])
        return self._predict_errors(genomes, part)

    def loss(self, genome: Tensor, batch: Batch) -> Tensor:
        x, y = batch
        return mape(functional_forward(self.layout, genome, x), y)

    def batches(self, epoch: int, generator: torch.Generator) -> Iterator[Batch]:
        for index in epoch_indices(len(self.train), self.batch_size, generator):
            yield Minibatch(self.train.x, index, self.train.y.index_select(0, index))

    def sample(self, events: int, generator: torch.Generator) -> Minibatch:
        """``events`` training events drawn without replacement (all of them when fewer)."""
        index = torch.randperm(len(self.train), generator=generator)[:events]
        return Minibatch(self.train.x, index, self.train.y.index_select(0, index))

    def reference_fitness(self, genomes: Tensor) -> Tensor:
        """MAPE on the whole training set: the hall of fame compares elites on this."""
        return self.evaluate(genomes, (self.train.x, self.train.y))

    def predict(self, genome: Tensor, x: Tensor) -> Tensor:
        """Network output (energy / scale) of one genome on x."""
        with torch.no_grad():
            genomes = genome.reshape(1, -1)
            return batched_predict(self.layout, genomes, x, self._chunk(genomes))[0]

    def _chunk(self, genomes: Tensor) -> int:
        """Events per block: ``eval_block`` (event, genome) pairs keep the convolution output
        of a block cache-sized whether 9 candidates or 1 elite are scored."""
        return max(1, self.eval_block // genomes.shape[0])
