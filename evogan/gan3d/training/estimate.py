"""How long an epoch will take, said once after a training's first step where it is long: a
spec sized for GPUs (configs/gan3d.yaml) takes about 40 s per step of 64 showers on an idle
2-core CPU, an hour or more per epoch, and a user who started it there should learn that at
the first step, not after the first epoch."""

from __future__ import annotations

from evogan.progress import format_seconds

LONG_EPOCH_S = 600.0
"""An epoch estimated at more than this on a CPU is worth a line."""
SMALL_SPECS = {
    "clic-ecal": ("configs/gan3d_small.yaml", "gan3d-small-51x51x25"),
    "calochallenge-2": ("configs/gan3d_cc2_small.yaml", "gan3d-cc2-small"),
}
"""Detector -> (the config sized for CPUs, its spec's name): where a long epoch points."""


def cpu_estimate(
    step_s: float, steps: int, showers: int, detector: str, spec_name: str
) -> str | None:
    """The line a CPU training says after its first step (``step_s`` seconds, ``showers``
    showers over its ranks) when an epoch of ``steps`` steps will take long, naming the
    small spec of ``detector`` unless it already trains that one; None for a short epoch."""
    epoch_s = step_s * steps
    if epoch_s < LONG_EPOCH_S:
        return None
    line = (
        f"on this CPU the first step of {showers} showers took {step_s:.1f} s: about "
        f"{format_seconds(epoch_s)} per epoch of {steps} steps, and a stop waits for the step "
        "in flight"
    )
    small = SMALL_SPECS.get(detector)
    if small is not None and small[1] != spec_name:
        line += f"; this spec is sized for GPUs, {small[0]} for CPUs (docs/tutorials/gan.md)"
    return line
