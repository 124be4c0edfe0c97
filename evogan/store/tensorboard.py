"""TensorBoard event files fed by the JSONL metrics records (optional: ``evogan[tensorboard]``).

A run asks for them in its config (``run.tensorboard: true``; ``campaign.tensorboard`` for a
search). Every metrics writer of the run then also writes each record as scalars named
``KIND/KEY`` into event files beside its JSONL file, so ``tensorboard --logdir populations/``
shows every run, every island and every search writer as its own TensorBoard run, and no
trainer needs to know. Names, steps and the decision are :mod:`evogan.store.scalars`'.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

from evogan.errors import EvoganError
from evogan.store.scalars import RecordSteps, logger_setting


def require() -> None:
    """One line instead of an ImportError for a stored run that asks for TensorBoard in an
    environment without it (configs are checked when loaded; this guards the writers)."""
    if importlib.util.find_spec("tensorboard") is None:
        raise EvoganError(
            "this run writes TensorBoard events: the tensorboard package is not installed; "
            "pip install 'evogan[tensorboard]'"
        )


def requested(metrics_path: Path) -> bool:
    """Whether the run owning ``metrics_path`` set ``run.tensorboard`` or
    ``campaign.tensorboard``."""
    return logger_setting(metrics_path, "tensorboard") is True


def log_dir(metrics_path: Path) -> Path:
    """``RUN/metrics.jsonl`` -> ``RUN``; any other ``NAME.jsonl`` -> the folder ``NAME`` beside
    it (one TensorBoard run per writing process)."""
    if metrics_path.name == "metrics.jsonl":
        return metrics_path.parent
    return metrics_path.with_suffix("")


class EventWriter:
    """Scalars of metrics records into one TensorBoard log directory (tensorboard's own writer).

    Records without a step field get the count of records of their kind written so far.
    """

    def __init__(self, logdir: Path, default_kind: str = "record") -> None:
        require()
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        logdir.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(logdir))
        self._steps = RecordSteps(default_kind)

    def write(self, record: dict[str, Any], step: int | None = None) -> None:
        """Add one record; ``step`` overrides the record's own step field."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        step, values = self._steps.place(record, step)
        summary = Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in values])
        self._writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
