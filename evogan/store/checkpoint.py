"""Per-island HDF5 checkpoints: named arrays plus a JSON ``meta`` attribute, written atomically.

Layout inside a run directory::

    RUN/checkpoints/island-0003/gen-00000120.h5

The newest ``keep`` checkpoints of each island stay on disk, so a run killed while writing one
still has a complete earlier one, and synchronous runs can resume every island from the same
generation (:func:`common_generation`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from evogan.errors import DataError
from evogan.store.atomic import atomic_path
from evogan.store.folders import require_inside
from evogan.store.metrics import to_json

FORMAT = "evogan-checkpoint-3"
"""The layout this version writes and reads; a file of another version is refused, naming both."""
CHECKPOINTS = "checkpoints"
_NAME = re.compile(r"^gen-(\d+)\.h5$")
_PART = "meta."  # attributes holding one meta entry each (``meta_json``)


def island_dir(run_path: str | Path, island: int) -> Path:
    """``RUN/checkpoints/island-NNNN``, refused in one line when a symbolic link leads it out
    of the run (evogan prunes checkpoints there)."""
    folder = Path(run_path) / CHECKPOINTS / f"island-{island:04d}"
    return require_inside(Path(run_path), folder, "checkpoint files")


def checkpoint_path(run_path: str | Path, island: int, generation: int) -> Path:
    return island_dir(run_path, island) / f"gen-{generation:08d}.h5"


def generations(run_path: str | Path, island: int) -> list[int]:
    """Generations of the complete checkpoints of ``island``, oldest first."""
    folder = island_dir(run_path, island)
    if not folder.is_dir():
        return []
    found = (_NAME.match(p.name) for p in folder.iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def write_checkpoint(
    path: str | Path,
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any],
    meta_json: Mapping[str, str] | None = None,
) -> Path:
    """Write ``arrays`` (datasets) and ``meta`` (strict JSON) to ``path`` atomically;
    ``meta_json`` holds more meta entries already serialized (large ones a caller keeps
    serialized between checkpoints), which :func:`read_checkpoint` merges back."""
    path = Path(path)
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as handle:
        handle.attrs["format"] = FORMAT
        handle.attrs["meta"] = to_json(dict(meta))
        for name, text in (meta_json or {}).items():
            handle.attrs[f"{_PART}{name}"] = text
        group = handle.create_group("arrays")
        for name, value in arrays.items():
            group.create_dataset(name, data=np.asarray(value))
    return path


def read_checkpoint(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(arrays, meta)`` of a file written by :func:`write_checkpoint`."""
    path = Path(path)
    try:
        with h5py.File(path, "r") as handle:
            found = handle.attrs.get("format")
            ours = isinstance(found, str) and found.startswith("evogan-checkpoint-")
            if ours and found != FORMAT:
                raise DataError(
                    f"{path} was written by another evogan version (format {found}, this one "
                    f"reads {FORMAT}); resume with that version or start a new run"
                )
            if found != FORMAT:
                raise DataError(f"{path} is not an evogan checkpoint (format {FORMAT} expected)")
            meta = json.loads(handle.attrs["meta"])
            for name, text in handle.attrs.items():
                if name.startswith(_PART):
                    meta[name.removeprefix(_PART)] = json.loads(text)
            arrays = {name: np.array(data) for name, data in handle["arrays"].items()}
    except OSError as exc:
        raise DataError(f"checkpoint {path} is not a readable HDF5 file ({exc})") from None
    except (KeyError, ValueError) as exc:
        raise DataError(
            f"checkpoint {path} is damaged ({type(exc).__name__}: {exc}); delete it to resume "
            "from the checkpoint before it"
        ) from None
    return arrays, meta


def prune(run_path: str | Path, island: int, keep: int = 2) -> None:
    """Delete all but the newest ``keep`` checkpoints of ``island``."""
    for generation in generations(run_path, island)[:-keep]:
        checkpoint_path(run_path, island, generation).unlink(missing_ok=True)


def common_generation(available: list[list[int]]) -> int | None:
    """The newest generation every island has a checkpoint of (None if there is none)."""
    shared = set(available[0]) if available else set()
    for found in available[1:]:
        shared &= set(found)
    return max(shared) if shared else None
