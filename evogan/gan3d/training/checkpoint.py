"""Checkpoints of a data-parallel 3DGAN run: one HDF5 file per writing rank and checkpoint,
committed by an atomic marker, so a run killed at any moment resumes from a complete,
consistent position (epoch and step within it).

Every writing rank writes ``checkpoints/ckpt-NNNNNN-rank-RRRRR.h5`` (atomically, via
:func:`evogan.store.save_weights`); after a barrier rank 0 replaces ``checkpoint.json`` with
the position and the file list, then removes the files the previous ``checkpoint.json`` named
and the temporary files of killed writes of this commit's names: only files evogan wrote, in a
``checkpoints/`` that no symbolic link leads out of the run. Until that moment the previous
checkpoint stays complete and committed. In sync mode the replicas are identical and only rank
0 writes, adding every rank's batch-norm running statistics and partial-epoch sums (they differ
per rank), so a resumed run continues bit-identically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evogan import __version__
from evogan.distributed.mpi import MPI
from evogan.errors import EvoganError
from evogan.gan3d.training.weight_average import WeightAverage
from evogan.optimizer import RMSprop
from evogan.store import load_weights, save_weights
from evogan.store.folders import require_inside
from evogan.store.rundir import RunDir
from evogan.store.state_files import read_state, require_keys

MARKER = "checkpoint.json"
FOLDER = "checkpoints"
FORMAT = 2
"""Checkpoint layout version: 2 adds the step within the epoch and per-rank extras."""
_RANK_FILE = re.compile(rf"^{FOLDER}/ckpt-\d{{6}}-rank-\d{{5}}\.h5$")
_MARKER_KEYS = ("files", "serial", "world_size", "epoch")
_MARKER_FIX = (
    "restore it from a backup of the run, or start a new run (the checkpoint it names cannot "
    "be found)"
)


@dataclass
class RankState:
    """Everything one rank needs to continue: networks, optimisers, random stream, position."""

    generator: torch.nn.Module
    discriminator: torch.nn.Module
    g_optimizer: RMSprop
    d_optimizer: RMSprop
    rng: torch.Generator
    buffers: list[torch.Tensor]
    """This rank's floating-point module buffers (batch-norm running statistics)."""
    average: WeightAverage | None = None
    """The generator's weight average (``trainer.generator_average``), if on."""


def _optimizer_tensors(prefix: str, optimizer: RMSprop) -> dict[str, torch.Tensor]:
    state = optimizer.state_dict()["state"]
    return {
        f"{prefix}/{index}/{key}": torch.as_tensor(value)
        for index, slots in state.items()
        for key, value in slots.items()
    }


def _optimizer_state(
    prefix: str, tensors: dict[str, torch.Tensor], groups: list[dict[str, Any]]
) -> dict[str, Any]:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, tensor in tensors.items():
        if name.startswith(prefix + "/"):
            index, key = name[len(prefix) + 1 :].split("/", 1)
            state.setdefault(int(index), {})[key] = tensor
    return {"state": state, "param_groups": groups}


def rank_file(serial: int, rank: int) -> str:
    return f"{FOLDER}/ckpt-{serial:06d}-rank-{rank:05d}.h5"


def save_rank(
    run: RunDir,
    name: str,
    state: RankState,
    extras: dict[int, tuple[list[torch.Tensor], dict[str, Any]]],
    meta: dict[str, Any],
) -> None:
    """Write one rank's state (not yet committed); ``extras`` maps a rank to its buffers and
    its own JSON state (position, partial sums), for every rank this file restores."""
    checkpoint_folder(run)
    tensors: dict[str, torch.Tensor] = {}
    for net in ("generator", "discriminator"):
        module = getattr(state, net)
        tensors.update({f"{net}/{k}": v for k, v in module.state_dict().items()})
    tensors.update(_optimizer_tensors("g_optimizer", state.g_optimizer))
    tensors.update(_optimizer_tensors("d_optimizer", state.d_optimizer))
    tensors["rng"] = state.rng.get_state()
    if state.average is not None:
        tensors.update(state.average.tensors())
    for rank, (buffers, _own) in extras.items():
        tensors.update({f"buffers/{rank}/{i}": b for i, b in enumerate(buffers)})
    groups = {
        "g_optimizer": state.g_optimizer.state_dict()["param_groups"],
        "d_optimizer": state.d_optimizer.state_dict()["param_groups"],
    }
    ranks = {str(rank): own for rank, (_buffers, own) in extras.items()}
    save_weights(run.file(name), tensors, {**meta, "param_groups": groups, "ranks": ranks})


