"""An island's complete state: :class:`IslandState` is exactly what a checkpoint writes and
reads (checkpoint format ``evogan-checkpoint-3``).

Everything a resumed island needs to continue exactly where it stopped: the strategy's loop
state (elite, hall of fame, logbook and epoch records, all random-stream states with the data
stream as of the start of the current epoch plus the batches already done in it, the
strategy's own state: step-size adaptation, the hybrid's RMSprop state), the elite's lineage,
immigrants received but not yet used, and the migration counters, topology generator and
(sync mode) delta-encoding tables. The island builds it from public accessors
(:meth:`~evogan.islands.island.Island.state`) and restores through them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from deap import tools

from evogan.engine.records import LoopState
from evogan.islands.codec import Immigrant, MigrantBytes, Tables
from evogan.islands.lineage import Lineage
from evogan.store import checkpoint as ckpt
from evogan.store.metrics import to_json

_LOOP_SECONDS = (
    "train_seconds",
    "wall_seconds",
    "eval_seconds",
    "train_cpu_seconds",
    "loop_seconds",
)
"""The loop's clocks a checkpoint keeps, so a resumed run's times go on from them."""


def _lineage_hex(lineage: Lineage | None) -> str | None:
    return None if lineage is None else lineage.to_bytes().hex()


def _lineage(text: str | None) -> Lineage | None:
    return None if text is None else Lineage.from_bytes(bytes.fromhex(text))


def _tables(tables: Tables) -> dict[str, list[str | None]]:
    """Delta-encoding tables (lineages per neighbour) as JSON."""
    return {str(key): [_lineage_hex(x) for x in value] for key, value in tables.items()}


def _untables(tables: dict[str, list[str | None]]) -> Tables:
    return {int(key): [_lineage(x) for x in value] for key, value in tables.items()}


class GrowingParts:
    """The parts of an island's state that only grow (logbook rows, epoch records), converted
    for checkpoints a row at a time: converting them whole at every checkpoint cost time in
    proportion to the run's length (float formatting dominated). The logbook becomes one
    (fields, generations) float64 array (integers up to 2**53 exact) with the fields that hold
    only integers; the epoch records a JSON array."""

    def __init__(self) -> None:
        self.fields: list[str] = []
        self.table = np.zeros((0, 0))
        self.integers: list[bool] = []
        self.records: list[str] = []

    def logbook(self, logbook: Any) -> tuple[np.ndarray, list[str]]:
        fields = list(logbook.header)
        done = self.table.shape[1]
        if fields != self.fields or done > len(logbook):  # another logbook: start over
            self.fields, self.table = fields, np.zeros((len(fields), 0))
            self.integers, done = [True] * len(fields), 0
        rows = logbook[done:]
        columns = [[entry.get(field) for entry in rows] for field in fields]
        self.integers = [
            flag and all(type(value) is int for value in column)
            for flag, column in zip(self.integers, columns, strict=True)
        ]
        block = [[np.nan if value is None else float(value) for value in c] for c in columns]
        block = np.asarray(block, dtype=np.float64).reshape(len(fields), len(rows))
        self.table = np.concatenate([self.table, block], axis=1)
        integers = [f for f, flag in zip(fields, self.integers, strict=True) if flag]
        return self.table, integers

    def epoch_records(self, records: list[dict[str, Any]]) -> str:
        if len(records) < len(self.records):
            self.records = []
        self.records += [to_json(record) for record in records[len(self.records) :]]
        return "[" + ",".join(self.records) + "]"


def _logbook(table: np.ndarray, fields: list[str], integers: list[str]) -> tools.Logbook:
    logbook = tools.Logbook()
    logbook.header = fields
    for values in table.T.tolist():
        row = {}
        for field, value in zip(fields, values, strict=True):
            if math.isnan(value):  # generations whose every fitness was NaN have no statistics
                row[field] = None
            else:
                row[field] = int(value) if field in integers else value
        logbook.record(**row)
    return logbook


def _number(value: float | None) -> float:
    """JSON wrote infinities as null (strict JSON); they come back as +inf."""
    return float("inf") if value is None else float(value)


@dataclass
class IslandState:
    """One island's checkpoint; :meth:`to_checkpoint` and :meth:`from_checkpoint` convert."""

    island: int
    islands: int
    loop: LoopState
    elite_lineage: Lineage | None
    immigrants: list[Immigrant]
    immigrants_used: int
    immigrant_wins: int
    island_seconds: float
    island_cpu_seconds: float
    migrant_bytes: MigrantBytes
    migration: dict[str, Any] | None
    sent: Tables | None = None
    """Sync islands only (async islands resume apart: both ends start the deltas over)."""
    known: Tables | None = None

    def to_checkpoint(
        self, growing: GrowingParts | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, str]]:
        """``(arrays, meta, meta parts as JSON text)`` for
        :func:`~evogan.store.checkpoint.write_checkpoint`; pass the same ``growing`` each time
        to convert only what is new since the last checkpoint."""
        growing = growing or GrowingParts()
        loop = self.loop
        logbook, integers = growing.logbook(loop.logbook)
        elite = [] if loop.elite is None else [loop.elite]
        members = [genome for genome, _ in loop.hall_of_fame]
        arrived = [genome for genome, _ in self.immigrants]
        genomes = [g.numpy() for g in (*elite, *members, *arrived)]
        # few datasets: each costs HDF5 time whatever its size
        arrays: dict[str, np.ndarray] = {
            "streams": torch.stack(loop.streams).numpy(),
            "logbook": logbook,
            "genomes": np.stack(genomes) if genomes else np.zeros((0, 0), dtype=np.float32),
        }
        meta: dict[str, Any] = {
            "island": self.island,
            "islands": self.islands,
            "generation": loop.generation,
            "epoch": loop.epoch,
            "batch_in_epoch": loop.batch,
            "elite_fitness": loop.elite_fitness,
            "elite_lineage": _lineage_hex(self.elite_lineage),
            "evaluations": loop.evaluations,
            **{name: getattr(loop, name) for name in _LOOP_SECONDS},
            "hall_of_fame_fitness": [fitness for _, fitness in loop.hall_of_fame],
            "logbook_fields": list(loop.logbook.header),
            "logbook_integers": integers,
            "genome_rows": {"elite": len(elite), "hall_of_fame": len(members)},
            "immigrant_lineages": [_lineage_hex(lineage) for _, lineage in self.immigrants],
            "immigrants_used": self.immigrants_used,
            "immigrant_wins": self.immigrant_wins,
            "island_seconds": self.island_seconds,
            "island_cpu_seconds": self.island_cpu_seconds,
            "migrant_bytes": vars(self.migrant_bytes),
            "migration": self.migration,
        }
        if self.sent is not None and self.known is not None:
            meta["sent_lineages"] = _tables(self.sent)
            meta["known_lineages"] = _tables(self.known)
        if loop.strategy is not None:
            strategy = dict(loop.strategy)
            saved = strategy.pop("optimizer", None)
            if saved is not None:
                for name, value in saved["state"].get(0, {}).items():
                    arrays[f"optimizer_{name}"] = torch.as_tensor(value).numpy()
                meta["optimizer_groups"] = saved["param_groups"]
                meta["gradient_steps"] = strategy.pop("gradient_steps")
            trained = strategy.pop("trained", None)
            if trained is not None:
                arrays["strategy_trained"] = trained.numpy()
            meta["strategy"] = strategy
        return arrays, meta, {"epoch_records": growing.epoch_records(loop.epoch_records)}

    @classmethod
    def from_checkpoint(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> IslandState:
        """The state :meth:`to_checkpoint` wrote (as :func:`~evogan.store.checkpoint.
        read_checkpoint` returns it)."""
        streams = list(torch.from_numpy(arrays["streams"]))
        genomes = iter(torch.from_numpy(arrays["genomes"]))
        rows = meta["genome_rows"]
        elite = next(genomes).clone() if rows["elite"] else None
        fitness = [_number(value) for value in meta["hall_of_fame_fitness"]]
        hall_of_fame = [(next(genomes).clone(), value) for value in fitness[: rows["hall_of_fame"]]]
        immigrants = [(next(genomes).clone(), _lineage(t)) for t in meta["immigrant_lineages"]]
        fields, integers = meta["logbook_fields"], meta["logbook_integers"]
        loop = LoopState(
            generation=int(meta["generation"]),
            epoch=int(meta["epoch"]),
            batch=int(meta["batch_in_epoch"]),
            streams=[stream.clone() for stream in streams],
            elite=elite,
            elite_fitness=_number(meta["elite_fitness"]),
            evaluations=int(meta["evaluations"]),
            train_seconds=float(meta["train_seconds"]),
            eval_seconds=float(meta["eval_seconds"]),
            train_cpu_seconds=float(meta["train_cpu_seconds"]),
            loop_seconds=float(meta["loop_seconds"]),
            hall_of_fame=hall_of_fame,
            logbook=_logbook(arrays["logbook"], fields, integers),
            epoch_records=list(meta["epoch_records"]),
            strategy=_strategy(arrays, meta),
            # a checkpoint without it: its training time is the closest record of its wall time
            wall_seconds=float(meta.get("wall_seconds", meta["train_seconds"])),
        )
        return cls(
            island=int(meta["island"]),
            islands=int(meta["islands"]),
            loop=loop,
            elite_lineage=_lineage(meta["elite_lineage"]),
            immigrants=immigrants,
            immigrants_used=int(meta["immigrants_used"]),
            immigrant_wins=int(meta["immigrant_wins"]),
            island_seconds=float(meta["island_seconds"]),
            island_cpu_seconds=float(meta["island_cpu_seconds"]),
            migrant_bytes=MigrantBytes(**meta["migrant_bytes"]),
            migration=meta["migration"],
            sent=_untables(meta["sent_lineages"]) if "sent_lineages" in meta else None,
            known=_untables(meta["known_lineages"]) if "known_lineages" in meta else None,
        )


def _strategy(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, Any] | None:
    """What :meth:`~evogan.engine.loop.Evolution.strategy_state` gave: the (1+lambda)'s
    step-size adaptation and counters (JSON), with the hybrid's RMSprop state and trained
    weights (arrays); None for a strategy that keeps nothing."""
    if "optimizer_groups" not in meta and "strategy" not in meta:
        return None
    state = dict(meta.get("strategy") or {})
    if "optimizer_groups" in meta:
        tensors = {
            name.removeprefix("optimizer_"): torch.from_numpy(value)
            for name, value in arrays.items()
            if name.startswith("optimizer_")
        }
        state["optimizer"] = {"state": {0: tensors}, "param_groups": meta["optimizer_groups"]}
        state["gradient_steps"] = int(meta["gradient_steps"])
    if "strategy_trained" in arrays:
        state["trained"] = torch.from_numpy(arrays["strategy_trained"])
    return state


class CheckpointWriter:
    """Writes an island's states under ``run_path`` (``checkpoints/island-NNNN/``), keeping
    the newest ``keep``."""

    def __init__(self, run_path: str | Path, island: int, keep: int) -> None:
        self.run_path = Path(run_path)
        self.island = island
        self.keep = keep
        self.growing = GrowingParts()

    def __call__(self, state: IslandState) -> None:
        arrays, meta, parts = state.to_checkpoint(self.growing)
        path = ckpt.checkpoint_path(self.run_path, self.island, state.loop.generation)
        ckpt.write_checkpoint(path, arrays, meta, parts)
        ckpt.prune(self.run_path, self.island, self.keep)


def read_state(run_path: str | Path, island: int, generation: int) -> IslandState:
    """The state ``island`` checkpointed at ``generation``."""
    arrays, meta = ckpt.read_checkpoint(ckpt.checkpoint_path(run_path, island, generation))
    return IslandState.from_checkpoint(arrays, meta)
