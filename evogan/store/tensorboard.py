"""TensorBoard event files fed by the JSONL metrics records (optional: ``evogan[tensorboard]``).

A run asks for them in its config (``run.tensorboard: true``; ``campaign.tensorboard`` for a
search). Every metrics writer of the run then also writes each record as scalars named
``KIND/KEY`` into event files beside its JSONL file, so ``tensorboard --logdir populations/``
shows every run, every island and every search writer as its own TensorBoard run, and no
trainer needs to know. The decision is read from the run's stored ``config.yaml`` because that
file, not the writer's caller, is what every run type has in common.
"""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path
from typing import Any

import yaml

from evogan.errors import EvoganError

# Record kinds and the field that is their TensorBoard step, in order of preference.
STEP_KEYS = {
    "generation": ("generation",),
    "step": ("step",),
    "epoch": ("epoch",),
    "validation": ("step", "epoch"),
}
ANY_STEP = ("step", "generation", "epoch")
# How far above a metrics file its run's config.yaml can be (RUN/islands/island-N/).
CONFIG_DEPTH = 3


def require() -> None:
    """One line instead of an ImportError for a stored run that asks for TensorBoard in an
    environment without it (configs are checked when loaded; this guards the writers)."""
    if importlib.util.find_spec("tensorboard") is None:
        raise EvoganError(
            "this run writes TensorBoard events: the tensorboard package is not installed; "
            "pip install 'evogan[tensorboard]'"
        )


def requested(metrics_path: Path) -> bool:
    """Whether the run owning ``metrics_path`` (the nearest ``config.yaml`` above it) set
    ``run.tensorboard`` or ``campaign.tensorboard``."""
    for folder in list(metrics_path.parents)[:CONFIG_DEPTH]:
        config = folder / "config.yaml"
        if config.is_file():
            try:
                raw = yaml.safe_load(config.read_text(encoding="utf-8"))
            except (yaml.YAMLError, UnicodeDecodeError):
                return False
            if not isinstance(raw, dict):
                return False
            sections = (raw.get("run"), raw.get("campaign"))
            return any(isinstance(s, dict) and s.get("tensorboard") is True for s in sections)
    return False


def log_dir(metrics_path: Path) -> Path:
    """``RUN/metrics.jsonl`` -> ``RUN``; any other ``NAME.jsonl`` -> the folder ``NAME`` beside
    it (one TensorBoard run per writing process)."""
    if metrics_path.name == "metrics.jsonl":
        return metrics_path.parent
    return metrics_path.with_suffix("")


def step_field(record: dict[str, Any], kind: str) -> str | None:
    """The field of a record that is its TensorBoard step (None: the record has none)."""
    return next((k for k in STEP_KEYS.get(kind, ANY_STEP) if _number(record.get(k))), None)


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


class EventWriter:
    """Scalars of metrics records into one TensorBoard log directory (tensorboard's own writer).

    Records without a step field get the count of records of their kind written so far.
    """

    def __init__(self, logdir: Path, default_kind: str = "record") -> None:
        require()
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        logdir.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(logdir))
        self._default_kind = default_kind
        self._counts: dict[str, int] = {}

    def write(self, record: dict[str, Any], step: int | None = None) -> None:
        """Add one record; ``step`` overrides the record's own step field."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        kind = str(record.get("kind") or self._default_kind)
        self._counts[kind] = self._counts.get(kind, 0) + 1
        field = None
        if step is None:
            field = step_field(record, kind)
            step = int(record[field]) if field else self._counts[kind] - 1
        values = scalars(record, kind, skip=field)
        summary = Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in values])
        self._writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
