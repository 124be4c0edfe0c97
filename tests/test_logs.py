"""Hints (:func:`evogan.logs.hint`): once per process, on world rank 0 only, through logging,
silenced by ``EVOGAN_HINTS=0`` or the log level."""

from __future__ import annotations

from pathlib import Path

import pytest

from evogan import logs
from tests.conftest import mpirun
from tests.gan_fixtures import TINY


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No hint said yet in this process, the default settings, evogan's handler installed."""
    monkeypatch.setattr(logs, "_said", set())
    monkeypatch.delenv("EVOGAN_HINTS", raising=False)
    monkeypatch.delenv("EVOGAN_LOG_LEVEL", raising=False)
    logs.setup()


def test_a_hint_is_said_once_per_process_as_one_stderr_line(
    fresh: None, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(3):
        logs.hint("use the other setting")
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "evogan: hint: use the other setting\n")


def test_hints_are_silenced_by_their_switch_and_by_the_log_level(
    fresh: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVOGAN_HINTS", "0")
    logs.hint("silenced by the switch")
    monkeypatch.delenv("EVOGAN_HINTS")
    monkeypatch.setenv("EVOGAN_LOG_LEVEL", "ERROR")
    logs.setup()
    try:
        logs.hint("silenced by the level")
    finally:
        monkeypatch.delenv("EVOGAN_LOG_LEVEL")
        logs.setup()
    assert capsys.readouterr().err == ""
    logs.hint("silenced by the switch")  # a silenced hint is not counted as said
    assert capsys.readouterr().err == "evogan: hint: silenced by the switch\n"


@pytest.mark.mpi
@pytest.mark.slow
def test_only_world_rank_0_says_a_hint_before_mpi_starts_and_from_each_rank_group(
    tmp_path: Path,
) -> None:
    done = mpirun(2, ["tests/mpi_scripts/hints_check.py", str(TINY), "--run-dir", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("evogan: hint:")]
    assert [line for line in said if "MPI" in line or "AMX" in line] == [
        "evogan: hint: said before MPI starts",
        "evogan: hint: this CPU has AMX bf16 tiles: trainer.precision: bf16 trains 1.7-2.7x "
        "faster, to the same validation score within seed noise (docs/explanation/parallel.md)",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["group-0", "group-1"]
