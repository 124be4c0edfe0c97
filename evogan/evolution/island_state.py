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

from evogan.evolution.islands import IslandModel, MigrantBytes
from evogan.evolution.lineage import Lineage

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


def _logbook_columns(island: IslandModel) -> dict[str, np.ndarray]:
    """The logbook as one array per field: JSON for a row per generation made every checkpoint
    cost time in proportion to the run's length."""
    columns = {}
    for field in island.logbook.header:
        values = island.logbook.select(field)
        if all(isinstance(value, int) for value in values):
            columns[f"logbook_{field}"] = np.asarray(values, dtype=np.int64)
        else:
            floats = [np.nan if value is None else float(value) for value in values]
            columns[f"logbook_{field}"] = np.asarray(floats, dtype=np.float64)
    return columns


def _logbook_rows(arrays: dict[str, np.ndarray], fields: list[str]) -> list[dict[str, Any]]:
    columns = {field: arrays[f"logbook_{field}"].tolist() for field in fields}
    rows = [
        dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)
    ]
    for row in rows:  # generations whose every fitness was NaN have no statistics
        row.update({k: None for k, v in row.items() if isinstance(v, float) and math.isnan(v)})
    return rows


def island_state(island: IslandModel) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(arrays, meta)`` of ``island`` after its last finished generation."""
    arrays: dict[str, np.ndarray] = {
        f"stream_{name}": getattr(island.streams, name).get_state().numpy() for name in _STREAMS
    }
    arrays["stream_data_epoch"] = island.epoch_data_state.numpy()
    arrays.update(_logbook_columns(island))
    if island.elite is not None:
        arrays["elite"] = island.elite.numpy()
    for index, member in enumerate(island.hall_of_fame):
        arrays[f"hall_of_fame_{index}"] = member.genome.numpy()
    for index, (genome, _) in enumerate(island.immigrants):
        arrays[f"immigrant_{index}"] = genome.numpy()
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
        "epoch_records": island.epoch_records,
        "immigrant_lineages": [_lineage_hex(lineage) for _, lineage in island.immigrants],
        "immigrants_used": island.immigrants_used,
        "immigrant_wins": island.immigrant_wins,
        "island_seconds": island.island_seconds,
        "migrant_bytes": vars(island.migrant_bytes),
        "migration": None if island.migration is None else island.migration.state(),
        "sent_lineages": _tables(island._sent),
        "known_lineages": _tables(island._known),
    }
    optimizer = getattr(island, "_optimizer", None)
    if optimizer is not None:
        saved = optimizer.state_dict()
        for name, value in saved["state"].get(0, {}).items():
            arrays[f"optimizer_{name}"] = torch.as_tensor(value).numpy()
        meta["optimizer_groups"] = saved["param_groups"]
        meta["gradient_steps"] = island.gradient_steps
    return arrays, meta


def _number(value: float | None) -> float:
    """JSON wrote infinities as null (strict JSON); they come back as +inf."""
    return float("inf") if value is None else float(value)


def restore_island(
    island: IslandModel, arrays: dict[str, np.ndarray], meta: dict[str, Any]
) -> None:
    """Put ``island`` (freshly built with the same config) into the checkpointed state."""
    for name in _STREAMS:
        getattr(island.streams, name).set_state(torch.from_numpy(arrays[f"stream_{name}"]))
    island.epoch_data_state = torch.from_numpy(arrays["stream_data_epoch"])
    island.start_epoch = int(meta["epoch"])
    island.start_batch = int(meta["batch_in_epoch"])
    island.batch_in_epoch = island.start_batch
    island.streams.data.set_state(island.epoch_data_state.clone())
    island.generation = int(meta["generation"])
    island.last_checkpoint = island.generation
    island.elite = torch.from_numpy(arrays["elite"]) if "elite" in arrays else None
    island.elite_fitness = _number(meta["elite_fitness"])
    island.elite_lineage = _lineage(meta["elite_lineage"])
    island.evaluations = int(meta["evaluations"])
    island.train_seconds = float(meta["train_seconds"])
    island.eval_seconds = float(meta["eval_seconds"])
    fitness = [_number(value) for value in meta["hall_of_fame_fitness"]]
    hof = [torch.from_numpy(arrays[f"hall_of_fame_{i}"]) for i in range(len(fitness))]
    island.restore_hall_of_fame(hof, fitness)
    for entry in _logbook_rows(arrays, meta["logbook_fields"]):
        island.logbook.record(**entry)
    island.epoch_records = list(meta["epoch_records"])
    island.immigrants = [
        (torch.from_numpy(arrays[f"immigrant_{i}"]), _lineage(text))
        for i, text in enumerate(meta["immigrant_lineages"])
    ]
    island.immigrants_used = int(meta["immigrants_used"])
    island.immigrant_wins = int(meta["immigrant_wins"])
    island.island_seconds = float(meta["island_seconds"])
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
