"""``evogan compare``: Figure-3-style figures and a summary table from two tiny runs."""

from __future__ import annotations

import pytest
import yaml

from evogan.config import load_config
from evogan.plots.compare import RunRecord, summary_table
from evogan.problems.regressor_evolve import evolve_regressor
from evogan.training.rmsprop import train_regressor
from tests.conftest import evogan

TINY = {
    "task": "regressor",
    "seed": 1,
    "data": {"synthetic": {"events": 300}, "train_events": 240, "test_events": 60},
    "ga": {"batch_size": 48, "epochs": 2},
    "train": {"batch_size": 48, "epochs": 2},
}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    (root / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    cfg = load_config(root / "tiny.yaml")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
        quiet = {"announce": lambda line: None}
        ga = evolve_regressor(cfg, root / "ga", **quiet)
        rmsprop = train_regressor(cfg, root / "rmsprop", **quiet)
    return root, ga.path, rmsprop.path


def test_compare_writes_figures_and_table(two_runs) -> None:
    root, ga, rmsprop = two_runs
    out = root / "figures"
    process = evogan("compare", str(ga), str(rmsprop), "--out", str(out))
    assert process.returncode == 0, process.stderr
    for name in ("test_loss.png", "energy_response.png", "relative_error.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / name).stat().st_size > 10_000
    table = (out / "summary.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith(("| ga", "| rms"))]
    assert len(rows) == 2
    assert "| ga | ga |" in table and "| rmsprop | rmsprop |" in table
    assert "summary.md" in process.stdout


def test_summary_table_reports_errors_in_percent(two_runs) -> None:
    _, ga, _ = two_runs
    record = RunRecord.load(ga)
    table = summary_table([record])
    assert f"{100 * record.summary['test_mape']:.2f}" in table
    assert len(record.epochs) == 2


def test_compare_refuses_a_directory_that_is_not_a_run(tmp_path) -> None:
    process = evogan("compare", str(tmp_path), "--out", str(tmp_path / "out"))
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        f"evogan: error: {tmp_path} is not an evogan run directory "
        "(no summary.json or metrics.jsonl)"
    ]
    assert not (tmp_path / "out").exists()
