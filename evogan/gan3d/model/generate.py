"""Showers from a 3DGAN generator, and their score against reference showers.

:func:`generate_showers` runs a generator for given conditions in GeV, its noise drawn from one
stream; :func:`generate_events` runs it for numbered events, whose conditions
(:func:`event_conditions`) and noise are each a pure function of a seed and the event's number,
so that a generation split over ranks and chunks, or one event made again alone, gives the same
showers. Each runs the generator's inference form
(:func:`~evogan.gan3d.model.inference.inference_generator`: an eval-mode copy, its blocks on the
CPU's C kernel in float32), built once per call or passed in built. :func:`score_generator`
scores showers with :class:`evogan.physics.Reference` (the one
definition of the selection score).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from evogan.gan3d.model.blocks import event_keys, event_uniform
from evogan.gan3d.model.inference import InferenceGenerator, inference_generator
from evogan.gan3d.model.networks import Generator, sample, sample_events, to_gev
from evogan.gan3d.model.precision import ForwardOptions
from evogan.gan3d.model.spec import GanSpec
from evogan.physics.score import Reference, Validation, worst_validation


def generate_showers(
    spec: GanSpec,
    generator: Generator | InferenceGenerator,
    energy: np.ndarray,
    theta: np.ndarray | None,
    rng: torch.Generator,
    batch_size: int = 128,
    on_batch: Callable[[int], None] | None = None,
    precision: str = "float32",
) -> np.ndarray:
    """Showers in GeV (n, X, Y, Z) for primaries ``energy`` (GeV) and angles ``theta`` (rad).

    The generator runs in eval mode (batch-norm moving averages; its inference form), batch by
    batch, with noise drawn from ``rng``; the spec's cell transform is undone, so the output
    compares with data. ``on_batch(n)`` is called after each batch of ``n`` showers (progress
    displays). ``precision="bf16"`` runs the generator in bfloat16 (about 2x faster on CPUs with
    AVX512-BF16 or AMX, docs/performance.md): its convolutions read bf16's 8 bits of each
    input and weight, and the cell transform is undone in float32.
    """
    form = inference_generator(spec, generator, precision)
    device = next(form.parameters()).device
    energy_t = torch.as_tensor(np.asarray(energy, dtype=np.float32)).reshape(-1)
    theta_t = None if theta is None else torch.as_tensor(np.asarray(theta, dtype=np.float32))
    out = np.empty((len(energy_t), *spec.output_shape), dtype=np.float32)
    autocast = ForwardOptions(precision).autocast(device)
    with torch.inference_mode():
        for lo in range(0, len(energy_t), batch_size):
            hi = min(lo + batch_size, len(energy_t))
            angle = None if theta_t is None else theta_t[lo:hi].to(device)
            with autocast:
                showers = sample(spec, form, energy_t[lo:hi].to(device), angle, rng)
            cells = to_gev(spec, showers.float())
            torch.from_numpy(out[lo:hi]).copy_(cells)  # no host temporary
            if on_batch is not None:
                on_batch(hi - lo)
    return out


def event_conditions(
    seed: int,
    events: np.ndarray,
    energy_range: tuple[float, float],
    theta_range: tuple[float, float] | None = None,
    log_uniform: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Primary energies (GeV) and angles (rad, from ``theta_range`` in rad; None without it)
    of the events numbered ``events``, float32, drawn uniformly (energies uniformly in log E
    with ``log_uniform``) from a pure function of ``seed`` and each number."""
    numbers = torch.from_numpy(np.ascontiguousarray(events, np.int64)).reshape(-1)
    draws = event_uniform(event_keys(seed, "conditions"), numbers, 2).double().numpy()
    low, high = energy_range
    if log_uniform:
        energy = np.exp(math.log(low) + draws[:, 0] * (math.log(high) - math.log(low)))
    else:
        energy = low + draws[:, 0] * (high - low)
    if theta_range is None:
        return energy.astype(np.float32), None
    theta = theta_range[0] + draws[:, 1] * (theta_range[1] - theta_range[0])
    return energy.astype(np.float32), theta.astype(np.float32)


