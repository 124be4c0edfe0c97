"""The generator of a 3DGAN run directory to hand on (``evogan export``): its best, or its last.

``best`` is ``best_model.h5`` (the best validation score, or the final generator when nothing
validated); ``last`` is ``last_model.h5`` of a finished run, or the generator of the last
checkpoint of a run that has not finished (stopped by a signal, failed, still running). A run
with no ``best_model.h5`` yet gives its last, and :attr:`Picked.note` says so in one line, as it
names the best model of a run that has not finished.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from evogan.errors import DataError
from evogan.gan3d.model.model_file import is_generator, load_generator, runs_below
from evogan.gan3d.model.networks import Generator
from evogan.gan3d.model.spec import GanSpec, load_spec
from evogan.gan3d.training.checkpoint import MARKER
from evogan.gan3d.training.outputs import LAST_MODEL
from evogan.store import BEST_MODEL, CONFIG, SUMMARY, load_weights
from evogan.store.lock import FINISHED, RUNNING, read_status
from evogan.store.state_files import read_state

CHECKPOINT = "checkpoint"
"""What :attr:`Picked.model` says of the generator of a run's last checkpoint."""
UNFINISHED = "unfinished"
"""The status of a run made by library calls (no status recorded) that wrote no summary."""


@dataclass(frozen=True)
class Picked:
    """A run's generator: its spec and weights, its file's meta, which model it is (``best``,
    ``last``, ``checkpoint`` or ``file``), where it came from and what it is in words, and a
    note for the user when the run has not finished or lacks the model asked for."""

    spec: GanSpec
    generator: Generator
    meta: dict[str, Any]
    model: str
    source: Path
    what: str
    note: str | None = None


def pick_generator(path: str | Path, model: str | None = None) -> Picked:
    """The ``model`` of run directory ``path`` (``best``, ``last``, or None: the best, else the
    last with a note), or the generator file ``path`` itself (``model`` None)."""
    path = Path(path)
    if path.is_file():
        if model is not None:
            raise DataError(
                f"--model {model} picks a run directory's generator, but {path} is a file; "
                f"drop --model or pass the run directory {path.parent}"
            )
        spec, generator, meta = load_generator(path)
        kind = {BEST_MODEL: "best", LAST_MODEL: "last"}.get(path.name, "file")
        return Picked(spec, generator, meta, kind, path, f"{path.name}{_at(meta)}")
    if not path.is_dir():
        raise DataError(f"{path} does not exist; pass a gan3d run directory or a generator file")
    status = _status(path)
    best = path / BEST_MODEL
    if model != "last" and is_generator(best):
        other = "--model last exports its last checkpoint"
        return _with_note(_loaded(best, "best"), path, status, other)
    last = _last(path, status)
    if last is None:
        _refuse_empty(path)
    if model == "best":
        raise DataError(
            f"{path} has no {BEST_MODEL} ({_state(status)}); pass --model last to export "
            f"{last.what}"
        )
    if model == "last":
        return _with_note(last, path, status)
    why = f"has no {BEST_MODEL} ({_state(status)})"
    return replace(last, note=f"note: {path} {why}; exporting {last.what}")


def _loaded(file: Path, model: str) -> Picked:
    spec, generator, meta = load_generator(file)
    return Picked(spec, generator, meta, model, file, f"{file.name}{_at(meta)}")


def _at(meta: dict[str, Any]) -> str:
    """Where in the training a generator file was picked, and its score, when it says."""
    parts = []
    if "step" in meta and "epoch" in meta:
        parts.append(f"epoch {meta['epoch']} step {meta['step']}")
    if "score" in meta:
        parts.append(f"score {meta['score']:.4g}")
    return f" ({', '.join(parts)})" if parts else ""


def _with_note(picked: Picked, run: Path, status: str, other: str = "") -> Picked:
    """``picked`` with a note naming it when ``run`` has not finished."""
    if status == FINISHED:
        return picked
    tail = f"; {other}" if other else ""
    return replace(picked, note=f"note: {run} {_ended(status)}; exporting {picked.what}{tail}")


def _last(run: Path, status: str) -> Picked | None:
    """``last_model.h5`` of a finished run, else the last checkpoint's generator, else None."""
    file, marker = run / LAST_MODEL, run / MARKER
    if (status == FINISHED or not marker.is_file()) and is_generator(file):
        return _loaded(file, "last")
    return _checkpointed(run) if marker.is_file() else None


def _checkpointed(run: Path) -> Picked:
    """The generator of ``run``'s last committed checkpoint (rank 0's, with its weight average
    where the training keeps one, as validations score it), spec from the run's config."""
    fix = "export its best_model.h5 or last_model.h5 instead, if it has one"
    marker = read_state(run / MARKER, fix, keys=("files", "epoch", "step"))
    if not isinstance(marker["files"], list) or not marker["files"]:
        raise DataError(f"{run / MARKER} is damaged (it names no checkpoint file); {fix}")
    spec = load_spec(run / CONFIG)
    source = run / str(marker["files"][0])
    tensors, _ = load_weights(source)
    generator = Generator(spec)
    own = {k[len("generator/") :]: v for k, v in tensors.items() if k.startswith("generator/")}
    try:
        generator.load_state_dict(own)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise DataError(
            f"{source}: its generator weights do not match {run / CONFIG} ({first})"
        ) from None
    if "generator_average/updates" in tensors:
        with torch.no_grad():
            for index, param in enumerate(generator.parameters()):
                param.copy_(tensors[f"generator_average/{index}"])
    epochs, step = int(marker["epoch"]), int(marker["step"])
    meta = {"epochs_done": epochs, "step": step}
    what = f"the generator of the last checkpoint (after {epochs} epoch(s) and {step} step(s))"
    return Picked(spec, generator.eval(), meta, CHECKPOINT, source, what)


def _status(run: Path) -> str:
    """The run's recorded status; for a run made by library calls, which record none:
    finished when it has a summary, else :data:`UNFINISHED`."""
    record = read_status(run)
    if record is not None:
        return str(record["status"])
    return FINISHED if (run / SUMMARY).is_file() else UNFINISHED


def _ended(status: str) -> str:
    """How a run that has not finished stands, after its path."""
    if status == UNFINISHED:
        return "has not finished"
    return "is still running" if status == RUNNING else f"was {status} before it finished"


def _state(status: str) -> str:
    """Why a run has no best model yet, or at all."""
    if status == FINISHED:
        return "its training finished without one: a diverged training keeps only last_model.h5"
    return f"it {_ended(status)}"


def _refuse_empty(path: Path) -> None:
    runs = runs_below(path)
    if runs:
        names = ", ".join(str(run.relative_to(path)) for run in runs[:4])
        raise DataError(
            f"{path} holds the generators of {len(runs)} runs ({names}); pass one of them"
        )
    raise DataError(
        f"{path} holds no 3DGAN generator (no {BEST_MODEL}, {LAST_MODEL} or checkpoint); "
        "train one with evogan train, or pass a generator .h5 file"
    )
