"""MLflow runs beside the run directories (optional: ``evogan[mlflow]``).

A run asks for one in its config (``run.mlflow: true`` or a tracking URI; ``campaign.mlflow``
for a search). The process that writes the run directory (rank 0 of its group) calls
:func:`start`, which opens one MLflow run and records its id in ``RUN/mlflow.json``; every
metrics writer of the run then also logs each record there, named and stepped as TensorBoard
does (:mod:`evogan.store.scalars`), so no trainer logs metrics itself; :meth:`TrackedRun.end`
sets the final status and, for a top-level run, logs the files given (the best model).

- The run's store: ``true`` is MLflow's file store in ``mlruns/`` beside the run directory
  (``populations/mlruns`` by default): plain files, one folder per run, no server and no
  database, so many group leaders on a cluster's shared file system write at once without
  locking. MLflow 3 keeps that store in maintenance mode and refuses it unless
  ``MLFLOW_ALLOW_FILE_STORE`` is set, so evogan sets it for a ``file:`` store (unless the user
  set it). A string is any tracking URI (``sqlite:///...``, ``http://...``) or a folder path.
- Nesting follows the folders: a run directory inside a folder that has an MLflow run (a
  member in its candidate's folder, a candidate in its campaign's, an island in its run's)
  becomes a child of that run, in its store and experiment. A top-level run's experiment is
  the one its caller names.
- Resume: a run directory that holds ``mlflow.json`` continues that MLflow run. Steps trained
  again after a rewind to a checkpoint are logged again (MLflow keeps every point).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evogan.errors import EvoganError, RunStopped
from evogan.store.atomic import atomic_write
from evogan.store.lock import note_written
from evogan.store.scalars import RecordSteps, logger_setting

RUN_FILE = "mlflow.json"
INSTALL = 'pip install "evogan[mlflow]"'
STORE_FOLDER = "mlruns"
# How far above a run directory the run it nests under can be (CAMPAIGN/final/X/member-N).
PARENT_DEPTH = 3
# Records are sent in one batch at most this often (a GA writes hundreds per second).
FLUSH_SECONDS = 5.0
_BATCH = 1000  # MLflow's limit of metrics per call (100 for params)
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_BAD_KEY = re.compile(r"[^\w\-./ ]")


def installed() -> bool:
    return importlib.util.find_spec("mlflow") is not None


def require() -> None:
    """One line instead of an ImportError for a stored run that asks for MLflow in an
    environment without it (configs are checked when loaded; this guards the writers)."""
    if not installed():
        raise EvoganError(
            f"this run logs to MLflow: the mlflow package is not installed; {INSTALL}"
        )


def store_uri(setting: bool | str, folder: Path) -> str:
    """The tracking URI of ``setting`` for a top-level run in ``folder``: ``true`` is the file
    store ``mlruns/`` beside it, a string with a scheme is used as given, any other string is
    a folder path (relative to the working directory)."""
    if setting is True:
        return (folder.parent / STORE_FOLDER).resolve().as_uri()
    text = str(setting)
    return text if _URI.match(text) else Path(text).resolve().as_uri()


def client(uri: str) -> Any:
    """An ``MlflowClient`` for ``uri`` (MLflow's file store allowed, see the module doc)."""
    require()
    if uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def key(name: str) -> str:
    """``name`` with the characters MLflow refuses in metric and param names made ``_``."""
    return _BAD_KEY.sub("_", name)[:250]


def flat_params(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A config as MLflow params: nested sections (and lists of sections, such as a spec's
    blocks) become dotted names, ``trainer.epochs``, ``spec.generator.0.filters``; every
    other value is its JSON text."""
    flat: dict[str, str] = {}
    for name, value in config.items():
        dotted = f"{prefix}{name}"
        if isinstance(value, dict):
            flat.update(flat_params(value, dotted + "."))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            flat.update(flat_params({str(i): v for i, v in enumerate(value)}, dotted + "."))
        else:
            flat[key(dotted)] = value if isinstance(value, str) else json.dumps(value)
    return flat


@dataclass(frozen=True)
class TrackedRun:
    """The MLflow run of one run directory, as ``mlflow.json`` records it."""

    folder: str
    uri: str
    run_id: str
    experiment_id: str
    parent_id: str | None = None

    def client(self) -> Any:
        return client(self.uri)

    def log(
        self, records: Iterable[dict[str, Any]], kind: str = "record", step: int | None = None
    ) -> None:
        """Log ``records`` now (records that go to no metrics file: a search's table row, a
        campaign's summary); ``step`` overrides their own step field."""
        logger = RecordLogger(self, kind)
        for record in records:
            logger.write(record, step)
        logger.close()

    def end(
        self,
        status: str = "FINISHED",
        artifacts: Sequence[Path] = (),
        tags: dict[str, str] | None = None,
    ) -> None:
        """Set ``tags`` and the final status; a top-level run first logs those of
        ``artifacts`` that exist, each under its folder relative to the run directory (a nested
        run's files stay in its directory, which its ``evogan.run_dir`` tag names)."""
        mlflow = self.client()
        for name, value in (tags or {}).items():
            mlflow.set_tag(self.run_id, name, value)
        if self.parent_id is None:
            for path in map(Path, artifacts):
                if path.is_file():
                    mlflow.log_artifact(self.run_id, str(path), artifact_path=self._under(path))
        mlflow.set_terminated(self.run_id, status)

    def _under(self, path: Path) -> str | None:
        """The artifact folder of ``path``: its folder relative to the run directory."""
        try:
            where = path.parent.absolute().relative_to(self.folder).as_posix()
        except ValueError:
            return None
        return None if where == "." else where


def status_of(exc: BaseException | None) -> str:
    """The MLflow status of a run that ended with ``exc`` (None: it finished)."""
    if exc is None:
        return "FINISHED"
    return "KILLED" if isinstance(exc, (RunStopped, KeyboardInterrupt)) else "FAILED"


@contextmanager
def ending_on_error(run: TrackedRun | None) -> Iterator[None]:
    """Ends ``run`` (when there is one) KILLED or FAILED, by :func:`status_of`, when the block
    raises; a block that returns leaves it to the caller (who logs its artifacts). A store that
    cannot take the status is noted in one line, so it never hides the block's own error."""
    try:
        yield
    except BaseException as exc:
        if run is not None:
            try:
                run.end(status_of(exc))
            except Exception as failed:  # the store's error must not replace the run's
                first = (str(failed).strip().splitlines() or [type(failed).__name__])[0]
                print(
                    f"evogan: note: MLflow run {run.run_id} keeps its status: {first}",
                    file=sys.stderr,
                    flush=True,
                )
        raise


def read_run(folder: Path) -> TrackedRun | None:
    """The MLflow run ``folder`` records (None: it records none)."""
    path = folder / RUN_FILE
    if not path.is_file():
        return None
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        return TrackedRun(**{**recorded, "folder": str(folder.absolute())})  # moved: here now
    except (ValueError, TypeError) as exc:
        raise EvoganError(
            f"{path} is damaged ({exc}); delete it to start a new MLflow run for {folder}"
        ) from None


def parent_run(folder: Path) -> TrackedRun | None:
    """The run of the nearest folder above ``folder`` that has one (at most PARENT_DEPTH up)."""
    for place in list(folder.parents)[:PARENT_DEPTH]:
        found = read_run(place)
        if found is not None:
            return found
    return None


def start(
    folder: Path,
    setting: bool | str | None,
    experiment: str,
    params: dict[str, Any] | None = None,
) -> TrackedRun | None:
    """Open the MLflow run of the run directory ``folder`` when ``setting`` asks for one: the
    run ``mlflow.json`` names (resume), else a new run nested under the nearest run above, else
    a new top-level run in ``setting``'s store and the experiment ``experiment``. ``params``
    (a config dump) go to a new run as :func:`flat_params`. None when ``setting`` is off."""
    if setting is None or setting is False:
        return None
    folder = Path(folder).absolute()
    own = read_run(folder)
    if own is not None:
        fix = f"start a new MLflow run for {folder} by deleting its {RUN_FILE}"
        _mlflow_call(lambda: own.client().update_run(own.run_id, status="RUNNING"), own.uri, fix)
        return own
    parent = parent_run(folder)
    uri = parent.uri if parent else store_uri(setting, folder)
    fix = "set run.mlflow / campaign.mlflow to true, a tracking URI or a folder"
    mlflow = _mlflow_call(lambda: client(uri), uri, fix)
    tags = {"evogan.run_dir": str(folder)}
    if parent is not None:
        experiment_id = parent.experiment_id
        tags["mlflow.parentRunId"] = parent.run_id
    else:
        experiment_id = _mlflow_call(lambda: _experiment(mlflow, experiment, uri), uri, fix)
    made = _mlflow_call(
        lambda: mlflow.create_run(experiment_id, run_name=folder.name, tags=tags), uri, fix
    )
    run = TrackedRun(
        str(folder), uri, made.info.run_id, experiment_id, parent.run_id if parent else None
    )
    if params:
        _log_params(mlflow, run.run_id, flat_params(params))
    path = folder / RUN_FILE
    folder.mkdir(parents=True, exist_ok=True)
    note_written(path)
    atomic_write(path, json.dumps(asdict(run), indent=2) + "\n")
    return run


def _experiment(mlflow: Any, name: str, uri: str) -> str:
    """The id of experiment ``name``, made when missing (another process may make it at the
    same moment: then its id)."""
    from mlflow.exceptions import MlflowException

    found = mlflow.get_experiment_by_name(name)
    if found is None:
        location = None
        if uri.startswith("sqlite:///"):  # MLflow's default would be ./mlruns of the cwd
            location = (Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts").as_uri()
        try:
            return mlflow.create_experiment(name, artifact_location=location)
        except MlflowException:
            found = mlflow.get_experiment_by_name(name)
            if found is None:
                raise
    if found.lifecycle_stage == "deleted":
        raise EvoganError(
            f"MLflow experiment {name!r} in {uri} is deleted; restore it (mlflow experiments "
            "restore) or remove it for good (mlflow gc) before logging to it again"
        )
    return found.experiment_id


def _mlflow_call(call: Any, uri: str, fix: str) -> Any:
    """``call()``, with an MLflow refusal (bad URI, missing run, server down) as one line
    ending in ``fix``."""
    from mlflow.exceptions import MlflowException

    try:
        return call()
    except MlflowException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EvoganError(f"MLflow store {uri}: {first}; {fix}") from None


def _log_params(mlflow: Any, run_id: str, params: dict[str, str]) -> None:
    from mlflow.entities import Param

    items = [Param(name, value) for name, value in params.items()]
    for at in range(0, len(items), 100):
        mlflow.log_batch(run_id, params=items[at : at + 100])


class RecordLogger:
    """Metrics records into one MLflow run, named ``KIND/KEY`` at the record's step (records
    without a step field: the count of their kind so far), sent in batches at most every
    FLUSH_SECONDS and on :meth:`close`."""

    def __init__(self, run: TrackedRun, default_kind: str = "record") -> None:
        self.run = run
        self._client = run.client()
        self._steps = RecordSteps(default_kind)
        self._pending: list[Any] = []
        self._sent = -FLUSH_SECONDS

    @classmethod
    def for_metrics(cls, metrics_path: Path) -> RecordLogger | None:
        """The logger of a metrics file whose run set ``mlflow`` and whose folder has an MLflow
        run (:func:`start`); None otherwise."""
        if logger_setting(metrics_path, "mlflow") is None:
            return None
        run = read_run(metrics_path.parent)
        return None if run is None else cls(run)

    def write(self, record: dict[str, Any], step: int | None = None) -> None:
        """Add one record; ``step`` overrides the record's own step field."""
        from mlflow.entities import Metric

        step, values = self._steps.place(record, step)
        now = int(time.time() * 1000)
        for name, value in values:
            self._pending.append(Metric(key(name), value, now, step))
        if time.monotonic() - self._sent >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        for at in range(0, len(pending), _BATCH):
            self._client.log_batch(self.run.run_id, metrics=pending[at : at + _BATCH])
        self._sent = time.monotonic()

    def close(self) -> None:
        self.flush()
