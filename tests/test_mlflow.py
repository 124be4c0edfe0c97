"""MLflow runs (``run.mlflow`` / ``campaign.mlflow``), read back with MLflow's own client: one
run per training whatever its rank count, resumed into the same run, nested campaign ->
candidate -> member (and run -> island), metrics equal to the metrics.jsonl records, the config
as params, the best model as an artifact."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evogan.config import load_config
from evogan.distributed.mpi import MPI
from evogan.errors import RunStopped
from evogan.gan3d.training.trainer import train_gan3d
from evogan.regressor.evolve import evolve_regressor
from evogan.regressor.rmsprop import train_regressor
from evogan.search.members import clear_workdir
from evogan.store import mlflow_runs as tracking
from evogan.store import read_metrics
from tests.conftest import REPO, mpi_env, mpirun

tracking_client = pytest.importorskip(
    "mlflow.tracking", reason="the mlflow package is not installed (pip install -e '.[test]')"
)

TINY = {
    "task": "regressor",
    "seed": 2,
    "data": {"synthetic": {"events": 300}, "train_events": 240, "test_events": 60},
    "ga": {"batch_size": 48, "epochs": 2},
    "train": {"batch_size": 48, "epochs": 2},
    "run": {"mlflow": True, "progress_every": 1000},
}
GAN = REPO / "configs" / "gan3d_tiny.yaml"
SEARCH = REPO / "configs" / "arch_search_tiny.yaml"
QUIET = {"announce": lambda line: None}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("mlflow")
    (folder / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    return folder


@pytest.fixture(autouse=True)
def _environment(root: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for it


def _client(store: Path):
    return tracking_client.MlflowClient(tracking_uri=store.as_uri())


def _runs(store: Path) -> dict[str, object]:
    """Every run of every experiment in ``store``, by run id."""
    client = _client(store)
    experiments = [e.experiment_id for e in client.search_experiments()]
    return {run.info.run_id: run for run in client.search_runs(experiments)}


def _history(store: Path, run_id: str, key: str) -> list[tuple[int, float]]:
    points = _client(store).get_metric_history(run_id, key)
    return sorted((m.step, m.value) for m in points)


def _expect(records: list[dict], step: str, key: str) -> list[tuple[int, float]]:
    return sorted((int(r[step]), float(r[key])) for r in records)


def _artifacts(store: Path, run_id: str, path: str | None = None) -> list[str]:
    return [a.path for a in _client(store).list_artifacts(run_id, path)]


def _run_of(folder: Path) -> str:
    recorded = tracking.read_run(folder)
    assert recorded is not None, f"{folder} has no {tracking.RUN_FILE}"
    return recorded.run_id


@pytest.mark.parametrize(
    ("method", "kind", "scalar"), [("ga", "generation", "best"), ("rmsprop", "step", "loss")]
)
def test_a_regressor_run_is_one_mlflow_run_holding_its_records(
    root: Path, method: str, kind: str, scalar: str
) -> None:
    cfg = load_config(root / "tiny.yaml")
    train = evolve_regressor if method == "ga" else train_regressor
    run = train(cfg, root / "runs" / method, **QUIET).path
    store = root / "runs" / "mlruns"
    (found,) = [r for r in _runs(store).values() if r.info.run_name == method]
    assert found.info.run_id == _run_of(run) and found.info.status == "FINISHED"
    steps, epochs = (
        read_metrics(run / "metrics.jsonl", kind),
        read_metrics(run / "metrics.jsonl", "epoch"),
    )
    assert len(steps) > 2 and len(epochs) == 2
    run_id = found.info.run_id
    assert _history(store, run_id, f"{kind}/{scalar}") == _expect(steps, kind, scalar)
    assert _history(store, run_id, "epoch/test_mape") == _expect(epochs, "epoch", "test_mape")
    params = found.data.params
    assert params["ga.epochs"] == "2" and params["data.train_events"] == "240"
    assert params["run.mlflow"] == "true" and params["task"] == "regressor"
    assert _artifacts(store, run_id) == ["best_model.h5", "learning_curve.png"]
    assert _client(store).get_experiment(found.info.experiment_id).name == "evogan-regressor"


@pytest.mark.slow
def test_a_resumed_gan_training_continues_its_mlflow_run(root: Path) -> None:
    short = ["trainer.steps_per_epoch=1", "run.mlflow=true"]
    run = root / "gan" / "run"
    first_epoch = load_config(GAN, [*short, "trainer.epochs=1"])
    train_gan3d(first_epoch, run, world=MPI.COMM_SELF, signals=False, learning_curve=False)
    first = _run_of(run)
    config = load_config(GAN, [*short, "trainer.epochs=2"])
    train_gan3d(config, run, resume=True, world=MPI.COMM_SELF, signals=False)
    store = root / "gan" / "mlruns"
    (found,) = _runs(store).values()
    assert found.info.run_id == first == _run_of(run) and found.info.status == "FINISHED"
    epochs = read_metrics(run / "metrics.jsonl", "epoch")
    assert [r["epoch"] for r in epochs] == [1, 2]
    for key in ("d_loss", "g_loss", "samples_per_s"):
        assert _history(store, first, f"epoch/{key}") == _expect(epochs, "epoch", key)
    (resume,) = read_metrics(run / "metrics.jsonl", "resume")
    assert _history(store, first, "resume/ranks") == [(resume["step"], 1.0)]
    params = found.data.params
    assert params["spec.latent_size"] == "16" and params["trainer.mode"] == "sync"
    assert params["spec.generator.0.filters"] == "4"
    assert {"best_model.h5", "learning_curve.png"} <= set(_artifacts(store, first))


@pytest.mark.mpi
@pytest.mark.slow
def test_an_island_run_nests_one_mlflow_run_per_island(root: Path) -> None:
    run = root / "islands" / "run"
    args = ["-m", "evogan", "evolve", str(root / "tiny.yaml"), "--run-dir", str(run)]
    done = mpirun(2, args, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    store = root / "islands" / "mlruns"
    runs = _runs(store)
    parent = _run_of(run)
    children = {r.info.run_name: r for r in runs.values() if r.info.run_id != parent}
    assert len(runs) == 3 and sorted(children) == ["island-0000", "island-0001"]
    for name, child in children.items():
        assert child.data.tags["mlflow.parentRunId"] == parent
        records = read_metrics(run / "islands" / name / "metrics.jsonl", "generation")
        assert _history(store, child.info.run_id, "generation/best") == _expect(
            records, "generation", "best"
        )
    best = read_metrics(run / "metrics.jsonl", "epoch")  # the best island's, per epoch
    assert _history(store, parent, "epoch/test_mape") == _expect(best, "epoch", "test_mape")
    assert _artifacts(store, parent) == ["best_model.h5", "learning_curve.png"]
    assert all(_artifacts(store, child.info.run_id) == [] for child in children.values())


@pytest.mark.mpi
@pytest.mark.slow
def test_a_campaign_nests_candidates_and_their_members(root: Path, tmp_path: Path) -> None:
    """One group of two ranks trains both candidates: one run per member training (not per
    rank), each nested in its candidate's run, each candidate in the campaign's."""
    raw = yaml.safe_load(SEARCH.read_text())
    raw.update(
        base=str(GAN),
        candidates=2,
        budget={"kind": "steps", "amount": 1},
        fitness={"members": 1, "beta": 0.5, "test_events": 20, "energy_bins": 2},
        campaign={"mlflow": True},
    )
    (tmp_path / "search.yaml").write_text(yaml.safe_dump(raw))
    campaign = tmp_path / "campaign"
    args = ["-m", "evogan", "search", str(tmp_path / "search.yaml"), "--run-dir", str(campaign)]
    done = mpirun(2, args, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    store = tmp_path / "mlruns"
    runs = _runs(store)
    top = _run_of(campaign)
    rows = [row for path in (campaign / "table").glob("*.jsonl") for row in read_metrics(path)]
    assert len(rows) == 2 and len(runs) == 1 + 2 * 2
    assert "mlflow.parentRunId" not in runs[top].data.tags
    assert runs[top].data.params["budget.amount"] == "1.0"
    for row in rows:
        folder = campaign / "candidates" / row["id"]
        candidate = runs[_run_of(folder)]
        assert candidate.data.tags["mlflow.parentRunId"] == top
        assert candidate.info.status == "FINISHED" and candidate.info.run_name == row["id"]
        assert candidate.data.metrics["candidate/fitness"] == row["fitness"]
        genome = yaml.safe_load(candidate.data.params["genome.latent_size"])
        assert genome == row["genome"]["latent_size"]
        members = [
            r
            for r in runs.values()
            if r.data.tags.get("mlflow.parentRunId") == candidate.info.run_id
        ]
        assert [m.info.run_name for m in members] == ["member-0"]
        epochs = read_metrics(folder / "member-0" / "metrics.jsonl", "epoch")
        assert _history(store, members[0].info.run_id, "epoch/d_loss") == _expect(
            epochs, "epoch", "d_loss"
        )
    best = min(rows, key=lambda row: row["fitness"])["id"]
    artifacts = _artifacts(store, top, f"candidates/{best}/member-0")
    assert artifacts == [f"candidates/{best}/member-0/best_model.h5"]
    assert "summary.json" in _artifacts(store, top)
    assert _history(store, top, "summary/candidates_trained") == [(0, 2.0)]


def test_a_cleared_candidate_keeps_its_run_and_ends_its_members(tmp_path: Path) -> None:
    """A candidate a killed session left trains again in the same MLflow run; the member runs
    it deletes end KILLED."""
    store = tmp_path / "store"
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    tracking.start(campaign, str(store), "c")
    candidate = tracking.start(campaign / "candidates" / "c0", True, "c")
    member = tracking.start(campaign / "candidates" / "c0" / "member-0", True, "c")
    assert candidate.parent_id is not None and member.parent_id == candidate.run_id
    clear_workdir(campaign / "candidates" / "c0")
    assert [p.name for p in (campaign / "candidates" / "c0").iterdir()] == [tracking.RUN_FILE]
    runs = _runs(store)
    assert runs[member.run_id].info.status == "KILLED"
    assert runs[candidate.run_id].info.status == "RUNNING"
    again = tracking.start(campaign / "candidates" / "c0", True, "c")
    assert again.run_id == candidate.run_id


def test_a_run_that_raises_ends_killed_when_stopped_and_failed_otherwise(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stopped = tracking.start(tmp_path / "stopped", str(store), "e")
    with pytest.raises(RunStopped), tracking.ending_on_error(stopped):
        raise RunStopped("evogan train --resume RUN")
    failed = tracking.start(tmp_path / "failed", str(store), "e")
    with pytest.raises(ValueError), tracking.ending_on_error(failed):
        raise ValueError("a bug")
    runs = _runs(store)
    assert runs[stopped.run_id].info.status == "KILLED"
    assert runs[failed.run_id].info.status == "FAILED"


def test_params_flatten_sections_and_blocks() -> None:
    config = {"trainer": {"epochs": 3}, "spec": {"generator": [{"kernel": [3, 3, 3]}]}, "x": None}
    assert tracking.flat_params(config) == {
        "trainer.epochs": "3",
        "spec.generator.0.kernel": "[3, 3, 3]",
        "x": "null",
    }
    assert tracking.key("genome/d<lr>") == "genome/d_lr_"


def test_missing_package_is_one_line_before_the_run_starts(root: Path) -> None:
    """``sys.modules[name] = None`` is how Python marks a package as not importable."""
    run = root / "refused"
    code = (
        "import sys; sys.modules['mlflow'] = None; from evogan.cli import main; "
        f"sys.exit(main(['train', {str(root / 'tiny.yaml')!r}, '--run-dir', {str(run)!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=mpi_env(), cwd=REPO
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "run.mlflow" in lines[0], done.stderr
    assert 'pip install "evogan[mlflow]"' in lines[0]
    assert not run.exists()
