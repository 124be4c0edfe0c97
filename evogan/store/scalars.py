"""What the optional metric loggers (TensorBoard, MLflow) take from a JSONL metrics record:
its numeric fields named ``KIND/KEY``, its step, and whether the run asked for the logger.

Both loggers name and step a record alike, so a run's TensorBoard scalars and its MLflow
metrics carry the same names and steps. Whether a logger is on is read from the run's stored
``config.yaml`` (``run.KEY``, or ``campaign.KEY`` for a search), because that file, not the
writer's caller, is what every run type has in common.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

# Record kinds and the field that is their step, in order of preference.
STEP_KEYS = {
    "generation": ("generation",),
    "step": ("step",),
    "epoch": ("epoch",),
    "validation": ("step", "epoch"),
}
ANY_STEP = ("step", "generation", "epoch")
# How far above a metrics file its run's config.yaml can be (RUN/islands/island-N/).
CONFIG_DEPTH = 3


def logger_setting(metrics_path: Path, key: str) -> Any:
    """``run.KEY`` or ``campaign.KEY`` of the run owning ``metrics_path`` (the nearest
    ``config.yaml`` above it); None when neither is set or the file cannot be read."""
    for folder in list(metrics_path.parents)[:CONFIG_DEPTH]:
        config = folder / "config.yaml"
        if config.is_file():
            try:
                raw = yaml.safe_load(config.read_text(encoding="utf-8"))
            except (yaml.YAMLError, UnicodeDecodeError):
                return None
            if not isinstance(raw, dict):
                return None
            for section in (raw.get("run"), raw.get("campaign")):
                if isinstance(section, dict) and section.get(key) not in (None, False):
                    return section[key]
            return None
    return None


def step_field(record: dict[str, Any], kind: str) -> str | None:
    """The field of a record that is its step (None: the record has none)."""
    return next((k for k in STEP_KEYS.get(kind, ANY_STEP) if _number(record.get(k))), None)


class RecordSteps:
    """The step each logged record goes under: its own step field, or how many records of its
    kind came before (so every logger numbers a run's records the same way)."""

    def __init__(self, default_kind: str) -> None:
        self.default_kind = default_kind
        self.counts: dict[str, int] = {}

    def place(
        self, record: dict[str, Any], step: int | None = None
    ) -> tuple[int, list[tuple[str, float]]]:
        """The record's step (``step`` when given) and its scalars, the step field left out."""
        kind = str(record.get("kind") or self.default_kind)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        field = None
        if step is None:
            field = step_field(record, kind)
            step = int(record[field]) if field else self.counts[kind] - 1
        return step, scalars(record, kind, skip=field)


def scalars(record: dict[str, Any], kind: str, skip: str | None) -> list[tuple[str, float]]:
    """The numeric fields of a record but ``skip`` as ``(KIND/KEY, value)``; nested dicts
    become ``KIND/KEY/SUB``; text, lists, booleans and non-finite values are left out."""
    values: list[tuple[str, float]] = []

    def walk(prefix: str, node: dict[str, Any]) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(f"{prefix}/{key}", value)
            elif _number(value) and math.isfinite(value):
                values.append((f"{prefix}/{key}", float(value)))

    walk(kind, {k: v for k, v in record.items() if k not in ("kind", skip)})
    return values


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
