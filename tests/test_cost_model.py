"""The communication cost model of docs/explanation/scaling.md (``scripts/cost_model.py``,
beside the benchmark it serves): fit, allreduce algorithms, the three modes."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from cost_model import (
    Hockney,
    LocalCosts,
    allreduce_seconds,
    arar_step,
    buckets,
    expected_max_normal,
    fit_allreduce,
    fit_hockney,
    migration_generation,
    straggler_wait,
    sync_step,
)

LINK = Hockney(alpha=2e-6, beta=1e-9)
LOCAL = LocalCosts(copy=1e-10, add=2e-10)


def test_the_hockney_fit_recovers_latency_and_bandwidth() -> None:
    sizes = [32, 1024, 65536, 1 << 20, 8 << 20]
    fit, worst = fit_hockney(sizes, [LINK.seconds(n) for n in sizes])
    assert fit.alpha == pytest.approx(LINK.alpha, rel=1e-6)
    assert fit.beta == pytest.approx(LINK.beta, rel=1e-6)
    assert worst < 1e-6
    with pytest.raises(ValueError, match="needs >= 2"):
        fit_hockney([32], [1e-6])


def test_allreduce_latency_dominates_small_and_bandwidth_large_messages() -> None:
    """Small: recursive doubling (log P latencies) beats the ring (2(P-1)); large: the ring's
    2(P-1)/P n beta beats doubling's log P n beta; auto takes the cheaper one."""
    small, large, p = 64, 64 << 20, 64
    assert allreduce_seconds(small, p, LINK, LOCAL, "recursive_doubling") < allreduce_seconds(
        small, p, LINK, LOCAL, "ring"
    )
    assert allreduce_seconds(large, p, LINK, LOCAL, "ring") < allreduce_seconds(
        large, p, LINK, LOCAL, "recursive_doubling"
    )
    for n in (small, large):
        assert allreduce_seconds(n, p, LINK, LOCAL) == min(
            allreduce_seconds(n, p, LINK, LOCAL, name)
            for name in ("recursive_doubling", "ring", "rabenseifner")
        )
    assert allreduce_seconds(large, 1, LINK, LOCAL) == 0.0
    with pytest.raises(ValueError, match="unknown"):
        allreduce_seconds(small, p, LINK, LOCAL, "tree")


def test_sync_cost_grows_with_ranks_while_arar_per_rank_cost_stays_flat() -> None:
    """Sync's all-reduce latency term grows with P; the ring's per-rank traffic is one
    neighbour each way, so only the stop round's log P term grows."""
    g, d = 4 << 20, 1 << 20
    sync = [sync_step(0.5, g, d, 2, p, LINK, LOCAL).comm for p in (2, 64, 1024)]
    arar = [arar_step(0.5, g, 2, p, LINK, LOCAL).comm for p in (2, 64, 1024)]
    assert sync[0] < sync[1] < sync[2]
    assert arar[2] - arar[0] < 1e-4 * arar[0] + 10 * LINK.alpha
    assert sync_step(0.5, g, d, 2, 64, LINK, LOCAL).efficiency < 1.0
    calibrated = arar_step(0.5, g, 2, 64, LINK, LOCAL, software_s=1e-3).comm
    assert calibrated - arar[1] == pytest.approx(2e-3)
    assert sum(buckets(g + 6, 1 << 20)) == g + 6


def test_migration_overhead_is_amortised_over_the_interval() -> None:
    every_10 = migration_generation(0.01, 10, 40, 64, LINK, LOCAL, software_s=1e-4)
    every_100 = migration_generation(0.01, 100, 40, 64, LINK, LOCAL, software_s=1e-4)
    assert every_100.comm < every_10.comm
    assert math.isclose(every_10.compute, 0.01)
    assert migration_generation(0.01, 10, 40, 1, LINK, LOCAL, 1e-4).comm == 0.0
    with pytest.raises(ValueError, match="topology"):
        migration_generation(0.01, 10, 40, 4, LINK, LOCAL, 1e-4, topology="star")


def test_the_allreduce_fit_recovers_its_link_from_times_at_several_rank_counts() -> None:
    points = [
        (p, n, allreduce_seconds(n, p, LINK, LOCAL, "rabenseifner"))
        for p in (2, 4, 8)
        for n in (32, 4096, 1 << 20)
    ]
    fit, worst = fit_allreduce(points, LOCAL)
    assert fit.alpha == pytest.approx(LINK.alpha, rel=1e-6)
    assert fit.beta == pytest.approx(LINK.beta, rel=1e-6)
    assert worst < 1e-6
    with pytest.raises(ValueError, match="needs >= 2"):
        fit_allreduce(points[:1], LOCAL)
    with pytest.raises(ValueError, match="positive times"):
        fit_allreduce([(1, 32, 1e-6), (2, 64, 1e-6)], LOCAL)


def test_expected_maximum_of_normals_matches_closed_forms_and_sampling() -> None:
    """1/sqrt(pi) for two, 3/(2 sqrt(pi)) for three; larger counts against 20,000 samples."""
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-5)
    assert expected_max_normal(3) == pytest.approx(1.5 / math.sqrt(math.pi), rel=1e-5)
    rng = np.random.default_rng(0)
    for count in (8, 64):
        sampled = rng.standard_normal((20_000, count)).max(axis=1).mean()
        assert expected_max_normal(count) == pytest.approx(sampled, abs=0.02)
    with pytest.raises(ValueError, match="count >= 1"):
        expected_max_normal(0)


def test_straggler_wait_matches_a_simulated_sync_step() -> None:
    """Ranks with noisy compute segments meet at every barrier: the mean wait per rank and
    step of a simulation equals the model's (within sampling error)."""
    rng = np.random.default_rng(1)
    spread, barriers = 0.01, 3
    for ranks in (2, 8):
        segments = rng.normal(0.1, spread / math.sqrt(barriers), (20_000, barriers, ranks))
        wait = (segments.max(axis=2, keepdims=True) - segments).sum(axis=1).mean()
        assert straggler_wait(spread, ranks, barriers) == pytest.approx(wait, rel=0.02)
    assert straggler_wait(spread, 1, barriers) == 0.0
    g, d = 4 << 20, 1 << 20
    plain = sync_step(0.5, g, d, 2, 64, LINK, LOCAL)
    waiting = sync_step(0.5, g, d, 2, 64, LINK, LOCAL, compute_spread_s=0.01)
    assert waiting.comm - plain.comm == pytest.approx(straggler_wait(0.01, 64, 3))
