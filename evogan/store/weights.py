"""Model weights as HDF5: one dataset per tensor, metadata as a JSON attribute.

HDF5 loads without executing code (unlike pickle-based ``torch.save``), and any HDF5 tool can
read the file.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from evogan.errors import DataError
from evogan.store.atomic import atomic_path
from evogan.store.metrics import to_json

FORMAT = "evogan-weights-1"


def save_weights(
    path: str | Path, state_dict: Mapping[str, torch.Tensor], meta: Mapping[str, Any] | None = None
) -> Path:
    """Write tensors (names may contain dots) and a JSON-serialisable ``meta`` dict atomically."""
    path = Path(path)
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as handle:
        handle.attrs["format"] = FORMAT
        handle.attrs["meta"] = to_json(dict(meta or {}))
        group = handle.create_group("tensors")
        handle.attrs["order"] = json.dumps(list(state_dict))
        for name, tensor in state_dict.items():
            group.create_dataset(name.replace("/", "|"), data=tensor.detach().cpu().numpy())
    return path


def load_weights(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a file written by :func:`save_weights`; returns ``(state_dict, meta)``."""
    with _opened(Path(path)) as handle:
        group = handle["tensors"]
        tensors = {
            name: torch.from_numpy(np.array(group[name.replace("/", "|")]))
            for name in json.loads(handle.attrs["order"])
        }
        return tensors, json.loads(handle.attrs["meta"])


def load_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta`` of a file written by :func:`save_weights`, without reading its tensors
    (finding a run's generator among checkpoints of tens of MB each)."""
    with _opened(Path(path)) as handle:
        return json.loads(handle.attrs["meta"])


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[h5py.File]:
    """An evogan weights file open for reading; every failure, while opening or reading, is
    one DataError naming the file."""
    if not path.is_file():
        raise DataError(f"weights file {path} does not exist; pass the best_model.h5 of a run")
    try:
        with h5py.File(path, "r") as handle:
            if handle.attrs.get("format") != FORMAT or "tensors" not in handle:
                raise DataError(f"{path} is not an evogan weights file (format {FORMAT} expected)")
            yield handle
    except OSError as exc:
        raise DataError(f"{path} is not a readable HDF5 file ({exc})") from None
