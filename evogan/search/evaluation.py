"""The record of one candidate: :class:`Evaluation`, what the campaign table holds about its
training and scoring, written as a table row's fields and read back from one.

The fields are the row's keys, in the dataclass's order. A row is strict JSON (the table
writer, :func:`evogan.store.metrics.to_json`, writes NaN and infinity as null), so a null
float reads back as what it stood for: the field's ``NULL`` metadata (the worst fitness, inf,
for ``fitness``), else NaN (a score that was not measured).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, get_args, get_origin, get_type_hints

WORST_OBJECTIVE = math.inf
"""An objective (fitness, parameters, FLOPs) a candidate did not earn: worse than any value."""
NULL = "null"
"""Field metadata key: the float a null in the table stands for (default NaN)."""


@dataclass
class Evaluation:
    """What the campaign table records about one trained (or refused) candidate."""

    status: str
    fitness: float = field(metadata={NULL: WORST_OBJECTIVE})
    reason: str = ""
    seeds: list[int] = field(default_factory=list)
    member_scores: list[float] = field(default_factory=list)
    score_mean: float = math.nan
    score_std: float = math.nan
    score_sem: float = math.nan  # standard error of the mean member score (nan for one member)
    member_seeds: list[int] = field(default_factory=list)  # each member's training seed
    reproduce: str = ""  # one command that re-trains and re-scores member 0
    params: int = 0
    flops: int = 0
    train_s: float = 0.0
    eval_s: float = 0.0
    inherited: int = 0  # member trainings that started from the parent's weights
    intermediate: dict[str, float] = field(default_factory=dict)  # rung budget -> mean score
    rung: int | None = None  # the rung a pruned candidate stopped at

    def objectives(self, second: str) -> list[float]:
        """Values to minimise: fitness, then params or FLOPs when asked for."""
        values = [self.fitness]
        if second == "params":
            values.append(float(self.params) if self.status == "ok" else WORST_OBJECTIVE)
        elif second == "flops":
            values.append(float(self.flops) if self.status == "ok" else WORST_OBJECTIVE)
        return values

    def as_row(self) -> dict[str, Any]:
        """The row's fields by field name, values as they are (the writer turns a non-finite
        float into null)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Evaluation:
        """The record of a table row read back from JSON: a null float as its ``NULL``, a
        field the row lacks (a table of an older evogan) at its default, keys that are no
        field (the job's, the session's) ignored."""
        types = _field_types(cls)
        values = {
            f.name: _read(row[f.name], types[f.name], f.metadata.get(NULL, math.nan))
            for f in fields(cls)
            if f.name in row
        }
        return cls(**values)


@cache
def _field_types(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _read(value: Any, kind: Any, null: float) -> Any:
    """``value`` from JSON as the field type ``kind``: floats (also in lists and dicts) with
    null as ``null``; other values as read."""
    if kind is float:
        return null if value is None else float(value)
    origin, args = get_origin(kind), get_args(kind)
    if origin is list:
        return [_read(item, args[0], null) for item in value]
    if origin is dict:
        return {key: _read(item, args[1], null) for key, item in value.items()}
    return value
