"""Pruning under real ``mpirun``: GA (``-n 4``, 2 groups x 2 ranks, so a rung's decision
reaches both ranks of a group) and Optuna (``-n 2``, two 1-rank groups) campaigns stop
candidates at a rung and record them with it; the GA campaign's Optuna journal opens with
Optuna's loader and holds the rung scores as intermediate values.

The Optuna campaign is the suite's one Optuna campaign, so it also shows that the study opens
with Optuna, that invalid genomes never train, what the campaign prints (candidate k of N, group
labels, the data said once, no Optuna INFO) and that a resume re-runs a trial its study owner
left RUNNING."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from evogan.search import Space
from evogan.store.weights import load_weights
from tests.test_search_campaign import (
    TINY,
    _config,
    _resume,
    _rows,
    _search,
    _space_and_base,
    with_window_kernel,
)

# Rungs at 1 step, then the full 4: with factor 4 only the best score so far at the rung
# goes on (1 of fewer than 8), so most candidates of a campaign of 8 are pruned.
PRUNING = {"kind": "successive_halving", "min_budget": 1, "reduction_factor": 4}


def _campaign(
    tmp_path: Path, name: str, ranks: int = 4, **changes
) -> tuple[Path, list[dict], subprocess.CompletedProcess[str]]:
    config = _config(tmp_path, pruning=PRUNING, final={"top": 0}, **changes)
    raw = yaml.safe_load(config.read_text())
    raw["budget"]["amount"] = 4
    config.write_text(yaml.safe_dump(raw))
    out = tmp_path / name
    result = _search(tmp_path, config, "--run-dir", str(out), ranks=ranks)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, [r for r in _rows(out) if r["status"] != "invalid"], result


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


@pytest.mark.slow
def test_ga_campaign_prunes_children_and_writes_an_optuna_journal(tmp_path: Path) -> None:
    ga = {"population": 2, "offspring": 2, "invalid": "repair", "migration": {"migrants": 0}}
    out, trained, _ = _campaign(tmp_path, "ga", candidates=8, ga=ga)
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


@pytest.mark.slow
def test_optuna_campaign_prunes_reports_and_resumes_an_abandoned_trial(tmp_path: Path) -> None:
    """Two groups of one rank: the study owner (rank 0) trains too and serves the other. 60
    showers: 48 to train on, a test split of 12, fewer than fitness.test_events. Trial 0 is
    the base spec (start_from_base), a resume enqueues it no more."""
    space = with_window_kernel(yaml.safe_load(TINY.read_text())["space"])
    data = yaml.safe_load(TINY.read_text())["data"]
    data["synthetic"]["events"] = 60
    tpe = {"backend": "optuna", "candidates": 8, "ranks_per_group": 1, "start_from_base": True}
    out, trained, result = _campaign(tmp_path, "tpe", ranks=2, space=space, data=data, **tpe)
    rows = _rows(out)
    searched = Space(*_space_and_base(tmp_path / "search.yaml"))
    base = searched.active(searched.base_genome())
    assert [r["trial"] for r in rows if r["genome"] == base] == [0]
    invalid = [r for r in rows if r["status"] == "invalid"]
    assert len(trained) == 8
    assert {tuple(r["ranks"]) for r in trained} == {(0,), (1,)}  # both groups trained
    assert all(r["genome"]["g_last_kernel"] == [1, 1, 1] for r in trained), "invalid trained"
    assert all(r["genome"]["g_last_kernel"] == [3, 3, 3] for r in invalid)
    assert not any((out / "candidates" / r["id"]).exists() for r in invalid)
    _check_progress(result, 8)
    pruned = _check_rungs(out, trained)
    assert all("Optuna's successive halving pruner" in r["reason"] for r in pruned)

    study = _study(out)
    states = [t.state.name for t in study.trials]
    assert len(states) == len(rows), "one trial per table row"
    assert states.count("PRUNED") == len(pruned) and states.count("FAIL") >= len(invalid)
    by_number = {t.number: t for t in study.trials}
    for row in trained:
        trial = by_number[row["trial"]]
        assert trial.intermediate_values[1] == row["intermediate"]["1"]
        if row["status"] == "pruned":
            assert trial.state.name == "PRUNED" and trial.user_attrs["rung"] == 0
        elif row["status"] == "ok":
            assert trial.state.name == "COMPLETE" and trial.intermediate_values[4] == row["fitness"]
    best = min((r for r in trained if r["status"] == "ok"), key=lambda r: r["fitness"])
    assert study.best_trial.number == best["trial"]
    assert study.best_value == pytest.approx(best["fitness"])
    assert study.best_trial.user_attrs["status"] == "ok"
    _resume_abandoned_trial(tmp_path, out, study)


def _check_progress(result: subprocess.CompletedProcess[str], candidates: int) -> None:
    """The campaign's stdout: "candidate k of N" per trained candidate; the data said once,
    first; every other line the search's own or labelled with its group; no Optuna INFO."""
    out = result.stdout.splitlines()
    found = re.compile(rf"search: candidate (\d+) of {candidates}: ")
    ks = [int(m.group(1)) for m in map(found.match, out) if m]
    assert ks == list(range(1, candidates + 1)), result.stdout
    reports = [line for line in out if line.startswith("search: candidate ")]
    assert all("best so far" in line and "ETA" in line for line in reports)
    data = [line for line in out if line.startswith("data: ")]
    assert len(data) == 2 and "synthetic" in data[0], out  # made, or read from the cache
    assert data[1].startswith("data: 48 "), out
    assert out[: len(data)] == data, "the data are said once, before the campaign starts"
    rest = out[len(data) :]
    assert all(line.startswith(("search: ", "[group 0] ", "[group 1] ")) for line in rest), out
    assert any(line.startswith("[group 1] ") for line in rest)
    assert "search: note: fitness.test_events = 20, but the test split holds 12 showers" in rest[1]
    both = result.stdout + result.stderr
    assert "[I " not in both and "optuna: info" not in both and "A new study" not in both


def _resume_abandoned_trial(tmp_path: Path, out: Path, study: optuna.Study) -> None:
    """A study owner killed mid-trial leaves it RUNNING: resume fails it and re-runs its
    params (the campaign grown by one candidate to train it)."""
    kernel = json.dumps([1, 1, 1])
    params = dict(
        latent_size=8,
        g_lr=3e-4,
        d_lr=3e-4,
        g_filters=6,
        g_kernel=json.dumps([3, 3, 3]),
        g_last_kernel=kernel,
        d_blocks=1,
        d_filters_0=3,
        d_dropout_0=0.1,
        energy_weight=0.1,
    )
    study.enqueue_trial(params)
    abandoned = study.ask()
    Space(*_space_and_base(tmp_path / "search.yaml")).suggest(abandoned)
    assert abandoned.params["g_last_kernel"] == kernel
    assert yaml.safe_load((out / "config.yaml").read_text())["candidates"] == 8
    result = _resume(tmp_path, out, "--set", "candidates=9", ranks=2)
    assert result.returncode == 0, result.stderr[-3000:]
    study = _study(out)
    assert study.trials[abandoned.number].state.name == "FAIL"
    reruns = [t for t in study.trials if t.user_attrs.get("rerun_of") == abandoned.number]
    assert len(reruns) == 1 and reruns[0].params["g_last_kernel"] == kernel
    after = [r for r in _rows(out) if r["status"] != "invalid"]
    assert len(after) == 9 and len({r["id"] for r in after}) == 9
    assert {r["trial"] for r in after if r["session"] == 1} == {reruns[0].number}
