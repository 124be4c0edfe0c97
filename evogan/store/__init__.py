"""Run directories, atomic writes, JSONL metrics and HDF5 weights (shared by every workflow)."""

from evogan.store.atomic import atomic_path, atomic_write
from evogan.store.metrics import MetricsWriter, read_metrics, to_json
from evogan.store.rundir import BEST_MODEL, CONFIG, METRICS, SUMMARY, RunDir
from evogan.store.weights import load_weights, save_weights

__all__ = [
    "BEST_MODEL",
    "CONFIG",
    "METRICS",
    "SUMMARY",
    "MetricsWriter",
    "RunDir",
    "atomic_path",
    "atomic_write",
    "load_weights",
    "read_metrics",
    "save_weights",
    "to_json",
]
