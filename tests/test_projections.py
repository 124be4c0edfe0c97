"""The cache of the regressor's 2D projections: used while current, remade when not, bounded."""

from __future__ import annotations

import os

import numpy as np
import pytest

from evogan.config.data import DataConfig
from evogan.data import projections
from evogan.data.reader import ShowerDataset, open_files
from evogan.data.transforms import project_view, regressor_arrays
from tests.data_fixtures import expected_cells, write_layout


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(folder))
    return folder / "projections"


def _view(path, start=0, stop=None) -> ShowerDataset:
    dataset = ShowerDataset.from_files(open_files([str(path)]))
    return dataset.select(start, len(dataset) if stop is None else stop)


def _counted(dataset, axis="y"):
    """The cached projection of ``dataset`` and how many times it had to be built."""
    built = []

    def build():
        built.append(1)
        return project_view(dataset, axis, 3)

    found = projections.cached_projection(dataset, axis, build, announce=pytest.fail)
    return found, len(built)


def test_a_second_read_comes_from_the_cache_with_the_same_values(tmp_path, cache):
    write_layout(tmp_path / "a.h5", "processed51", 6)
    (images, energy), built = _counted(_view(tmp_path / "a.h5"))
    (again, again_energy), built_again = _counted(_view(tmp_path / "a.h5"))
    assert (built, built_again) == (1, 0)
    np.testing.assert_array_equal(again, images)
    np.testing.assert_array_equal(again_energy, energy)
    np.testing.assert_allclose(images, expected_cells("processed51", 6).sum(axis=2), rtol=1e-6)
    assert len(list(cache.iterdir())) == 1  # no temporary file left


def test_views_and_axes_are_cached_apart(tmp_path, cache):
    write_layout(tmp_path / "a.h5", "processed51", 6)
    first, _ = _counted(_view(tmp_path / "a.h5", 0, 4))
    rest, built = _counted(_view(tmp_path / "a.h5", 4))
    across, built_across = _counted(_view(tmp_path / "a.h5", 0, 4), axis="x")
    assert (built, built_across) == (1, 1)
    assert len(first[1]) == 4 and len(rest[1]) == 2
    np.testing.assert_allclose(
        across[0], expected_cells("processed51", 4).sum(axis=1), rtol=1e-6, atol=1e-7
    )
    assert len(list(cache.iterdir())) == 3


def test_a_changed_file_is_projected_again_and_replaces_the_stale_copy(tmp_path, cache):
    write_layout(tmp_path / "a.h5", "processed51", 5)
    _counted(_view(tmp_path / "a.h5"))
    write_layout(tmp_path / "a.h5", "processed51", 5, first=5)  # other showers, same name
    (images, _), built = _counted(_view(tmp_path / "a.h5"))
    assert built == 1
    np.testing.assert_allclose(images, expected_cells("processed51", 5, 5).sum(axis=2), rtol=1e-6)
    assert len(list(cache.iterdir())) == 1


def test_a_damaged_cache_file_is_remade(tmp_path, cache):
    write_layout(tmp_path / "a.h5", "processed51", 4)
    (images, _), _ = _counted(_view(tmp_path / "a.h5"))
    [stored] = cache.iterdir()
    stored.write_bytes(stored.read_bytes()[:100])
    (again, _), built = _counted(_view(tmp_path / "a.h5"))
    assert built == 1
    np.testing.assert_array_equal(again, images)


def test_an_unwritable_cache_says_so_once_and_the_run_goes_on(tmp_path, monkeypatch):
    write_layout(tmp_path / "a.h5", "processed51", 4)
    (tmp_path / "blocked").write_text("a file where the cache folder would be")
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path / "blocked"))
    lines = []
    dataset = _view(tmp_path / "a.h5")
    images, _ = projections.cached_projection(
        dataset, "y", lambda: project_view(dataset, "y", 3), lines.append
    )
    assert images.shape == (4, 51, 25)
    assert len(lines) == 1 and "could not cache the 2D projections" in lines[0]
    assert "data.cache_projections=false" in lines[0]


def test_the_least_recently_used_projections_leave_first(tmp_path, cache, monkeypatch):
    write_layout(tmp_path / "a.h5", "processed51", 8)
    views = [_view(tmp_path / "a.h5", k, k + 2) for k in (0, 2, 4)]
    for age, view in enumerate(views):
        _counted(view)
        path = projections.projection_path(view, "y")
        os.utime(path, ns=(age * 10**9, age * 10**9))  # view 0 oldest
    one = projections.projection_path(views[0], "y").stat().st_size
    monkeypatch.setattr(projections, "BUDGET_BYTES", 3 * one)
    _counted(views[0])  # used again: now the newest
    _counted(_view(tmp_path / "a.h5", 6, 8))  # a fourth: over the budget of three
    kept = {path.name for path in cache.iterdir()}
    assert projections.projection_path(views[1], "y").name not in kept
    assert {projections.projection_path(v, "y").name for v in (views[0], views[2])} <= kept
    assert len(kept) == 3


def test_a_projection_over_the_budget_is_not_kept(tmp_path, cache, monkeypatch):
    write_layout(tmp_path / "a.h5", "processed51", 4)
    monkeypatch.setattr(projections, "BUDGET_BYTES", 100)
    _, built = _counted(_view(tmp_path / "a.h5"))
    assert built == 1 and not cache.exists()


def test_regressor_arrays_without_the_cache_write_nothing(tmp_path, cache):
    write_layout(tmp_path / "a.h5", "processed51", 4)
    cfg = DataConfig(files=[str(tmp_path / "a.h5")], cache_projections=False, cell_scale="log")
    uncached = regressor_arrays(cfg, _view(tmp_path / "a.h5"))
    assert not cache.exists()
    cached = regressor_arrays(
        cfg.model_copy(update={"cache_projections": True}), _view(tmp_path / "a.h5")
    )
    np.testing.assert_array_equal(cached.x, uncached.x)
    np.testing.assert_array_equal(cached.y, uncached.y)
    assert len(list(cache.iterdir())) == 1
