"""Checkpoints of a data-parallel 3DGAN run: one HDF5 file per rank and epoch, committed by an
atomic marker, so a run killed at any moment resumes from a complete, consistent epoch.

Every rank writes ``checkpoints/epoch-EEEEE-rank-RRRRR.h5`` (atomically, via
:func:`evogan.store.save_weights`); after a barrier rank 0 replaces ``checkpoint.json`` with the
epoch and the file list, then the previous epoch's files are removed. Nothing is gathered to
one rank, so checkpoint memory stays per rank at any scale. In sync mode the replicas are
identical and only rank 0 writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from mpi4py import MPI

from evogan.errors import EvoganError
from evogan.store import load_weights, save_weights
from evogan.store.rundir import RunDir

MARKER = "checkpoint.json"
FOLDER = "checkpoints"


@dataclass
class RankState:
    """Everything one rank needs to continue: networks, optimisers, random stream, position."""

    generator: torch.nn.Module
    discriminator: torch.nn.Module
    g_optimizer: torch.optim.Optimizer
    d_optimizer: torch.optim.Optimizer
    rng: torch.Generator


def _optimizer_tensors(prefix: str, optimizer: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
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


def rank_file(epoch: int, rank: int) -> str:
    return f"{FOLDER}/epoch-{epoch:05d}-rank-{rank:05d}.h5"


def save_rank(run: RunDir, epoch: int, rank: int, state: RankState, meta: dict[str, Any]) -> None:
    """Write this rank's state after ``epoch`` completed epochs (not yet committed)."""
    tensors: dict[str, torch.Tensor] = {}
    for name in ("generator", "discriminator"):
        module = getattr(state, name)
        tensors.update({f"{name}/{k}": v for k, v in module.state_dict().items()})
    tensors.update(_optimizer_tensors("g_optimizer", state.g_optimizer))
    tensors.update(_optimizer_tensors("d_optimizer", state.d_optimizer))
    tensors["rng"] = state.rng.get_state()
    groups = {
        "g_optimizer": state.g_optimizer.state_dict()["param_groups"],
        "d_optimizer": state.d_optimizer.state_dict()["param_groups"],
    }
    save_weights(run.file(rank_file(epoch, rank)), tensors, {**meta, "param_groups": groups})


def commit(run: RunDir, comm: MPI.Comm, epoch: int, writers: int, meta: dict[str, Any]) -> None:
    """Collective: once every writer's file is on disk, make ``epoch`` the one to resume from."""
    comm.Barrier()
    if comm.rank == 0:
        previous = read_marker(run) if run.file(MARKER).is_file() else None
        files = [rank_file(epoch, r) for r in range(writers)]
        run.write_json(MARKER, {**meta, "epoch": epoch, "files": files})
        for name in (previous or {}).get("files", []):
            if name not in files:
                run.file(name).unlink(missing_ok=True)


def read_marker(run: RunDir) -> dict[str, Any]:
    """The committed checkpoint of ``run`` (one clear error when there is none)."""
    path = run.file(MARKER)
    if not path.is_file():
        raise EvoganError(
            f"{run.path} holds no checkpoint ({MARKER} missing); it did not finish an epoch, "
            "start a new run instead"
        )
    return run.read_json(MARKER)


def load_rank(run: RunDir, file_name: str, state: RankState) -> dict[str, Any]:
    """Restore ``state`` in place from one rank file; returns the file's metadata."""
    tensors, meta = load_weights(run.file(file_name))
    for name in ("generator", "discriminator"):
        module = getattr(state, name)
        prefix = f"{name}/"
        own = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        module.load_state_dict(own)
    groups = meta["param_groups"]
    for name in ("g_optimizer", "d_optimizer"):
        getattr(state, name).load_state_dict(_optimizer_state(name, tensors, groups[name]))
    state.rng.set_state(tensors["rng"])
    return meta