def commit(run: RunDir, comm: MPI.Comm, files: list[str], meta: dict[str, Any]) -> None:
    """Collective: once every writer's file is on disk, make ``files`` the checkpoint to resume
    from, then remove the checkpoint it replaces and leftovers of killed writes of ``files``."""
    comm.Barrier()
    if comm.rank == 0:
        folder = checkpoint_folder(run)
        earlier = _committed(run)
        run.write_json(MARKER, {**meta, "format": FORMAT, "evogan": __version__, "files": files})
        for name in earlier - set(files):
            run.file(name).unlink(missing_ok=True)
        temporary = {f".{Path(name).name}." for name in files}
        for path in folder.iterdir():
            if path.suffix == ".tmp" and any(path.name.startswith(t) for t in temporary):
                path.unlink(missing_ok=True)
    comm.Barrier()


def checkpoint_folder(run: RunDir) -> Path:
    """``RUN/checkpoints``, refused in one line when a symbolic link leads it out of the run."""
    return require_inside(run.path, run.file(FOLDER), "checkpoint files")


def _committed(run: RunDir) -> set[str]:
    """The checkpoint files the current marker names, in evogan's own naming (nothing when
    there is no readable marker: then nothing is proven to be evogan's)."""
    try:
        files = read_state(run.file(MARKER), "").get("files")
    except EvoganError:
        return set()
    names = files if isinstance(files, list) else []
    return {name for name in names if isinstance(name, str) and _RANK_FILE.match(name)}


def read_marker(run: RunDir) -> dict[str, Any]:
    """The committed checkpoint of ``run``; one clear error when there is none, when it is
    damaged, or when another evogan version or checkpoint format wrote it."""
    path = run.file(MARKER)
    if not path.is_file():
        raise EvoganError(
            f"{run.path} holds no checkpoint ({MARKER} missing), so there is nothing to resume; "
            "start a new run instead"
        )
    marker = read_state(path, _MARKER_FIX)
    version, layout = marker.get("evogan", "an older version"), marker.get("format", 1)
    if version != __version__ or layout != FORMAT:
        raise EvoganError(
            f"{run.path} was checkpointed by evogan {version} (checkpoint format {layout}); this "
            f"is evogan {__version__} (format {FORMAT}): resume it with evogan {version} or "
            "start a new run"
        )
    require_keys(path, marker, _MARKER_KEYS, _MARKER_FIX)
    return marker


def load_rank(run: RunDir, file_name: str, state: RankState, rank: int) -> dict[str, Any]:
    """Restore ``state`` in place from one file; returns ``rank``'s own JSON state."""
    tensors, meta = load_weights(run.file(file_name))
    for net in ("generator", "discriminator"):
        module = getattr(state, net)
        prefix = f"{net}/"
        own = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        module.load_state_dict(own)
    groups = meta["param_groups"]
    for name in ("g_optimizer", "d_optimizer"):
        getattr(state, name).load_state_dict(_optimizer_state(name, tensors, groups[name]))
    state.rng.set_state(tensors["rng"])
    if state.average is not None:
        if "generator_average/updates" not in tensors:
            raise EvoganError(
                f"{run.file(file_name)} holds no generator weight average but this training "
                "keeps one: resume with the trainer.generator_average the run was started with"
            )
        state.average.load(tensors)
    with torch.no_grad():
        for index, buffer in enumerate(state.buffers):
            buffer.copy_(tensors[f"buffers/{rank}/{index}"])
    return meta["ranks"][str(rank)]
