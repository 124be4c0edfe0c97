"""The default synthetic data set: generated once, cached, shared safely by racing ranks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evogan.config.data import DataConfig, SyntheticConfig
from evogan.data.default import default_data_path, ensure_default_data
from evogan.data.reader import open_dataset
from evogan.errors import EXIT_USER_ERROR
from evogan.settings import cache_dir, populations_dir
from tests.conftest import REPO, evogan, mpirun


def test_generated_once_then_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path / "cache"))
    cfg = SyntheticConfig(events=40, energy_range=(10.0, 100.0), seed=3)
    said: list[str] = []
    path = ensure_default_data(cfg, announce=said.append)
    assert path.parent == tmp_path / "cache" and path.is_file()
    assert "40ev" in path.name and "10-100GeV" in path.name and "seed3" in path.name
    assert "generating 40 synthetic showers" in said[0] and str(path) in said[0]
    stamp = path.stat().st_mtime_ns
    train, test = open_dataset(DataConfig(synthetic=cfg, test_fraction=0.25), announce=said.append)
    assert said[1] == f"data: using cached synthetic data at {path}"
    assert path.stat().st_mtime_ns == stamp  # not regenerated
    assert (len(train), len(test)) == (30, 10) and train.layout == "evogan"
    energy = train.energies()
    assert energy.min() >= 10.0 and energy.max() <= 100.0
    assert not [p for p in path.parent.iterdir() if p.suffix != ".lock" and p != path]
    other = default_data_path(SyntheticConfig(events=40, energy_range=(10.0, 100.0), seed=4))
    assert other != path


@pytest.mark.mpi
def test_racing_ranks_generate_once(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    out.mkdir()
    result = mpirun(
        2, ["tests/mpi_scripts/shard_check.py", "--default-events", "64", "--out", str(out)]
    )
    assert result.returncode == 0, result.stderr
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    paths = {r["path"] for r in reports}
    assert len(paths) == 1
    messages = [m for r in reports for m in r["messages"]]
    assert sum("generating 64 synthetic showers" in m for m in messages) == 1
    assert sum("using cached synthetic data" in m for m in messages) == 1
    assert paths == {str(default_data_path(SyntheticConfig(events=64, seed=7)))}


def test_negative_seed_is_one_line_and_leaves_no_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path / "cache"))
    config = str(REPO / "configs" / "smoke.yaml")
    result = evogan("evolve", config, "--set", "data.synthetic.seed=-1", cwd=tmp_path)
    assert result.returncode == EXIT_USER_ERROR
    (line,) = result.stderr.strip().splitlines()
    assert "data.synthetic.seed = -1" in line and "greater than or equal to 0" in line
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())


def test_empty_cache_variable_counts_as_unset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("EVOGAN_CACHE_DIR", "")
    monkeypatch.setenv("EVOGAN_POPULATIONS", " ")
    assert cache_dir() == tmp_path / "xdg" / "evogan"
    assert populations_dir() == Path("populations")
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert cache_dir() == Path.home() / ".cache" / "evogan"
