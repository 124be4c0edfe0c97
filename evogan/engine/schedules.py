"""Per-epoch schedules of the mutation rate and power (the GA study decays the rate in steps)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evogan.errors import ConfigError


@dataclass(frozen=True)
class Constant:
    value: float

    def __call__(self, epoch: int) -> float:
        return self.value


@dataclass(frozen=True)
class Step:
    """``value`` multiplied by ``factor`` at every milestone epoch reached (0-based epochs)."""

    value: float
    milestones: tuple[int, ...] = field(default=(10, 20))
    factor: float = 0.1

    def __call__(self, epoch: int) -> float:
        return self.value * self.factor ** sum(epoch >= m for m in self.milestones)


@dataclass(frozen=True)
class Exponential:
    """``value * gamma**epoch``."""

    value: float
    gamma: float = 0.9

    def __call__(self, epoch: int) -> float:
        return self.value * self.gamma**epoch


Schedule = Constant | Step | Exponential


def make_schedule(
    kind: str,
    value: float,
    milestones: Sequence[int] = (10, 20),
    factor: float = 0.1,
    gamma: float = 0.9,
) -> Schedule:
    """Schedule by name: ``constant``, ``step`` or ``exponential``."""
    if kind == "constant":
        return Constant(value)
    if kind == "step":
        if list(milestones) != sorted(set(milestones)):
            raise ConfigError(
                f"ga.schedule_milestones must be strictly increasing, got {list(milestones)}"
            )
        return Step(value, tuple(milestones), factor)
    if kind == "exponential":
        return Exponential(value, gamma)
    raise ConfigError(f"schedule = {kind!r} is not allowed; allowed: constant, step, exponential")
