"""Evolve the weights of any ``torch.nn.Module`` on one's own arrays.

A genome is the module's parameters flattened in ``named_parameters()`` order; buffers (batch
norm statistics) stay as the module holds them. All candidates of a generation are scored in
one call: :func:`torch.func.functional_call` runs the module with a genome's parameters and
:func:`torch.vmap` maps it over the genomes, so the module is never copied or loaded per
candidate.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from evogan.engine.operators import point_mutation, point_replay
from evogan.engine.problem import DifferentiableProblem, GenerationContext, MutationStep

Loss = Callable[[Tensor, Tensor], Tensor]
"""``loss(prediction, target) -> scalar`` of one model on one batch; lower is better."""
ArrayLike = np.ndarray | Tensor | Sequence[Any]


class ModuleProblem(DifferentiableProblem):
    """The weights of ``module`` as genomes, fitness ``loss(module(x), y)`` on minibatches.

    ``inputs`` and ``targets`` are numpy arrays or tensors with one row per sample (floating
    arrays take the parameters' dtype; integer targets, e.g. class labels, keep theirs).
    Minibatches of ``batch_size`` samples are a fresh permutation every epoch, full batches
    only; ``batch_size=None`` makes each generation see all samples. The hall of fame compares
    elites on all samples (:meth:`reference_fitness`). Mutation adds ``power * U(-1, 1)`` to a
    fraction ``rate`` of the weights (:func:`~evogan.engine.operators.point_mutation`), so
    lineages replay exactly.

    Evaluation maps the module over the genomes with :func:`torch.vmap`. A module that vmap
    cannot run (``.item()`` or data-dependent Python control flow in ``forward``, in-place
    updates of buffers such as batch norm in training mode, dropout in training mode) is
    scored one genome after the other with the same functional call instead: the first
    failing call switches this problem to the loop for good (:attr:`vectorised` says which).
    Put the module in ``eval()`` mode when its layers behave differently in training.
    """

    def __init__(
        self,
        module: nn.Module,
        inputs: ArrayLike,
        targets: ArrayLike,
        *,
        loss: Loss = F.mse_loss,
        batch_size: int | None = None,
        genome_chunk: int | None = None,
    ) -> None:
        self.module = module
        self.names = [name for name, _ in module.named_parameters()]
        if not self.names:
            raise ValueError(f"the module has no parameters to evolve: {type(module).__name__}")
        reference = next(module.parameters())
        self.device, self.dtype = reference.device, reference.dtype
        self.shapes = [p.shape for p in module.parameters()]
        self.size = sum(math.prod(shape) for shape in self.shapes)
        self.x = self._tensor(inputs)
        self.y = self._tensor(targets)
        if self.x.shape[0] != self.y.shape[0] or self.x.shape[0] == 0:
            raise ValueError(
                "inputs and targets must have the same number of rows (at least 1), got "
                f"{self.x.shape[0]} and {self.y.shape[0]}"
            )
        if batch_size is not None and not 1 <= batch_size <= len(self.y):
            raise ValueError(
                f"batch_size must be between 1 and the {len(self.y)} samples, got {batch_size}"
            )
        self.loss_fn = loss
        self.batch_size = batch_size
        self.genome_chunk = genome_chunk
        self.vectorised = True

    def _tensor(self, values: ArrayLike) -> Tensor:
        tensor = torch.as_tensor(np.asarray(values) if not torch.is_tensor(values) else values)
        dtype = self.dtype if tensor.is_floating_point() else tensor.dtype
        return tensor.to(self.device, dtype)

    # -- genomes ----------------------------------------------------------------------------
    def genome(self, module: nn.Module | None = None) -> Tensor:
        """The parameters of ``module`` (default: the problem's) as one genome (size,)."""
        module = self.module if module is None else module
        return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).to("cpu")

    def unflatten(self, genomes: Tensor) -> dict[str, Tensor]:
        """Name -> (P, *shape) views of genomes (P, size), on the module's device."""
        if genomes.dim() != 2 or genomes.shape[1] != self.size:
            raise ValueError(f"genomes must be (P, {self.size}), got {tuple(genomes.shape)}")
        genomes = genomes.to(self.device, self.dtype)
        views, start = {}, 0
        for name, shape in zip(self.names, self.shapes, strict=True):
            count = math.prod(shape)
            views[name] = genomes[:, start : start + count].reshape(-1, *shape)
            start += count
        return views

    def to_module(self, genome: Tensor) -> nn.Module:
        """A copy of the module holding ``genome``'s weights (e.g. the result's best)."""
        module = copy.deepcopy(self.module)
        with torch.no_grad():
            views = self.unflatten(genome.reshape(1, -1))
            for name, parameter in module.named_parameters():
                parameter.copy_(views[name][0])
        return module

    def initial_genomes(self, count: int, generator: torch.Generator) -> Tensor:
        """Weights of 2 or more dimensions from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (the bound
        of torch's default ``Linear``/``Conv`` initialisation), drawn from ``generator``;
        1-D parameters (biases, norm scales) keep the module's values."""
        genomes = self.genome().repeat(count, 1)
        start = 0
        for shape in self.shapes:
            size = math.prod(shape)
            if len(shape) >= 2:
                bound = (size // shape[0]) ** -0.5
                draw = torch.rand(count, size, generator=generator) * (2 * bound) - bound
                genomes[:, start : start + size] = draw
            start += size
        return genomes

    def mutate(
        self,
        parent: Tensor,
        count: int,
        seed: int,
        context: GenerationContext,
        only: int | None = None,
    ) -> Tensor:
        return point_mutation(parent, count, context.rate, context.power, seed, only)

    def replay(
        self, genome: Tensor, steps: Sequence[MutationStep], keep: Sequence[int] = ()
    ) -> list[Tensor]:
        return point_replay(genome, steps, keep)

    # -- fitness ----------------------------------------------------------------------------
    def evaluate(self, genomes: Tensor, batch: tuple[Tensor, Tensor]) -> Tensor:
        x, y = batch
        params = self.unflatten(genomes)
        with torch.no_grad():
            if self.vectorised:
                try:
                    return self._vmapped(params, x, y).to("cpu", torch.float32)
                except (RuntimeError, ValueError, NotImplementedError):
                    self.vectorised = False
            fitness = [
                self._one({k: v[i] for k, v in params.items()}, x, y)
                for i in range(genomes.shape[0])
            ]
        return torch.stack(fitness).to("cpu", torch.float32)

    def _one(self, params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
        buffers = dict(self.module.named_buffers())
        return self.loss_fn(functional_call(self.module, {**params, **buffers}, (x,)), y)

    def _vmapped(self, params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
        mapped = torch.vmap(self._one, in_dims=(0, None, None), chunk_size=self.genome_chunk)
        return mapped(params, x, y)

    def loss(self, genome: Tensor, batch: tuple[Tensor, Tensor]) -> Tensor:
        """Differentiable loss of one genome (size,): the hybrid strategy's gradient steps."""
        x, y = batch
        params = self.unflatten(genome.reshape(1, -1))
        return self._one({name: view[0] for name, view in params.items()}, x, y)

    def batches(self, epoch: int, generator: torch.Generator) -> Iterator[tuple[Tensor, Tensor]]:
        del epoch
        if self.batch_size is None:
            yield self.x, self.y
            return
        order = torch.randperm(len(self.y), generator=generator)
        for start in range(0, len(order) - self.batch_size + 1, self.batch_size):
            index = order[start : start + self.batch_size].to(self.device)
            yield self.x.index_select(0, index), self.y.index_select(0, index)

    def sample(self, events: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``events`` samples drawn without replacement (all of them when fewer): what
        noise-aware acceptance (``reevaluation_events``) re-scores the elite and its
        challenger on."""
        index = torch.randperm(len(self.y), generator=generator)[:events].to(self.device)
        return self.x.index_select(0, index), self.y.index_select(0, index)

    def reference_fitness(self, genomes: Tensor) -> Tensor:
        """Loss on all samples: what the hall of fame compares."""
        return self.evaluate(genomes, (self.x, self.y))
