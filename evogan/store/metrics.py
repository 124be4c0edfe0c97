"""JSONL metrics: one JSON object per line, flushed as it is written.

A crashed or killed run keeps every complete line; :func:`read_metrics` skips a torn last line,
and a writer that appends to the file later starts on a new line, so the torn one stays alone
(skipped) instead of swallowing the first new record.
Every record also goes to TensorBoard and to MLflow when the run asked for them
(:mod:`evogan.store.tensorboard`, :mod:`evogan.store.mlflow_runs`), here, so that no trainer
has to know.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, TextIO

from evogan.store import tensorboard
from evogan.store.mlflow_runs import RecordLogger


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null so every line parses everywhere."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(item) for item in value]
    return value


def to_json(obj: Any, indent: int | None = None) -> str:
    """``json.dumps`` with NaN/inf written as null (strict JSON); objects without them (nearly
    all) skip the cleaning walk."""
    try:
        return json.dumps(obj, indent=indent, allow_nan=False)
    except ValueError:
        return json.dumps(_clean(obj), indent=indent, allow_nan=False)


class MetricsWriter:
    """Appends records to a JSONL file (and its TensorBoard events and MLflow run); usable as a
    context manager."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._events = (
            tensorboard.EventWriter(tensorboard.log_dir(self.path))
            if tensorboard.requested(self.path)
            else None
        )
        self._mlflow = RecordLogger.for_metrics(self.path)
        self._stream: TextIO | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        if _torn(self.path):
            self._stream.write("\n")

    def write(self, record: dict[str, Any]) -> None:
        if self._stream is None:
            raise ValueError(f"metrics file {self.path} is already closed")
        self._stream.write(to_json(record) + "\n")
        self._stream.flush()
        if self._events is not None:
            self._events.write(record)
        if self._mlflow is not None:
            self._mlflow.write(record)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._events is not None:
            self._events.close()
            self._events = None
        if self._mlflow is not None:
            self._mlflow.close()
            self._mlflow = None

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def append_synced(path: str | Path, record: dict[str, Any], kind: str) -> None:
    """Add one record as a single ``O_APPEND`` write, synced before returning, for files that
    several processes may append to over a parallel file system; ``kind`` names records that
    carry no ``kind`` field (TensorBoard tags them ``KIND/KEY``, stepped by their line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (to_json(record) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"\n" + line if _torn(path) else line)
        os.fsync(fd)
    finally:
        os.close(fd)
    if tensorboard.requested(path):
        events = tensorboard.EventWriter(tensorboard.log_dir(path), default_kind=kind)
        try:
            events.write(record, step=len(read_metrics(path)) - 1)
        finally:
            events.close()


def _torn(path: Path) -> bool:
    """Whether ``path`` ends inside a line (a write cut off by a kill)."""
    with open(path, "rb") as stream:
        if stream.seek(0, os.SEEK_END) == 0:
            return False
        stream.seek(-1, os.SEEK_END)
        return stream.read(1) != b"\n"


def read_metrics(path: str | Path, kind: str | None = None) -> list[dict[str, Any]]:
    """Complete records of a JSONL file, optionally only those whose ``kind`` field matches."""
    records = []
    with open(path, encoding="utf-8") as stream:
        for line in stream:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if kind is None or record.get("kind") == kind:
                records.append(record)
    return records
