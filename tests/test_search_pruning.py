"""Pruning under real ``mpirun``: GA (``-n 4``, 2 groups x 2 ranks, so a rung's decision
reaches both ranks of a group) and Optuna (``-n 2``, two 1-rank groups) campaigns stop
candidates at a rung and record them with it; the GA campaign's Optuna journal opens with
Optuna's loader and holds the rung scores as intermediate values."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import yaml
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from evogan.store.weights import load_weights
from tests.test_search_campaign import _config, _rows, _search

# Rungs at 1 step, then the full 4: with factor 4 only the best score so far at the rung
# goes on (1 of fewer than 8), so most candidates of a campaign of 8 are pruned.
PRUNING = {"kind": "successive_halving", "min_budget": 1, "reduction_factor": 4}


def _campaign(tmp_path: Path, name: str, ranks: int = 4, **changes) -> tuple[Path, list[dict]]:
    config = _config(tmp_path, pruning=PRUNING, final={"top": 0}, **changes)
    raw = yaml.safe_load(config.read_text())
    raw["budget"]["amount"] = 4
    config.write_text(yaml.safe_dump(raw))
    out = tmp_path / name
    result = _search(tmp_path, config, "--run-dir", str(out), ranks=ranks)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, [r for r in _rows(out) if r["status"] != "invalid"]


def _check_rungs(out: Path, trained: list[dict]) -> list[dict]:
    """Pruned rows carry their rung and only its score; complete ones the whole curve."""
    pruned = [r for r in trained if r["status"] == "pruned"]
    assert pruned, "a campaign of 8 with factor 4 must prune some candidates"
    for row in pruned:
        assert row["rung"] == 0 and list(row["intermediate"]) == ["1"]
        assert row["fitness"] is None and row["reason"].startswith("pruned")
        metrics = out / "candidates" / row["id"] / "member-0" / "metrics.jsonl"
        epochs = [json.loads(line) for line in metrics.read_text().splitlines()]
        assert [e["step"] for e in epochs if e["kind"] == "epoch"] == [1]  # stopped at 1 step
        rung_file = out / "candidates" / row["id"] / "rungs" / "rung-0-member-0-rank-0.h5"
        _, meta = load_weights(rung_file)  # usable with evogan generate: it knows its ranges
        _, last = load_weights(out / "candidates" / row["id"] / "member-0" / "last_model.h5")
        assert meta["rung"] == 0 and meta["trained_on"] == last["trained_on"]
    for row in trained:
        if row["status"] == "ok":
            assert list(row["intermediate"]) == ["1", "4"] and row["rung"] is None
            assert row["intermediate"]["4"] == row["score_mean"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status_counts"]["pruned"] == len(pruned) == summary["totals"]["pruned"]
    assert all(r["status"] == "ok" for r in summary["best"])
    return pruned


def _study(out: Path) -> optuna.Study:
    storage = JournalStorage(JournalFileBackend(str(out / "study.journal")))
    return optuna.load_study(study_name="evogan-search", storage=storage)


def test_ga_campaign_prunes_children_and_writes_an_optuna_journal(tmp_path: Path) -> None:
    ga = {"population": 2, "offspring": 2, "invalid": "repair", "migration": {"migrants": 0}}
    out, trained = _campaign(tmp_path, "ga", candidates=8, ga=ga)
    assert len(trained) == 8
    pruned = _check_rungs(out, trained)
    assert all(r["generation"] > 0 for r in pruned)  # the first generation is never pruned

    study = _study(out)  # written by world rank 0 from the table: one trial per row
    rows = {r["id"]: r for r in _rows(out)}
    trials = {t.user_attrs["candidate"]: t for t in study.trials}
    assert set(trials) == set(rows)
    for candidate, trial in trials.items():
        row = rows[candidate]
        state = {"ok": "COMPLETE", "pruned": "PRUNED"}.get(row["status"], "FAIL")
        assert trial.state.name == state and trial.user_attrs["status"] == row["status"]
        expected = {int(k): v for k, v in (row.get("intermediate") or {}).items()}
        assert trial.intermediate_values == expected
        if state == "COMPLETE":
            assert (
                trial.value == row["fitness"]
                and trial.params["g_filters"] == row["genome"]["g_filters"]
            )
    assert any(t.intermediate_values for t in study.trials)


def test_optuna_campaign_prunes_through_optunas_pruner(tmp_path: Path) -> None:
    tpe = {"backend": "optuna", "candidates": 8, "ranks_per_group": 1}
    out, trained = _campaign(tmp_path, "tpe", ranks=2, **tpe)
    assert len(trained) == 8
    assert {tuple(r["ranks"]) for r in trained} == {(0,), (1,)}  # both groups trained
    pruned = _check_rungs(out, trained)
    assert all("Optuna's successive halving pruner" in r["reason"] for r in pruned)
    study = _study(out)
    by_number = {t.number: t for t in study.trials}
    for row in trained:
        trial = by_number[row["trial"]]
        assert trial.intermediate_values[1] == row["intermediate"]["1"]
        if row["status"] == "pruned":
            assert trial.state.name == "PRUNED" and trial.user_attrs["rung"] == 0
        elif row["status"] == "ok":
            assert trial.state.name == "COMPLETE" and trial.intermediate_values[4] == row["fitness"]
