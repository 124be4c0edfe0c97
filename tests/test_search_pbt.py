"""Population Based Training under real ``mpirun -n 4`` (2 workers x 2 ranks): exploit/explore
starts the copying worker from the source's checkpoint weights with the source's perturbed
hyper-parameters, records the lineage in the table, summary.json and the Optuna journal (one
trial per worker, segments as intermediate values), and a resumed campaign re-trains only the
missing segment and decides exactly as before. A population of one rank group is refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from evogan.search.inherit import INHERITED, network_digest
from evogan.store import load_weights
from evogan.store.lock import RUNNING, write_status
from tests.conftest import REPO, evogan
from tests.test_search_campaign import TINY, _resume, _rows, _search

GENES = [
    {"name": "g_lr", "type": "float", "path": "g_lr", "low": 1e-4, "high": 1e-2, "log": True},
    {"name": "d_lr", "type": "float", "path": "d_lr", "low": 1e-4, "high": 1e-2, "log": True},
    {"name": "energy", "type": "float", "path": "loss_weights.energy", "low": 0.01, "high": 1.0},
]
TIMING = ("elapsed_s", "finished", "wall_s", "train_s", "eval_s", "session")


def _config(tmp_path: Path, **changes) -> Path:
    raw = yaml.safe_load(TINY.read_text())
    raw.update(backend="pbt", space=GENES, base=str(REPO / "configs" / "gan3d_tiny.yaml"))
    raw["budget"] = {"kind": "steps", "amount": 3}  # three segments of one step
    raw["fitness"] = {"members": 1, "beta": 0.5, "test_events": 20, "energy_bins": 2}
    raw["final"] = {"top": 0}
    raw["pbt"] = {"interval": 1, "quantile": 0.25, "factors": [0.8, 1.2]}
    raw.update(changes)
    path = tmp_path / "pbt.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _member(out: Path, row_id: str) -> Path:
    return out / "candidates" / row_id / "member-0"


def _digests(run: Path) -> dict[str, str]:
    """Network digest of every file of ``run``'s committed checkpoint."""
    marker = json.loads((run / "checkpoint.json").read_text())
    return {name: network_digest(load_weights(run / name)[0]) for name in marker["files"]}


def _check_exploit(out: Path, rows: dict[str, dict], row: dict) -> None:
    """``row`` copied its source: weights from the source's checkpoint, perturbed genome."""
    source = rows[row["exploit"]["from"]]
    own = rows[f"w{row['worker']:02d}s{row['segment'] - 1:03d}"]
    assert row["inherit_from"] == source["id"] and source["segment"] == row["segment"] - 1
    worst = math.inf
    assert source["fitness"] <= (own["fitness"] or worst)  # the better worker is copied
    start = json.loads((_member(out, row["id"]) / INHERITED).read_text())
    assert start["from"] == str(_member(out, source["id"]))
    assert start["networks"] == _digests(_member(out, source["id"]))  # the source's weights
    assert start["networks"] != _digests(_member(out, own["id"]))  # not its own
    for gene in GENES:
        name, move = gene["name"], row["exploit"]["perturbation"][gene["name"]]
        value = row["genome"][name]
        if move == "resample":
            assert gene["low"] <= value <= gene["high"]
        else:
            expected = min(max(source["genome"][name] * move, gene["low"]), gene["high"])
            assert value == pytest.approx(expected)


