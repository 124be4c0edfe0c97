"""JSONL metrics: one JSON object per line, flushed as it is written.

A crashed or killed run keeps every complete line; :func:`read_metrics` skips a torn last line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TextIO


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
    """Appends records to a JSONL file; usable as a context manager."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stream: TextIO | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, record: dict[str, Any]) -> None:
        if self._stream is None:
            raise ValueError(f"metrics file {self.path} is already closed")
        self._stream.write(to_json(record) + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
