"""The generation benchmark (``scripts/bench_inference.py``, docs/performance.md) in its quick
form: every cell timed, the record complete, and the GFLOP it divides by counted from the
layers as they run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_inference

from evogan.gan3d.model.spec import load_spec
from tests.gan_fixtures import REPO


def test_the_quick_form_times_both_forms_against_the_matmul_rate(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    record = bench_inference.main(["--quick", "--no-bf16", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(record))
    assert record["machine"]["cores"] >= 1 and record["machine"]["cpu"]
    rows = record["rows"]
    assert {(r["form"], r["batch"]) for r in rows} == {
        ("plain", 4),
        ("inference", 1),
        ("inference", 4),
    }
    for row in rows:
        assert row["core_ms_per_shower"]["min"] <= row["core_ms_per_shower"]["median"]
        assert row["gflop_per_shower"] == pytest.approx(0.00123692)  # the tiny spec
        assert (
            0
            < row["fraction_of_matmul"]
            == pytest.approx(row["gflop_per_s"] / row["matmul_gflop_per_s"])
        )
    (best,) = record["best"]
    assert best["gain"] == pytest.approx(
        best["plain_core_ms_per_shower"]["median"] / best["core_ms_per_shower"]["median"]
    )
    assert record["matmul"][0]["gflop_per_s"]["median"] > 0


def test_the_51x51x25_spec_runs_less_than_half_the_flops_it_writes() -> None:
    """The first block's 6x6x8 kernel over a 6x upsampled grid runs in the phase form: 2.68
    GFLOP per shower as run against 6.12 GFLOP as the spec writes it."""
    run, written = bench_inference.flops_per_shower(load_spec(REPO / "configs" / "gan3d.yaml"))
    assert run == pytest.approx(2.681826912) and written == pytest.approx(6.122638944)
    small = bench_inference.flops_per_shower(load_spec(REPO / "configs" / "gan3d_cc2_small.yaml"))
    assert small[0] == small[1]  # its upsampling block wraps around: no phase form
