"""Communicator layout and failure propagation under real mpirun (evogan.distributed)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from evogan.settings import AGREE_SECONDS, agree_seconds

from .conftest import REPO, mpi_env, mpirun

SCRIPT = "tests/mpi_scripts/layout_check.py"
pytestmark = pytest.mark.mpi


def views(stdout: str) -> list[dict]:
    return json.loads(stdout.strip().splitlines()[-1])


def test_world_splits_into_groups_with_a_ring_of_leaders() -> None:
    done = mpirun(4, [SCRIPT, "--ranks-per-island", "4", "--group-size", "2"], timeout=60)
    assert done.returncode == 0, done.stderr
    ranks = views(done.stdout)
    assert [v["group"] for v in ranks] == [0, 0, 1, 1]
    assert [v["group_size"] for v in ranks] == [2, 2, 2, 2]
    assert [v["is_leader"] for v in ranks] == [True, False, True, False]
    assert [v["leaders"] for v in ranks] == [2, 0, 2, 0]  # outer ring: ranks 0 and 2


def test_islands_split_before_groups() -> None:
    done = mpirun(4, [SCRIPT, "--ranks-per-island", "2"], timeout=60)
    assert done.returncode == 0, done.stderr
    ranks = views(done.stdout)
    assert [v["island"] for v in ranks] == [0, 0, 1, 1]
    assert [v["islands"] for v in ranks] == [2] * 4
    assert [v["group_size"] for v in ranks] == [2] * 4  # default group: the whole island


def test_without_mpirun_the_same_path_is_a_world_of_one() -> None:
    done = subprocess.run(
        [sys.executable, SCRIPT, "--group-size", "node"],
        cwd=REPO,
        env=mpi_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (only,) = views(done.stdout)
    assert only["world_size"] == 1 and only["is_leader"] and only["group_size"] == 1


def test_a_rank_that_raises_ends_every_rank_with_its_rank_named() -> None:
    # Rank 0 waits forever for a message rank 1 never sends: only the abort can end it.
    done = mpirun(2, [SCRIPT, "--fail-rank", "1"], timeout=30)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("evogan: error:")]
    assert len(lines) == 1
    pattern = r"evogan: error: rank 1 of 2 on \S+: RuntimeError: deliberate failure for the test"
    assert re.fullmatch(pattern, lines[0])


@pytest.mark.slow
def test_a_user_error_on_one_rank_is_one_line_without_traceback(monkeypatch) -> None:
    monkeypatch.setenv("EVOGAN_AGREE_SECONDS", "2")  # rank 1 never reports: end after 2 s
    done = mpirun(2, [SCRIPT, "--fail-rank", "0", "--user-error"], timeout=30)
    assert done.returncode == 2
    assert "rank 0 of 2 on " in done.stderr
    assert "data file /nowhere.h5 does not exist; check data.files" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_impossible_layout_is_refused_with_the_rule_and_the_counts() -> None:
    done = mpirun(3, [SCRIPT, "--group-size", "2"], timeout=30)
    assert done.returncode == 2
    assert "group_size must divide the ranks of an island; got group_size = 2 with 3" in (
        done.stderr
    )


@pytest.mark.parametrize(("value", "seconds"), [("2.5", 2.5), ("0", 0.0)])
def test_the_wait_for_a_shared_error_is_read_from_the_environment(
    monkeypatch, value: str, seconds: float
) -> None:
    monkeypatch.setenv("EVOGAN_AGREE_SECONDS", value)
    assert agree_seconds() == seconds


@pytest.mark.parametrize("value", ["", "-1", "nan", "inf", "10s"])
def test_a_wait_that_is_no_number_of_seconds_keeps_the_default(monkeypatch, value: str) -> None:
    monkeypatch.setenv("EVOGAN_AGREE_SECONDS", value)
    assert agree_seconds() == AGREE_SECONDS
