"""The Optuna journal of a campaign's table (no MPI): one trial per row, opened by Optuna's own
loader, with parameters, states, intermediate values and user attributes; each row once."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import optuna
import yaml
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from evogan.config.base import validate
from evogan.config.search import SearchConfig
from evogan.search import Space, resolve_base
from evogan.search.journal import STUDY_NAME, JournalMirror
from tests.conftest import REPO

TINY = REPO / "configs" / "arch_search_tiny.yaml"


def _space() -> Space:
    raw = yaml.safe_load(TINY.read_text())
    raw["base"] = str(REPO / "configs" / "gan3d_tiny.yaml")
    config = resolve_base(validate(SearchConfig, raw))
    return Space(config.space, config.spec)


def _row(space: Space, index: int, status: str, fitness: float, **extra) -> dict:
    genome = space.sample(np.random.default_rng(index))
    return {
        "id": f"i00g000c{index:02d}",
        "status": status,
        "fitness": fitness if math.isfinite(fitness) else None,
        "objectives": [fitness if math.isfinite(fitness) else None],
        "genome": space.active(genome),
        "reason": "" if status == "ok" else f"{status} reason",
        "params": 100 + index,
        "flops": 200 + index,
        "member_scores": [fitness] if math.isfinite(fitness) else [],
        "member_seeds": [7],
        "session": 0,
        **extra,
    }


def test_table_rows_become_finished_trials_once(tmp_path: Path) -> None:
    space = _space()
    rows = [
        _row(space, 0, "ok", 2.5, intermediate={"1": 3.0, "4": 2.5}),
        _row(space, 1, "pruned", math.inf, intermediate={"1": 9.0}, rung=0),
        _row(space, 2, "nan", math.inf),
        _row(space, 3, "invalid", math.inf),
    ]
    path = tmp_path / "study.journal"
    mirror = JournalMirror(path, space, 1)
    assert mirror.add(rows[:2]) == 2
    assert JournalMirror(path, space, 1).add(rows) == 2  # a resumed session adds the rest

    storage = JournalStorage(JournalFileBackend(str(path)))
    study = optuna.load_study(study_name=STUDY_NAME, storage=storage)
    trials = {t.user_attrs["candidate"]: t for t in study.trials}
    assert len(study.trials) == 4 and set(trials) == {r["id"] for r in rows}
    ok, pruned = trials[rows[0]["id"]], trials[rows[1]["id"]]
    assert ok.state.name == "COMPLETE" and ok.value == 2.5
    assert ok.intermediate_values == {1: 3.0, 4: 2.5}
    assert pruned.state.name == "PRUNED" and pruned.intermediate_values == {1: 9.0}
    assert pruned.user_attrs["status"] == "pruned" and pruned.user_attrs["rung"] == 0
    assert {trials[r["id"]].state.name for r in rows[2:]} == {"FAIL"}
    assert ok.user_attrs["params"] == 100 and ok.user_attrs["member_seeds"] == [7]
    # the parameters are the Optuna backend's names and values (lists as JSON labels)
    genome = rows[0]["genome"]
    assert ok.params["g_filters"] == genome["g_filters"]
    assert ok.params["g_kernel"] == json.dumps(genome["g_kernel"])
    assert ok.params["d_filters_0"] == genome["d_filters"][0]
    assert study.best_trial.user_attrs["candidate"] == rows[0]["id"]
