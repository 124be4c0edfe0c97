"""Gradient exchange strategies on real mpirun ranks (evogan.distributed.gradients)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from .conftest import mpirun

pytestmark = [pytest.mark.mpi, pytest.mark.slow]


STEPS = 10


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One 4-rank launch running every strategy on a small MLP: sync, then ARAR, RMA-ARAR and
    ARAR with torch-tensor ring buffers, with inner rings {0, 1} and {2, 3} and the outer ring
    {0, 2}; rank 1 is ten times slower than the others."""
    out = tmp_path_factory.mktemp("exchange") / "report.json"
    options = {
        "modes": "sync,arar,rma,arar-device",
        "group-size": 2,
        "steps": STEPS,
        "steps-per-epoch": 5,
        "step-seconds": 0.02,
        "slow-rank": 1,
        "slow-seconds": 0.2,
        "global-batch": 32,
        "out": out,
    }
    args = [item for key, value in options.items() for item in (f"--{key}", str(value))]
    done = mpirun(4, ["tests/mpi_scripts/exchange_check.py", *args])
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_sync_ranks_equal_one_process_with_the_whole_batch(four_ranks: dict) -> None:
    # Buckets of 256 bytes split the 161 parameters into several Allreduce calls.
    report = four_ranks["sync"]
    weights = [np.array(r["weights"]) for r in report["ranks"]]
    reference = np.array(report["reference"]["weights"])
    assert all(np.array_equal(weights[0], w) for w in weights)  # replicas never drift apart
    assert np.abs(weights[0] - reference).max() < 1e-6
    assert report["reference"]["last_loss"] < 0.5 * report["reference"]["first_loss"]
    assert report["ranks"][0]["stats"]["calls"] == STEPS


def test_sync_gan_step_two_ranks_equal_one_rank(tmp_path: Path) -> None:
    """Noise and label flips come from one shared stream sliced per rank (GanStep.shard);
    batch norm and dropout are off in this spec since they are per rank by nature."""
    out = tmp_path / "gan.json"
    done = mpirun(2, ["tests/mpi_scripts/gan_sync_check.py", "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["replica_spread"] == 0.0
    assert report["moved"] > 1e-3  # training changed the weights ...
    assert report["max_abs_diff"] < 1e-5  # ... identically on 2 x b and 1 x 2b


@pytest.mark.parametrize("mode", ["arar", "rma", "arar-device"])
def test_grouped_rings_never_wait_for_a_slow_rank(four_ranks: dict, mode: str) -> None:
    steps = STEPS
    report = four_ranks[mode]
    ranks = report["ranks"]
    stats = [r["stats"] for r in ranks]
    assert [r["layout"]["is_leader"] for r in ranks] == [True, False, True, False]
    for r in ranks:
        assert r["stats"]["calls"] == steps
        assert r["last_loss"] < r["first_loss"], (mode, r["rank"])
    # Every gradient sent is accounted for: used in time or drained at close.
    for rank, left in ((0, 1), (1, 0), (2, 3), (3, 2)):
        assert stats[rank]["received"] + stats[rank]["late"] == stats[left]["sent"]
    for rank, left in ((0, 2), (2, 0)):
        outer = stats[rank]["outer_received"] + stats[rank]["outer_late"]
        assert outer == stats[left]["outer_sent"]
    # Gradients arrived while training: the slow rank hears from its fast neighbour, and in
    # the fast pair {2, 3} whichever runs behind hears from the other.
    assert stats[1]["received"] > 0, (mode, stats[1])
    assert stats[2]["received"] + stats[3]["received"] > 0, (mode, stats)
    # Rank 0 listens to slow rank 1 and finished without most of its gradients: it never
    # waited for them.
    assert stats[0]["received"] < steps // 2, (mode, stats[0])
    for leader in (0, 2):  # outer ring: once per epoch (outer_every = 1)
        assert stats[leader]["outer_sent"] == steps // 5
    assert stats[0]["outer_received"] + stats[2]["outer_received"] > 0, (mode, stats)
    for member in (1, 3):
        assert stats[member]["outer_sent"] == stats[member]["outer_received"] == 0
    # Asynchronous replicas with their own data do not end bit-identical.
    assert not np.array_equal(ranks[0]["weights"], ranks[2]["weights"])


def test_ring_exchanges_average_exactly_with_host_and_with_device_buffers(
    tmp_path: Path,
) -> None:
    out = tmp_path / "rings.json"
    done = mpirun(2, ["tests/mpi_scripts/ring_buffers_check.py", "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = json.loads(out.read_text())
    for kind in ("host", "device"):
        stats = [r[kind]["stats"] for r in ranks]
        assert [r[kind]["wrong_steps"] for r in ranks] == [[], []], kind
        assert all(s["skipped"] == 0 and s["sent"] == 6 for s in stats), (kind, stats)
        assert all(s["received"] + s["late"] == 6 for s in stats), (kind, stats)
        assert all(s["received"] >= 4 for s in stats), (kind, stats)  # averages were taken
