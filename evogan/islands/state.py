"""An island's complete state as checkpoint arrays + JSON meta, and back.

Everything a resumed island needs to continue exactly where it stopped: elite (and its
lineage), hall of fame, logbook and epoch records, all random-stream states (the data stream as
of the start of the current epoch plus the batches already done in it), migration counters and
the topology generator, immigrants received but not yet used, and the hybrid's RMSprop state.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from evogan.islands.island import IslandModel, MigrantBytes
from evogan.islands.lineage import Lineage
from evogan.store.metrics import to_json

_STREAMS = ("init", "mutation", "data")


def _lineage_hex(lineage: Lineage | None) -> str | None:
    return None if lineage is None else lineage.to_bytes().hex()


def _lineage(text: str | None) -> Lineage | None:
    return None if text is None else Lineage.from_bytes(bytes.fromhex(text))


def _tables(tables: dict[int, list[Lineage | None]]) -> dict[str, list[str | None]]:
    """Delta-encoding tables (lineages per neighbour) as JSON."""
    return {str(key): [_lineage_hex(x) for x in value] for key, value in tables.items()}


def _untables(tables: dict[str, list[str | None]]) -> dict[int, list[Lineage | None]]:
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


def _logbook_rows(table: np.ndarray, fields: list[str], integers: list[str]) -> list[dict]:
    rows = []
    for values in table.T.tolist():
        row = {}
        for field, value in zip(fields, values, strict=True):
            if math.isnan(value):  # generations whose every fitness was NaN have no statistics
                row[field] = None
            else:
                row[field] = int(value) if field in integers else value
        rows.append(row)
    return rows


def island_state(
    island: IslandModel, growing: GrowingParts | None = None
) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, str]]:
    """``(arrays, meta, meta parts as JSON text)`` of ``island`` after its last finished
    generation (:func:`~evogan.store.checkpoint.write_checkpoint` takes all three); pass the
    same ``growing`` each time to convert only what is new since the last checkpoint."""
    growing = growing or GrowingParts()
    states = [getattr(island.streams, name).get_state() for name in _STREAMS]
    logbook, integers = growing.logbook(island.logbook)
    elite = [] if island.elite is None else [island.elite]
    members = [member.genome for member in island.hall_of_fame]
    arrived = [genome for genome, _ in island.immigrants]
    # few datasets: each costs HDF5 time whatever its size
    arrays: dict[str, np.ndarray] = {
        "streams": torch.stack([*states, island.epoch_data_state]).numpy(),
        "logbook": logbook,
        "genomes": np.stack([g.numpy() for g in (*elite, *members, *arrived)])
        if elite or members or arrived
        else np.zeros((0, 0), dtype=np.float32),
    }
    meta: dict[str, Any] = {
        "island": island.island.index,
        "islands": island.island.count,
        "generation": island.generation,
        "epoch": island.epoch_records[-1]["epoch"] + 1 if island.epoch_records else 0,
        "batch_in_epoch": island.batch_in_epoch,
        "elite_fitness": island.elite_fitness,
        "elite_lineage": _lineage_hex(island.elite_lineage),
        "evaluations": island.evaluations,
        "train_seconds": island.train_seconds,
        "eval_seconds": island.eval_seconds,
        "hall_of_fame_fitness": [m.fitness.values[0] for m in island.hall_of_fame],
        "logbook_fields": list(island.logbook.header),
        "logbook_integers": integers,
        "genome_rows": {"elite": len(elite), "hall_of_fame": len(members)},
        "immigrant_lineages": [_lineage_hex(lineage) for _, lineage in island.immigrants],
        "immigrants_used": island.immigrants_used,
        "immigrant_wins": island.immigrant_wins,
        "island_seconds": island.island_seconds,
        "island_cpu_seconds": island.island_cpu_seconds,
        "train_cpu_seconds": island.train_cpu_seconds,
        "loop_seconds": island.loop_seconds,
        "migrant_bytes": vars(island.migrant_bytes),
        "migration": None if island.migration is None else island.migration.state(),
    }
    if island.migration is not None and island.migration.mode == "sync":  # async: unused
        meta["sent_lineages"] = _tables(island._sent)
        meta["known_lineages"] = _tables(island._known)
    optimizer = getattr(island, "_optimizer", None)
    if optimizer is not None:
        saved = optimizer.state_dict()
        for name, value in saved["state"].get(0, {}).items():
            arrays[f"optimizer_{name}"] = torch.as_tensor(value).numpy()
        meta["optimizer_groups"] = saved["param_groups"]
        meta["gradient_steps"] = island.gradient_steps
    return arrays, meta, {"epoch_records": growing.epoch_records(island.epoch_records)}


def _number(value: float | None) -> float:
    """JSON wrote infinities as null (strict JSON); they come back as +inf."""
    return float("inf") if value is None else float(value)


def restore_island(
    island: IslandModel, arrays: dict[str, np.ndarray], meta: dict[str, Any]
) -> None:
    """Put ``island`` (freshly built with the same config) into the checkpointed state."""
    streams = torch.from_numpy(arrays["streams"])
    for index, name in enumerate(_STREAMS):
        getattr(island.streams, name).set_state(streams[index].clone())
    island.epoch_data_state = streams[len(_STREAMS)].clone()
    genomes = iter(torch.from_numpy(arrays["genomes"]))
    rows = meta["genome_rows"]
    island.start_epoch = int(meta["epoch"])
    island.start_batch = int(meta["batch_in_epoch"])
    island.batch_in_epoch = island.start_batch
    island.streams.data.set_state(island.epoch_data_state.clone())
    island.generation = int(meta["generation"])
    island.last_checkpoint = island.generation
    island.elite = next(genomes).clone() if rows["elite"] else None
    island.elite_fitness = _number(meta["elite_fitness"])
    island.elite_lineage = _lineage(meta["elite_lineage"])
    island.evaluations = int(meta["evaluations"])
    island.train_seconds = float(meta["train_seconds"])
    island.eval_seconds = float(meta["eval_seconds"])
    fitness = [_number(value) for value in meta["hall_of_fame_fitness"]]
    hof = [next(genomes).clone() for _ in range(rows["hall_of_fame"])]
    island.restore_hall_of_fame(hof, fitness)
    table = arrays["logbook"]
    for entry in _logbook_rows(table, meta["logbook_fields"], meta["logbook_integers"]):
        island.logbook.record(**entry)
    island.epoch_records = list(meta["epoch_records"])
    island.immigrants = [
        (next(genomes).clone(), _lineage(text)) for text in meta["immigrant_lineages"]
    ]
    island.immigrants_used = int(meta["immigrants_used"])
    island.immigrant_wins = int(meta["immigrant_wins"])
    island.island_seconds = float(meta["island_seconds"])
    island.island_cpu_seconds = float(meta["island_cpu_seconds"])
    island.train_cpu_seconds = float(meta["train_cpu_seconds"])
    island.loop_seconds = float(meta["loop_seconds"])
    island.migrant_bytes = MigrantBytes(**meta["migrant_bytes"])
    if island.migration is not None and meta["migration"] is not None:
        island.migration.restore(meta["migration"])
        if island.migration.mode == "sync":  # async islands resume apart: both ends start over
            island._sent = _untables(meta["sent_lineages"])
            island._known = _untables(meta["known_lineages"])
    if "optimizer_groups" in meta and island.elite is not None:
        island._weights = torch.nn.Parameter(island.elite.detach().clone())
        island._optimizer = torch.optim.RMSprop([island._weights], lr=island.lr)
        state = {
            name.removeprefix("optimizer_"): torch.from_numpy(value)
            for name, value in arrays.items()
            if name.startswith("optimizer_")
        }
        island._optimizer.load_state_dict(
            {"state": {0: state}, "param_groups": meta["optimizer_groups"]}
        )
        island.gradient_steps = int(meta["gradient_steps"])
