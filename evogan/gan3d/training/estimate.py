"""How long a CPU training's epoch will take, said before its first step where that is long: a
spec sized for GPUs (configs/gan3d.yaml) takes about 40 s per step of 64 showers on an idle
2-core CPU, an hour or more per epoch, and a user who started it there should learn that at
once, pointed at the spec sized for CPUs, not after the first step.

The estimate times a probe (:func:`probe_seconds`): one training step of fresh networks of the
spec on :data:`PROBE_SHOWERS` random showers, scaled to the batch, as a step's time grows in
proportion to its showers (docs/performance.md). Every rank probes, as every rank will train,
so the probe shares the machine as the steps will. The first step's own time is said as well
where it is long and nothing was said at the start, or where it is more than :data:`DIFFERS`
times off the estimate (a machine that got busier, a compiled forward).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import torch

from evogan.gan3d.model.networks import build_models
from evogan.gan3d.model.precision import ForwardOptions
from evogan.gan3d.model.spec import GanSpec
from evogan.gan3d.training.step import GanStep
from evogan.logs import hint
from evogan.progress import format_seconds
from evogan.settings import hints

LONG_EPOCH_S = 600.0
"""An epoch estimated at more than this on a CPU is worth a line."""
PROBE_SHOWERS = 2
"""Showers of the probe step: its time is a step's at this batch, a few % of a real one."""
DIFFERS = 2.0
"""A first step this many times slower or faster than estimated is said too."""
SMALL_SPECS = {
    "clic-ecal": ("configs/gan3d_small.yaml", "gan3d-small-51x51x25"),
    "calochallenge-2": ("configs/gan3d_cc2_small.yaml", "gan3d-cc2-small"),
}
"""Detector -> (the config sized for CPUs, its spec's name): where a long epoch points."""


def probe_seconds(
    spec: GanSpec, forward: ForwardOptions, device: str = "cpu", showers: int = PROBE_SHOWERS
) -> float:
    """Seconds of one training step of fresh ``spec`` networks on ``showers`` random showers
    on ``device``, its forward passes run as ``forward`` says but eagerly (compiling would
    cost more than the step). Its streams are its own and the global torch stream is left
    as it was, so a training's draws are those of a run without the probe."""
    with torch.random.fork_rng(devices=[]):
        rng = torch.Generator().manual_seed(0)
        generator, discriminator = build_models(spec, rng)
        eager = replace(forward, compile=False)
        step = GanStep(spec, generator, discriminator, rng, device, eager)
        cells = torch.rand((showers, *spec.output_shape), generator=rng)
        energy = torch.full((showers,), 100.0)
        theta = torch.full((showers,), math.pi / 2) if spec.conditioning.angle else None
        start = time.perf_counter()
        step.train_step(cells, energy, theta)
        return time.perf_counter() - start


@dataclass
class EpochEstimate:
    """What a CPU training of ``spec`` says of its epochs of ``steps`` steps of ``batch``
    showers per rank on ``ranks`` ranks, from ``detector``'s data: :meth:`at_start`, then
    :meth:`first_step` (each once); an epoch is long above ``long_epoch_s`` seconds."""

    spec: GanSpec
    forward: ForwardOptions
    batch: int
    steps: int
    ranks: int
    detector: str
    long_epoch_s: float = LONG_EPOCH_S
    estimated_s: float | None = None  # the step time said at the start
    started: bool = False

    def at_start(self) -> None:
        """Probe (every rank) and say the estimate where an epoch will be long (rank 0)."""
        if self.started or not hints():
            return
        self.started = True
        line = self.start_line(probe_seconds(self.spec, self.forward))
        if line is not None:
            hint(line)

    def first_step(self, step_s: float) -> None:
        """Say the first step's ``step_s`` seconds where :meth:`measured_line` has a line."""
        line = self.measured_line(step_s)
        if line is not None:
            hint(line)

    def start_line(self, probe_s: float, showers: int = PROBE_SHOWERS) -> str | None:
        """The estimate from a probe of ``showers`` showers in ``probe_s`` seconds; None for a
        short epoch."""
        step_s = probe_s * self.batch / showers
        if step_s * self.steps <= self.long_epoch_s:
            return None
        self.estimated_s = step_s
        return (
            f"on this CPU a step of {self.batch * self.ranks} showers will take about "
            f"{step_s:.1f} s (estimated from a step of {showers}): about "
            f"{format_seconds(step_s * self.steps)} per epoch of {self.steps} steps, and a stop "
            f"waits for the step in flight{self._small_spec()}"
        )

    def measured_line(self, step_s: float) -> str | None:
        """The first step's time and the epoch it makes, where that is long and no estimate
        was said, or where the estimate said was more than DIFFERS times off; else None."""
        said, epoch_s = self.estimated_s, step_s * self.steps
        if said is None and epoch_s <= self.long_epoch_s:
            return None
        if said is not None and 1 / DIFFERS <= step_s / said <= DIFFERS:
            return None
        line = (
            f"on this CPU the first step of {self.batch * self.ranks} showers took {step_s:.1f} "
            f"s: about {format_seconds(epoch_s)} per epoch of {self.steps} steps"
        )
        if said is not None:
            return f"{line}, not the {said:.1f} s estimated at the start"
        return f"{line}, and a stop waits for the step in flight{self._small_spec()}"

    def _small_spec(self) -> str:
        small = SMALL_SPECS.get(self.detector)
        if small is None or small[1] == self.spec.name:
            return ""
        return f"; this spec is sized for GPUs, {small[0]} for CPUs (docs/tutorials/gan.md)"