def generate_events(
    spec: GanSpec,
    generator: Generator | InferenceGenerator,
    energy: np.ndarray,
    theta: np.ndarray | None,
    seed: int,
    events: np.ndarray,
    precision: str = "float32",
) -> np.ndarray:
    """Showers in GeV (n, *shape) of the events numbered ``events`` (one batch) for primaries
    ``energy`` (GeV) and angles ``theta`` (rad): each shower depends on the generator, ``seed``,
    its number and its conditions (:func:`~evogan.gan3d.model.networks.sample_events`), not on
    the other events of the batch; bit for bit it also depends on the batch's size and its
    place in it, as the matrix products round. Eval mode and ``precision`` as
    :func:`generate_showers`."""
    form = inference_generator(spec, generator, precision)
    device = next(form.parameters()).device
    energy_t = torch.from_numpy(np.ascontiguousarray(energy, np.float32)).reshape(-1).to(device)
    theta_t = None if theta is None else torch.from_numpy(np.ascontiguousarray(theta, np.float32))
    numbers = torch.from_numpy(np.ascontiguousarray(events, np.int64)).reshape(-1)
    autocast = ForwardOptions(precision).autocast(device)
    with torch.inference_mode():
        with autocast:
            angle = None if theta_t is None else theta_t.to(device)
            showers = sample_events(spec, form, energy_t, angle, seed, numbers)
        return to_gev(spec, showers.float()).cpu().numpy()


def generate_numbered(
    spec: GanSpec,
    generator: Generator | InferenceGenerator,
    energy: np.ndarray,
    theta: np.ndarray | None,
    seed: int,
    batch_size: int = 128,
    on_batch: Callable[[int], None] | None = None,
    precision: str = "float32",
) -> np.ndarray:
    """Showers in GeV of events 0..n-1 for the given conditions, in whole batches of
    ``batch_size`` from event 0 (a short last one padded with its last event's conditions):
    bit for bit the showers ``evogan generate --seed`` writes for these conditions (its
    ``--conditions-from``), so a generator scores the same from its file as from its showers."""
    form = inference_generator(spec, generator, precision)
    out = np.empty((len(energy), *spec.output_shape), dtype=np.float32)
    for lo in range(0, len(energy), batch_size):
        hi = min(lo + batch_size, len(energy))
        pad = (0, lo + batch_size - hi)
        angle = None if theta is None else np.pad(theta[lo:hi], pad, mode="edge")
        events = np.arange(lo, lo + batch_size, dtype=np.int64)
        batch = np.pad(energy[lo:hi], pad, mode="edge")
        made = generate_events(spec, form, batch, angle, seed, events, precision)
        out[lo:hi] = made[: hi - lo]
        if on_batch is not None:
            on_batch(hi - lo)
    return out


def score_generator(
    reference: Reference,
    spec: GanSpec,
    generator: Generator,
    energy: np.ndarray,
    theta: np.ndarray | None,
    seed: int,
    batch_size: int = 128,
    on_batch: Callable[[int], None] | None = None,
    precision: str = "float32",
) -> Validation:
    """One generator's showers for the reference's conditions, scored; the noise is that of
    the numbered events under ``seed`` (:func:`generate_numbered`: every ensemble member sees
    the same noise, and the file ``evogan generate`` writes scores alike), the generator runs
    in ``precision`` (:func:`generate_showers`). A generator that fails to run scores worst,
    with the reason."""
    angle = theta if spec.conditioning.angle else None
    try:
        showers = generate_numbered(
            spec, generator, energy, angle, seed, batch_size, on_batch, precision
        )
    except (RuntimeError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return worst_validation(len(energy), len(energy), f"generator failed: {first}")
    return reference.score(showers, energy, theta)
