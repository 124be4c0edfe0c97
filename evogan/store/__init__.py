"""Run directories, atomic writes, JSONL metrics and HDF5 weights (shared by every workflow).

Names are imported on first use, so the CLI's failure guard (which needs only the run lock)
does not pay for torch and h5py in commands that never touch them.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "atomic_path": "atomic",
    "atomic_write": "atomic",
    "MetricsWriter": "metrics",
    "read_metrics": "metrics",
    "to_json": "metrics",
    "BEST_MODEL": "rundir",
    "CONFIG": "rundir",
    "METRICS": "rundir",
    "SUMMARY": "rundir",
    "RunDir": "rundir",
    "load_weights": "weights",
    "save_weights": "weights",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"evogan.store.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'evogan.store' has no attribute {name!r}")
