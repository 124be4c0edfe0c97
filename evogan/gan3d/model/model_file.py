"""Self-describing 3DGAN generator files, and finding the generator of a run directory.

A generator file is an :mod:`evogan.store.weights` HDF5 file whose ``meta`` holds
``kind = "gan3d-generator"`` and the full spec as JSON, so ``evogan validate`` and
``evogan generate`` need nothing but the file. Trainers save with :func:`save_generator`
(the data-parallel trainer does so for its checkpoints and ``best_model.h5``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import h5py
import torch

from evogan.config.base import validate
from evogan.errors import DataError
from evogan.gan3d.model.networks import Generator
from evogan.gan3d.model.spec import GanSpec
from evogan.store import BEST_MODEL, load_meta, load_weights, save_weights

KIND = "gan3d-generator"


def save_generator(
    path: str | Path, spec: GanSpec, generator: Generator, meta: Mapping[str, Any] | None = None
) -> Path:
    """Write ``generator``'s weights (BN running statistics included) with its spec."""
    record = {**dict(meta or {}), "kind": KIND, "spec": spec.model_dump(mode="json")}
    return save_weights(path, generator.state_dict(), record)


def finite_weights(generator: torch.nn.Module) -> bool:
    """Whether every weight and batch-norm statistic of ``generator`` is finite: a training
    that diverged leaves NaN or inf there, and such a generator is never saved as the best."""
    state = generator.state_dict().values()
    return all(bool(torch.isfinite(t).all()) for t in state if t.is_floating_point())


DIVERGED = (
    "note: the generator's weights are not finite (the training diverged; lower spec.g_lr and "
    "spec.d_lr): last_model.h5 keeps it, no best_model.h5 is written"
)


def load_generator(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[GanSpec, Generator, dict[str, Any]]:
    """Spec, generator (in eval mode) and meta of a file written by :func:`save_generator`."""
    try:
        state, meta = load_weights(path)
    except DataError:
        _refuse_showers(Path(path))  # only a file that is no weights file is looked into
        raise
    if meta.get("kind") != KIND or "spec" not in meta:
        raise DataError(
            f"{path} holds no 3DGAN generator (meta kind {meta.get('kind')!r}, expected "
            f"{KIND!r}); pass a generator file or a gan3d run directory"
        )
    spec = validate(GanSpec, meta["spec"], source=f"{path} spec")
    generator = Generator(spec)
    try:
        generator.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise DataError(f"{path}: weights do not match the stored spec ({first})") from None
    return spec, generator.to(device).eval(), meta


def _refuse_showers(path: Path) -> None:
    """A shower file given where a generator belongs is named for what it holds."""
    try:
        with h5py.File(path, "r") as handle:
            if "format" in handle.attrs:
                return
            showers = any(
                isinstance(node, h5py.Dataset) and node.ndim == 4 for node in handle.values()
            )
    except OSError:
        return  # load_weights names the problem
    if showers:
        raise DataError(
            f"{path} holds showers, not a generator; pass a generator file or a gan3d run "
            "directory (shower files go to evogan validate and data inspect)"
        )


def find_generator(path: str | Path) -> Path:
    """A generator file, or the generator of a run directory.

    In a run directory ``best_model.h5`` wins when it is a generator; otherwise the most
    recently written generator file anywhere below the directory (checkpoints). A directory
    that holds several runs' ``best_model.h5`` (a search candidate's members, its re-trainings)
    is refused with them named: the newest of them is no better than the others.
    """
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise DataError(
            f"model {path} does not exist; pass a generator .h5 file or a run directory"
        )
    best = path / BEST_MODEL
    if best.is_file() and is_generator(best):
        return best
    generators = [p for p in path.rglob("*.h5") if is_generator(p)]
    runs = _runs(generators)
    if len(runs) > 1:
        names = ", ".join(str(run.relative_to(path)) for run in runs[:4])
        more = f" and {len(runs) - 4} more" if len(runs) > 4 else ""
        raise DataError(
            f"{path} holds the generators of {len(runs)} runs ({names}{more}); pass one of "
            f"them, e.g. {runs[0] / BEST_MODEL}, or all as --ensemble {path}"
        )
    if not generators:
        raise DataError(f"run directory {path} holds no 3DGAN generator file (*.h5 with a spec)")
    return max(generators, key=lambda p: (p.stat().st_mtime, p.name))


def runs_below(path: Path) -> list[Path]:
    """The run directories below ``path`` whose ``best_model.h5`` is a generator, sorted."""
    return _runs(p for p in path.rglob(BEST_MODEL) if is_generator(p))


def _runs(generators: Iterable[Path]) -> list[Path]:
    return sorted(p.parent for p in generators if p.name == BEST_MODEL)


def is_generator(path: str | Path) -> bool:
    """Whether ``path`` is a generator file (its metadata read, not its weights)."""
    try:
        return load_meta(path).get("kind") == KIND
    except DataError:
        return False
