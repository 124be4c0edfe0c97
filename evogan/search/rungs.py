"""Multi-fidelity pruning rules: the rung points of a candidate's training and who stops there.

With ``pruning.kind`` set, the budget is cut at the rung points ``min_budget x factor^k``
(units of ``budget.kind``) below the full amount (:func:`rung_plan`); the member trainings
advance stage by stage (:func:`evogan.search.members.train_in_rungs`) and the candidate is
judged at each rung on its mean member score. The group leader asks a *decide* callback, which
the backend supplies (the island's :class:`RungHistory` in the GA, Optuna's pruner through the
study owner in the Optuna backend).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evogan.config.search import SearchConfig

Decide = Callable[[int, float, float], "str | None"]
"""``decide(rung index, budget point, mean score) -> reason to stop, or None to go on``."""


@dataclass(frozen=True)
class RungPlan:
    """Stage ends in budget units (the last is the full budget) and the epoch length."""

    kind: str  # budget.kind
    points: tuple[float, ...]
    unit: int = 1  # steps per epoch for a steps budget, else 1

    @property
    def rungs(self) -> tuple[float, ...]:
        """The points where candidates are judged (all but the full budget)."""
        return self.points[:-1]


def rung_key(point: float) -> str:
    """The JSON key of a budget point in a row's ``intermediate`` (``"2"``, ``"1.5"``)."""
    return f"{point:g}"


def rung_plan(config: SearchConfig) -> RungPlan | None:
    """The stages of one member training under ``config.pruning`` (None: no pruning)."""
    pruning, budget = config.pruning, config.budget
    if pruning.kind == "none":
        return None
    factor, amount = pruning.reduction_factor, float(budget.amount)
    low = pruning.min_budget if pruning.min_budget is not None else amount / factor**2
    whole = budget.kind != "seconds"
    points: list[float] = []
    point = low
    while point < amount * (1 - 1e-9):
        value = float(max(1, round(point))) if whole else point
        if value < amount and value not in points:
            points.append(value)
        point *= factor
    points.append(float(int(amount)) if whole else amount)
    unit = math.gcd(*(int(p) for p in points)) if budget.kind == "steps" else 1
    return RungPlan(budget.kind, tuple(points), unit)


def prune_reason(
    score: float, earlier: list[float], factor: int, rung: int, point: float, kind: str
) -> str | None:
    """Successive halving: stop unless ``score`` is among the best ``1/factor`` of the scores
    at this rung (``earlier`` plus itself; at least the best one survives, as in Optuna)."""
    value = math.inf if math.isnan(score) else score
    values = sorted([math.inf if math.isnan(v) else v for v in earlier] + [value])
    keep = max(1, len(values) // factor)
    if value <= values[keep - 1]:
        return None
    return (
        f"pruned at rung {rung} ({point:g} {kind}): score {score:.4f} not among the best "
        f"{keep} of {len(values)} at this rung (1/{factor} survive)"
    )


class RungHistory:
    """Scores recorded at each rung on one GA island (rebuilt from the table on resume)."""

    def __init__(self, factor: int, kind: str) -> None:
        self.factor, self.kind = factor, kind
        self.scores: dict[str, list[float]] = {}

    def add_row(self, row: dict[str, Any]) -> None:
        for key, value in (row.get("intermediate") or {}).items():
            self.scores.setdefault(key, []).append(math.nan if value is None else float(value))

    def decider(self, prunable: bool) -> Decide:
        """A decide callback for one candidate; only ``prunable`` ones (children) may stop,
        but every candidate's scores are recorded."""

        def decide(rung: int, point: float, score: float) -> str | None:
            earlier = self.scores.setdefault(rung_key(point), [])
            reason = None
            if prunable:
                reason = prune_reason(score, earlier, self.factor, rung, point, self.kind)
            earlier.append(score)
            return reason

        return decide
