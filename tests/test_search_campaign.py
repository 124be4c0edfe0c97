"""Search campaigns under real ``mpirun``: a GA campaign (``-n 4``, 2 groups x 2 ranks)
completes and writes its table, NaN candidates are recorded and skipped, invalid genomes never
train and children inherit their parents' weights; a signal on a group's second rank stops the
campaign; and, on one rank in process, a trained candidate leaves no trainer (and no training
data) behind. The Optuna backend's campaign is tests/test_search_pruning.py's."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from evogan.distributed.launcher import mpirun_prefix
from evogan.errors import EXIT_STOPPED
from tests.conftest import REPO, kill_job, launch, mpi_env, mpirun, rank_pid

TINY = REPO / "configs" / "arch_search_tiny.yaml"
# A gene with one value the tiny spec cannot take (a 3x3x3 kernel in its valid-padded last block
# makes 49x49x23 of the 51x51x25 window). The shipped spaces hold no such gene; the tests that
# check that such genomes never train add it.
WINDOW_KERNEL = {
    "name": "g_last_kernel",
    "type": "categorical",
    "path": "generator.-1.kernel",
    "choices": [[1, 1, 1], [3, 3, 3]],
}


def with_window_kernel(space: list[dict]) -> list[dict]:
    """``space`` with :data:`WINDOW_KERNEL` after its ``g_kernel`` gene."""
    at = next(i for i, gene in enumerate(space) if gene["name"] == "g_kernel") + 1
    return [*space[:at], WINDOW_KERNEL, *space[at:]]


def _config(tmp_path: Path, **changes) -> Path:
    """The tiny search config with faster budgets and ``changes``, written into tmp_path."""
    raw = yaml.safe_load(TINY.read_text())
    raw["base"] = str(REPO / "configs" / "gan3d_tiny.yaml")
    raw["budget"] = {"kind": "steps", "amount": 2}
    raw["fitness"] = {"members": 1, "beta": 0.5, "test_events": 20, "energy_bins": 2}
    raw.update(changes)
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    env = mpi_env()
    env["EVOGAN_CACHE_DIR"] = str(tmp_path.parent / "search-cache")
    return env


def _search(
    tmp_path: Path, config: Path, *extra: str, ranks: int = 4
) -> subprocess.CompletedProcess[str]:
    os.environ["EVOGAN_CACHE_DIR"] = _env(tmp_path)["EVOGAN_CACHE_DIR"]
    try:
        return mpirun(ranks, ["-m", "evogan", "search", str(config), *extra], timeout=120)
    finally:
        del os.environ["EVOGAN_CACHE_DIR"]


def _resume(
    tmp_path: Path, campaign: Path, *extra: str, ranks: int = 4
) -> subprocess.CompletedProcess[str]:
    os.environ["EVOGAN_CACHE_DIR"] = _env(tmp_path)["EVOGAN_CACHE_DIR"]
    try:
        args = ["-m", "evogan", "search", "--resume", str(campaign), *extra]
        return mpirun(ranks, args, timeout=120)
    finally:
        del os.environ["EVOGAN_CACHE_DIR"]


def _rows(campaign: Path) -> list[dict]:
    rows = []
    for path in sorted((campaign / "table").glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


@pytest.mark.slow
def test_ga_campaign_records_nan_never_trains_invalid_genomes_and_children_inherit(
    tmp_path: Path,
) -> None:
    """Generator shapes are fixed (the window-kernel gene is repaired to its one valid value),
    so a child starts from its first parent's weights exactly when that parent trained fine;
    a child of a diverged (NaN) parent starts from scratch."""
    # lr_knob is a test knob: a learning rate of 1e30 makes training diverge (NaN).
    raw = yaml.safe_load(TINY.read_text())
    space = [g for g in raw["space"] if g["name"] == "g_lr"] + [WINDOW_KERNEL]
    space[0].update(low=1e-4, high=4e-4)
    space.append(
        {"name": "lr_knob", "type": "categorical", "path": "d_lr", "choices": [1.0e-3, 1.0e30]}
    )
    spec = yaml.safe_load((REPO / "configs" / "gan3d_tiny.yaml").read_text())["spec"]
    spec["generator"][0]["filters"], spec["latent_size"] = 6, 8
    ga = {**raw["ga"], "inherit_weights": True}
    config = _config(tmp_path, space=space, candidates=6, spec=spec, base=None, ga=ga)
    raw = yaml.safe_load(config.read_text())
    raw.pop("base")
    config.write_text(yaml.safe_dump(raw))
    out = tmp_path / "ga"
    result = _search(tmp_path, config, "--run-dir", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(out)
    trained = [r for r in rows if r["status"] != "invalid"]
    assert len(trained) == 6
    data_lines = [line for line in result.stdout.splitlines() if "data: " in line]
    assert len(data_lines) == 2, data_lines  # where the data is and its split, once
    assert " training / " in data_lines[1] and result.stdout.index(data_lines[1]) < min(
        result.stdout.index(f"{r['id']} on ranks") for r in trained
    )
    assert {r["island"] for r in trained} == {0, 1}
    assert all(len(r["ranks"]) == 2 for r in trained)
    nan = [r for r in trained if r["genome"]["lr_knob"] == 1.0e30]
    assert nan and all(r["status"] == "nan" and r["fitness"] is None for r in nan)
    assert all("NaN" in r["reason"] or "not finite" in r["reason"] for r in nan)
    # No trained candidate has the impossible kernel; repaired ones say so.
    assert all(r["genome"]["g_last_kernel"] == [1, 1, 1] for r in trained)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["candidates_trained"] == 6
    invalid = summary["invalid_genomes"]
    assert invalid["found"] == sum(1 for r in trained if r["repaired"]) > 0
    closing = f"0 invalid genome(s) never trained, {invalid['repaired']} repaired and trained"
    assert closing in result.stdout  # repaired genomes were trained, as evogan report counts
    assert summary["status_counts"]["nan"] == len(nan)
    best = summary["best"][0]
    assert best["genome"]["lr_knob"] == 1.0e-3 and math.isfinite(best["fitness"])
    for row in trained:  # the candidate's run directory holds what was trained
        member = out / "candidates" / row["id"] / "member-0"
        assert (member / "last_model.h5").is_file() and (member / "metrics.jsonl").is_file()
        # a diverged generator is kept as the last model, never as the best
        assert (member / "best_model.h5").is_file() == (row["status"] != "nan")
        assert not (member / "learning_curve.png").exists()  # costs more than training

    by_id = {r["id"]: r for r in trained}
    children = [r for r in trained if r["generation"] > 0]
    assert children and any(r["inherited"] for r in children)
    for child in children:
        parent_ok = by_id[child["parents"][0]]["status"] == "ok"
        assert child.get("inherit_from") == (child["parents"][0] if parent_ok else None)
        assert child["inherited"] == int(parent_ok)
        metrics = out / "candidates" / child["id"] / "member-0" / "metrics.jsonl"
        kinds = [json.loads(line)["kind"] for line in metrics.read_text().splitlines()]
        assert kinds == (["resume", "epoch"] if parent_ok else ["epoch"])


def _space_and_base(config: Path) -> tuple:
    from evogan.config import load_config
    from evogan.search import resolve_base

    resolved = resolve_base(load_config(config), config)
    return resolved.space, resolved.spec


@pytest.mark.slow
def test_a_signal_on_a_groups_second_rank_stops_the_campaign(tmp_path: Path) -> None:
    """Only group leaders agree on a stop: a signal on another rank (``kill -TERM`` of one
    process, a node's own shutdown) must reach its leader, as it does in ``evogan train``; the
    campaign ends in one line with its resume command, and that command completes it."""
    out = tmp_path / "campaign"
    os.environ["EVOGAN_CACHE_DIR"] = _env(tmp_path)["EVOGAN_CACHE_DIR"]
    try:
        job = launch(2, ["-m", "evogan", "search", str(_config(tmp_path, candidates=4)),
                         "--run-dir", str(out)])  # fmt: skip
        deadline = time.monotonic() + 120
        while not _rows(out) and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        os.kill(rank_pid(job, 1), signal.SIGTERM)
        _out, err = job.communicate(timeout=120)
    finally:
        del os.environ["EVOGAN_CACHE_DIR"]
    assert job.returncode == EXIT_STOPPED, err[-3000:]
    said = [line for line in err.splitlines() if line.startswith("evogan:")]
    assert [line for line in said if not line.startswith("evogan: hint:")] == [
        f"evogan: stopped by a signal; resume with: mpirun -n 2 --oversubscribe evogan search "
        f"--resume {out}"
    ]  # hints depend on the CPU (AMX)
    assert len(_rows(out)) < 4
    assert json.loads((out / "status.json").read_text())["status"] == "stopped"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by_signal"] and not summary["complete"]
    resumed = _resume(tmp_path, out, ranks=2)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((out / "summary.json").read_text())["complete"]
    assert len({row["id"] for row in _rows(out)}) == 4


def kill_after_rows(tmp_path: Path, config: Path, out: Path, rows: int, ranks: int = 4) -> int:
    """Run the campaign ``config`` into ``out``, kill it after ``rows`` table rows; returns
    how many rows it left."""
    command = [*mpirun_prefix(ranks), sys.executable, "-m", "evogan"]
    command += ["search", str(config), "--run-dir", str(out)]
    process = subprocess.Popen(
        command,
        env=_env(tmp_path),
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while len(_rows(out)) < rows and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
    finally:
        kill_job(process)
    return len(_rows(out))


def test_the_fitness_scores_angles_as_training_validation_does(tmp_path: Path) -> None:
    """An angle-conditioned base spec has its generators' angles scored (the measured angle's
    error), as its training validation does; a spec without angle conditioning does not."""
    from evogan.config.base import validate
    from evogan.config.search import SearchConfig
    from evogan.search import resolve_base
    from evogan.search.scoring import Scorer

    raw = yaml.safe_load(_config(tmp_path).read_text())
    raw["data"]["synthetic"]["events"] = 60  # a test split of 12: the reference's angles
    config = resolve_base(validate(SearchConfig, raw, source="test"))
    conditioning = config.spec.conditioning.model_copy(update={"angle": False})
    flat = config.model_copy(
        update={"spec": config.spec.model_copy(update={"conditioning": conditioning})}
    )
    os.environ["EVOGAN_CACHE_DIR"] = _env(tmp_path)["EVOGAN_CACHE_DIR"]
    try:
        assert config.spec.conditioning.angle and Scorer(config).reference.has_angle
        assert not Scorer(flat).reference.has_angle
    finally:
        del os.environ["EVOGAN_CACHE_DIR"]


@pytest.mark.slow
def test_a_trained_candidate_leaves_no_trainer_behind(tmp_path: Path) -> None:
    """A trainer's frames stay in a reference cycle after training (through matplotlib's
    savefig), and with them its training data: without a collection after each candidate a
    rank of a long campaign grew by its data set per candidate until the kernel killed it."""
    import gc

    from mpi4py import MPI

    from evogan.config.base import validate
    from evogan.config.search import SearchConfig
    from evogan.gan3d.training.trainer import GanTrainer
    from evogan.search import resolve_base
    from evogan.search.fitness import evaluate
    from evogan.search.scoring import Scorer

    raw = yaml.safe_load(_config(tmp_path).read_text())
    config = resolve_base(validate(SearchConfig, raw, source="test"))
    os.environ["EVOGAN_CACHE_DIR"] = _env(tmp_path)["EVOGAN_CACHE_DIR"]  # the campaigns' data
    gc.disable()  # only the collections evogan makes itself
    try:
        result = evaluate(config, config.spec, MPI.COMM_WORLD, tmp_path / "c0", Scorer(config))
        alive = sum(type(o) is GanTrainer for o in gc.get_objects())
    finally:
        gc.enable()
        del os.environ["EVOGAN_CACHE_DIR"]
    assert result.status == "ok"
    assert alive == 0