@pytest.mark.slow
def test_pbt_copies_weights_and_hyperparameters_and_records_lineage(tmp_path: Path) -> None:
    out = tmp_path / "pbt"  # two workers of one rank each
    config = _config(tmp_path, ranks_per_group=1)
    result = _search(tmp_path, config, "--run-dir", str(out), ranks=2)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {r["id"]: r for r in _rows(out)}
    assert sorted(rows) == [f"w{w:02d}s{s:03d}" for w in range(2) for s in range(3)]
    assert {tuple(r["ranks"]) for r in rows.values()} == {(0,), (1,)}
    for segment in (1, 2):
        pair = [rows[f"w{w:02d}s{segment:03d}"] for w in range(2)]
        copied = [r for r in pair if r["exploit"]]
        assert len(copied) == 1  # the worst quarter of 2 workers: one
        _check_exploit(out, rows, copied[0])
        kept = next(r for r in pair if not r["exploit"])
        before = rows[f"w{kept['worker']:02d}s{segment - 1:03d}"]
        assert kept["inherit_from"] == before["id"] and kept["genome"] == before["genome"]
        start = json.loads((_member(out, kept["id"]) / INHERITED).read_text())
        assert start["networks"] == _digests(_member(out, before["id"]))
    for row in rows.values():  # every segment trained one step on top of the one before
        metrics = _member(out, row["id"]) / "metrics.jsonl"
        records = [json.loads(line) for line in metrics.read_text().splitlines()]
        assert [r["kind"] for r in records] == (["resume"] if row["segment"] else []) + ["epoch"]
        assert row["partial"] == (row["segment"] < 2)
        assert row["intermediate"] == {str(row["segment"] + 1): row["score_mean"]}

    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["candidates_trained"] == 6
    assert {b["id"] for b in summary["best"]} <= {"w00s002", "w01s002"}  # whole budget only
    lineage = summary["pbt"]["lineage"]
    assert summary["pbt"]["workers"] == 2 and summary["pbt"]["segments"] == 3
    for worker in ("w00", "w01"):
        copies = [r for r in rows.values() if r["id"].startswith(worker) and r["exploit"]]
        assert [e["segment"] for e in lineage[worker]] == sorted(r["segment"] for r in copies)
    assert sum(len(v) for v in lineage.values()) == 2

    storage = JournalStorage(JournalFileBackend(str(out / "study.journal")))
    study = optuna.load_study(study_name="evogan-search", storage=storage)
    trials = {t.user_attrs["candidate"]: t for t in study.trials}
    assert set(trials) == {"w00", "w01"}  # one trial per worker
    for worker, trial in trials.items():
        mine = [rows[f"{worker}s{s:03d}"] for s in range(3)]
        assert trial.intermediate_values == {s + 1: r["score_mean"] for s, r in enumerate(mine)}
        assert trial.state.name == "COMPLETE" and trial.value == mine[-1]["fitness"]
        assert trial.params["g_lr"] == mine[-1]["genome"]["g_lr"]
        assert trial.user_attrs["lineage"] == lineage[worker]
        assert trial.user_attrs["schedule"] == [r["genome"] for r in mine]

    # A session killed before w01's last segment: the resume trains that segment alone, the same.
    table = out / "table" / "worker-001.jsonl"
    lines = table.read_text().splitlines(keepends=True)
    assert json.loads(lines[-1])["id"] == "w01s002"
    table.write_text("".join(lines[:-1]))
    write_status(out, RUNNING)  # as a killed session leaves it
    result = _resume(tmp_path, out, "--force", ranks=2)
    assert result.returncode == 0, result.stderr[-3000:]
    after = {r["id"]: r for r in _rows(out)}
    assert sorted(after) == sorted(rows)
    assert [r["id"] for r in after.values() if r["session"] == 1] == ["w01s002"]
    for row_id, row in after.items():
        untimed = {k: v for k, v in row.items() if k not in TIMING}
        assert untimed == {k: v for k, v in rows[row_id].items() if k not in TIMING}
    assert math.isfinite(after["w01s002"]["fitness"])


def test_a_population_of_one_rank_group_is_refused_before_anything_starts(tmp_path: Path) -> None:
    out = tmp_path / "one"
    config = str(_config(tmp_path))
    result = evogan("search", config, "--set", "ranks_per_group=1", "--run-dir", str(out))
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "ranks_per_group = 1 on 1 rank(s) gives 1" in lines[0]
    assert "at least 2 rank groups" in lines[0] and "mpirun -n 2 or more" in lines[0]
    assert not out.exists()
