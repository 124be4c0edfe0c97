"""Run directories: one per ``evogan evolve``/``train``/``search`` run, under ``populations/``.

Layout (files are written atomically; metrics are appended line by line)::

    RUN/config.yaml      resolved config
    RUN/metrics.jsonl    one record per generation / epoch
    RUN/best_model.h5    best weights (HDF5, see evogan.store.weights)
    RUN/summary.json     final numbers of the run
    RUN/status.json      running / stopped / failed / finished (see evogan.store.lock)
    RUN/.lock            held by the process writing the run
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from evogan.errors import EvoganError
from evogan.settings import populations_dir
from evogan.store.atomic import atomic_write
from evogan.store.folders import require_directory
from evogan.store.lock import claim, note_written
from evogan.store.metrics import MetricsWriter, read_metrics, to_json
from evogan.store.state_files import read_state

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
BEST_MODEL = "best_model.h5"


def check_run_name(name: str | None, key: str = "run.name") -> None:
    """A run name is one plain directory name, so a run can never land outside its root
    (an explicit ``--run-dir`` is how a user puts a run anywhere else)."""
    if name is None:
        return
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise EvoganError(
            f"{key} = {name!r} must be a plain directory name (no '/', '..' or absolute "
            "path); use --run-dir to put a run somewhere else"
        )


def check_new_run_dir(target: Path) -> None:
    """A new run may start in ``target``: it is missing or an empty directory, so that no
    earlier run (or a file given by mistake) is overwritten."""
    if not target.exists():
        return
    if not target.is_dir():
        raise EvoganError(
            f"run directory {target} is a file, not a directory; choose a new --run-dir / run.name"
        )
    if any(target.iterdir()):
        raise EvoganError(
            f"run directory {target} already exists and is not empty; "
            "choose a new --run-dir / run.name or remove it"
        )


def check_under_root(base: Path, target: Path) -> None:
    """A run named under the run root ``base`` stays there: a name whose directory is a
    symbolic link out of the root is refused (``--run-dir`` puts a run anywhere)."""
    if not target.is_symlink():
        return
    real, top = target.resolve(), base.resolve()
    if top not in real.parents:
        raise EvoganError(
            f"run directory {target} is a symbolic link to {real}, outside the run root {base}; "
            f"choose another run name, or give that directory itself with --run-dir {real}"
        )


def run_root(root: str | Path | None) -> Path:
    """The directory a run named by its config goes under: ``root``, else
    :func:`evogan.settings.populations_dir`."""
    return Path(root) if root is not None else populations_dir()


def check_named_run(root: str | Path | None, name: str, key: str = "run.name") -> Path:
    """The directory of a new run named ``name`` (set by ``key``) under ``root``
    (:func:`run_root`), refused unless the name is plain, stays under the root and is free;
    asked by the commands before the data are read and by :meth:`RunDir.create`."""
    check_run_name(name, key)
    base = run_root(root)
    target = base / name
    check_under_root(base, target)
    check_new_run_dir(target)
    return target


def _missing_folders(target: Path) -> list[Path]:
    """The directories that making ``target`` creates, deepest first."""
    missing = []
    while not os.path.lexists(target) and target != target.parent:
        missing.append(target)
        target = target.parent
    return missing


class RunDir:
    """A run directory; construct with :meth:`create` (new run) or :meth:`open` (read one)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def create(
        cls,
        method: str,
        root: str | Path | None = None,
        name: str | None = None,
        path: str | Path | None = None,
    ) -> RunDir:
        """Make a new, empty run directory.

        ``path`` wins; otherwise ``root/name`` with ``root`` defaulting to
        :func:`evogan.settings.populations_dir` and ``name`` to ``METHOD-YYYYmmdd-HHMMSS``
        (a numeric suffix keeps concurrent runs apart). An explicit directory that already
        holds files is refused so that no earlier run is overwritten.
        """
        if path is not None:
            target = Path(path)
            check_new_run_dir(target)
        elif name is not None:
            target = check_named_run(root, name)
        else:
            base = run_root(root)
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            target = base / f"{method}-{stamp}"
            suffix = 1
            while os.path.lexists(target):
                suffix += 1
                target = base / f"{method}-{stamp}-{suffix}"
        made = _missing_folders(target)
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EvoganError(f"cannot create run directory {target}: {exc.strerror}") from None
        claim(target, made=made)
        return cls(target)

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An existing run directory (must hold a summary or metrics)."""
        run = cls(path)
        require_directory(run.path, "run directory")
        if not (run.file(SUMMARY).is_file() or run.file(METRICS).is_file()):
            raise EvoganError(
                f"{run.path} is not an evogan run directory (no {SUMMARY} or {METRICS})"
            )
        return run

    @property
    def name(self) -> str:
        return self.path.name

    def file(self, name: str) -> Path:
        return self.path / name

    def write_text(self, name: str, text: str) -> Path:
        note_written(self.file(name))
        return atomic_write(self.file(name), text)

    def write_json(self, name: str, obj: Any) -> Path:
        """Strict JSON (NaN/inf become null), written atomically."""
        return self.write_text(name, to_json(obj, indent=2) + "\n")

    def read_json(self, name: str, fix: str | None = None) -> dict[str, Any]:
        """A JSON object the run wrote; a missing or damaged file is one line ending in ``fix``
        (default: restore it from a backup)."""
        path = self.file(name)
        if not path.is_file() and fix is None:
            raise EvoganError(f"{path} does not exist; did the run finish?")
        return read_state(path, fix or "restore it from a backup of the run")

    def write_config(self, text: str) -> Path:
        return self.write_text(CONFIG, text)

    def metrics_writer(self) -> MetricsWriter:
        return MetricsWriter(self.file(METRICS))

    def metrics(self, kind: str | None = None) -> list[dict[str, Any]]:
        return read_metrics(self.file(METRICS), kind) if self.file(METRICS).is_file() else []

    def write_summary(self, summary: dict[str, Any]) -> Path:
        return self.write_json(SUMMARY, summary)

    def summary(self) -> dict[str, Any]:
        return self.read_json(SUMMARY)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"
