"""Step-size adaptation of the (1+lambda) point mutation: Rechenberg's success rule.

An elitist GA whose mutation stays large next to the improvement left drifts on noisy
fitness, and a fixed decay schedule only fits one run length. The success rule ties the step
to what the run sees: after every ``window`` generations the scale of the mutation power
(and/or rate) grows by ``factor`` when more than ``target`` of them replaced the elite, and
shrinks by it when fewer did, within ``[low, high]``. Near an optimum few children win, so
the step shrinks; on a slope many do, so it grows. Rechenberg's target is 1/5 for a (1+1)
on exact fitness; on noisy minibatches with noise-aware acceptance 0.1 measured better.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Target = Literal["power", "rate", "both"]


@dataclass
class SuccessRule:
    """The adapted scale (starts at 1) and the successes counted in the current window."""

    window: int = 10
    factor: float = 1.5
    target: float = 0.1
    low: float = 1e-3
    high: float = 10.0
    adapts: Target = "power"
    scale: float = 1.0
    successes: int = 0
    trials: int = 0

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"adaptation window must be at least 1, got {self.window}")
        if self.factor <= 1:
            raise ValueError(f"adaptation factor must be > 1, got {self.factor}")
        if not 0 < self.target < 1:
            raise ValueError(f"adaptation target must be in (0, 1), got {self.target}")
        if not 0 < self.low <= 1 <= self.high:
            raise ValueError(
                f"adaptation bounds must hold 0 < low <= 1 <= high, got ({self.low}, {self.high})"
            )
        if self.adapts not in ("power", "rate", "both"):
            raise ValueError(f"adaptation adapts power, rate or both, got {self.adapts!r}")

    def record(self, success: bool) -> None:
        """Count one generation; at the end of a window, move the scale and start over."""
        self.trials += 1
        self.successes += bool(success)
        if self.trials < self.window:
            return
        share = self.successes / self.window
        if share > self.target:
            self.scale = min(self.high, self.scale * self.factor)
        elif share < self.target:
            self.scale = max(self.low, self.scale / self.factor)
        self.successes = self.trials = 0

    def apply(self, rate: float, power: float) -> tuple[float, float]:
        """``(rate, power)`` of the schedules, scaled as configured (the rate at most 1)."""
        if self.adapts in ("rate", "both"):
            rate = min(1.0, rate * self.scale)
        if self.adapts in ("power", "both"):
            power = power * self.scale
        return rate, power

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (JSON numbers: a float round-trips exactly)."""
        return {"scale": self.scale, "successes": self.successes, "trials": self.trials}

    def load(self, state: dict[str, Any]) -> None:
        self.scale = float(state["scale"])
        self.successes = int(state["successes"])
        self.trials = int(state["trials"])
