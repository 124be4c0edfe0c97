"""Run directories, atomic writes, JSONL metrics and HDF5 weights (shared by every workflow).

Names are imported on first use, so the CLI's failure guard (which needs only the run lock)
does not pay for torch and h5py in commands that never touch them.
"""

from __future__ import annotations

from evogan.lazy import lazy_names

_LAZY = {
    "atomic_path": ".atomic",
    "atomic_write": ".atomic",
    "MetricsWriter": ".metrics",
    "read_metrics": ".metrics",
    "to_json": ".metrics",
    "BEST_MODEL": ".rundir",
    "CONFIG": ".rundir",
    "METRICS": ".rundir",
    "SUMMARY": ".rundir",
    "RunDir": ".rundir",
    "load_meta": ".weights",
    "load_weights": ".weights",
    "save_weights": ".weights",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_names(__name__, _LAZY)
