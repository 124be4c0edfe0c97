"""``evogan data inspect``: report contents, energy bins, text table, JSON and figure."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evogan.cli import main
from evogan.data.synthetic import write_synthetic
from evogan.errors import EXIT_USER_ERROR
from evogan.physics.inspect import REFERENCE_EDGES_GEV, energy_edges, format_report, inspect_file
from tests.conftest import evogan_here
from tests.data_fixtures import write_layout

KEYS = {
    "events",
    "energy_min",
    "energy_max",
    "sampling_fraction",
    "shower_max",
    "empty_cell_fraction",
    "layout",
    "shape",
    "file",
}


@pytest.fixture(scope="module")
def synthetic_file(tmp_path_factory):
    return write_synthetic(tmp_path_factory.mktemp("inspect") / "syn.h5", 240, (2.0, 500.0), 5)


def test_report_of_a_synthetic_file(synthetic_file):
    report = inspect_file(synthetic_file)
    assert set(report) >= KEYS
    assert report["events"] == 240 and report["layout"] == "evogan"
    assert report["shape"] == [51, 51, 25] and report["ecal_scale"] == 1.0
    assert 2.0 <= report["energy_min"] < 10.0 and 490.0 < report["energy_max"] <= 500.0
    rows = report["sampling_fraction"]
    assert [r["energy_lo"] for r in rows][1:] == list(REFERENCE_EDGES_GEV[1:-1])
    assert sum(r["count"] for r in rows) == 240
    for row in rows:
        assert 0.015 < row["mean"] < 0.025 and 0 < row["std"] < 0.005
    assert rows[0]["mean"] > rows[-1]["mean"]  # leakage: falls with energy
    depths = [r["mean"] for r in report["shower_max"]]
    assert 3.0 < depths[0] < depths[-1] < 14.0  # deeper at higher energy, in X0
    assert 0.9 < report["empty_cell_fraction"] < 1.0
    assert report["made_by"] == {"generator": "gflash-synthetic", "seed": 5}
    text = format_report(report)
    assert "sampling fraction" in text and text.count(" ± ") == 2 * len(rows)
    assert "\nmade by           gflash-synthetic (seed 5)\n" in text
    json.dumps(report, allow_nan=False)


def test_energy_edges():
    np.testing.assert_array_equal(energy_edges(2.0, 500.0), REFERENCE_EDGES_GEV)
    np.testing.assert_array_equal(energy_edges(5.0, 150.0), [5, 10, 50, 100, 150])
    np.testing.assert_allclose(energy_edges(100.0, 200.0), np.linspace(100, 200, 7))
    single = energy_edges(50.0, 50.0)
    assert len(single) == 2 and single[0] < 50.0 < single[1]


def test_fixture_layout_with_empty_bins(tmp_path):
    path = write_layout(tmp_path / "EleEscan_1.h5", "raw51", 5)
    report = inspect_file(path)
    assert report["layout"] == "raw51" and report["particle"] == "Ele"
    assert report["made_by"] is None and "made by" not in format_report(report)
    assert report["ecal_scale"] == pytest.approx(0.02)
    assert (report["energy_min"], report["energy_max"]) == (10.0, 14.0)
    assert [r["count"] for r in report["sampling_fraction"]] == [1, 1, 0, 1, 1, 1]
    assert report["sampling_fraction"][2]["mean"] is None  # empty bin: null, not NaN
    assert "-" in format_report(report)


@pytest.mark.slow
def test_cli_json_and_plot(synthetic_file, tmp_path):
    png = tmp_path / "inspect.png"
    result = evogan_here("data", "inspect", str(synthetic_file), "--json", "--plot", str(png))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["events"] == 240 and set(report) >= KEYS
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert not [p for p in tmp_path.iterdir() if p != png]  # no temporary left behind


@pytest.mark.slow
def test_cli_plot_writes_the_format_its_suffix_names(synthetic_file, tmp_path, capsys):
    """In process: test_cli_json_and_plot runs the command as a user does."""
    pdf, svg = tmp_path / "inspect.pdf", tmp_path / "inspect.svg"
    for figure in (pdf, svg):
        assert main(["data", "inspect", str(synthetic_file), "--plot", str(figure)]) == 0
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert b"<svg" in svg.read_bytes()[:1000]
    capsys.readouterr()
    code = main(["data", "inspect", str(synthetic_file), "--plot", str(tmp_path / "a.h5")])
    assert code == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"evogan: error: figure {tmp_path / 'a.h5'}: the suffix 'h5' names no figure format; "
        "use .png, .pdf, .svg or another format matplotlib writes"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inspect.pdf", "inspect.svg"]
