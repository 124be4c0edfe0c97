"""Progress display and log routing: the Task's counting, rate, ETA and line; plain lines when
stderr is not a terminal; nothing on ranks that do not show; one labelled log format for Optuna;
``evogan data inspect`` reporting one scan. What a real 2-rank search prints ("candidate k of
N", group labels, no Optuna INFO) is checked on the Optuna campaign of
tests/test_search_pruning.py."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evogan import progress as progress_module
from evogan.cli import main
from evogan.logs import labelled_stdout
from evogan.progress import Task, format_rate, format_seconds, hushed, progress
from tests.conftest import evogan_here, mpi_env


def test_format_seconds_reads_at_a_glance() -> None:
    assert format_seconds(0) == "0s"
    assert format_seconds(59.4) == "59s"
    assert format_seconds(75) == "1m15s"
    assert format_seconds(4000) == "1h06m"
    assert format_seconds(float("inf")) == "?"
    assert format_seconds(float("nan")) == "?"


def test_format_rate_keeps_three_digits_without_an_exponent() -> None:
    assert format_rate(0.01234) == "0.0123"
    assert format_rate(310.4) == "310"
    assert format_rate(7780.4) == "7780"
    assert format_rate(1.25e6) == "1250000"
    assert format_rate(float("nan")) == "?"


def test_task_counts_and_estimates_from_its_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]  # a clock that moves only when told: the rate is exact on a busy machine
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    task = Task("validate", total=100, unit="events", stream=None)
    task.advance(10)
    task.advance(15, note="score 0.41")
    assert task.completed == 25
    clock[0] += 10.0  # 25 events in 10 s
    assert task.rate == pytest.approx(2.5, rel=1e-3)
    assert task.eta() == pytest.approx(30.0, rel=1e-3)
    assert task.line() == "validate: 25/100 events (25%), 2.5 events/s, ETA 30s, score 0.41"
    task.update(100)
    assert task.eta() == 0.0
    assert "(100%)" in task.line() and "ETA 0s" in task.line()


def test_a_warm_up_unit_is_left_out_of_the_rate_and_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    """A training's first step compiles: its minute must not turn a 2-minute ETA into hours."""
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    task = Task("train", total=300, unit="steps", stream=None, warmup=1)
    clock[0] += 50.0  # the first step took 50 s
    task.advance(1)
    assert task.rate != task.rate and task.eta() == float("inf")
    assert task.line() == "train: 1/300 steps (0%), ? steps/s, ETA ?"
    clock[0] += 4.0  # 20 steps in the 4 s after the first
    task.advance(20)
    assert task.rate == pytest.approx(5.0, rel=1e-3)
    assert task.eta() == pytest.approx(279 / 5.0, rel=1e-3)
    assert task.line() == "train: 21/300 steps (7%), 5 steps/s, ETA 56s"


def test_task_without_total_has_no_eta() -> None:
    task = Task("scan", total=None, unit="", stream=None)
    task.advance(3)
    assert task.eta() == float("inf")
    assert task.line().startswith("scan: 3, ")
    assert "ETA" not in task.line()


@pytest.mark.parametrize(("every", "expected"), [(0.0, [1, 2, 3, 4]), (3600.0, [4])])
def test_lines_when_stderr_is_not_a_terminal(monkeypatch, capsys, every, expected) -> None:
    monkeypatch.setenv("EVOGAN_PROGRESS", "auto")
    monkeypatch.setattr(progress_module, "LINE_SECONDS", every)
    with progress("inspect", total=4, unit="events") as task:
        for _ in range(4):
            task.advance(1)
    err = capsys.readouterr().err.splitlines()
    pattern = r"inspect: (\d)/4 events \(\d+%\), [\d.e+]+ events/s, ETA \S+"
    # A line per LINE_SECONDS, and one where the work ended unless the last line said it.
    assert [int(re.fullmatch(pattern, line).group(1)) for line in err] == expected


def test_nothing_shown_off_rank_zero_or_when_hushed(monkeypatch, capsys) -> None:
    monkeypatch.setenv("EVOGAN_PROGRESS", "lines")
    monkeypatch.setattr(progress_module, "LINE_SECONDS", 0.0)
    with progress("train", total=3, unit="steps", show=False) as task:
        task.advance(3)
    assert task.completed == 3
    with hushed(), progress("train", total=3, unit="steps") as task:
        task.advance(3)
    assert task.completed == 3
    assert capsys.readouterr().err == ""
    with progress("train", total=3, unit="steps") as task:  # hushed() ended: shown again
        task.advance(3)
    assert "train: 3/3 steps" in capsys.readouterr().err


def test_work_under_a_bar_becomes_a_line_of_that_bar(monkeypatch) -> None:
    monkeypatch.setenv("EVOGAN_PROGRESS", "bar")
    with progress("train", total=2, unit="steps") as outer:
        bar = outer._bar
        with progress("validation: generate", total=3, unit="showers") as inner:
            inner.advance(3)
            assert inner._bar is bar  # one live display, two lines
            assert [(t.description, t.completed) for t in bar.tasks] == [
                ("train", 0),
                ("validation: generate", 3),
            ]
        outer.advance(2)
        assert [(t.description, t.completed) for t in bar.tasks] == [("train", 2)]
    assert progress_module._live == []


def test_labelled_stdout_prefixes_every_line(capsys) -> None:
    with labelled_stdout("[group 2] "):
        print("epoch 1/3: d_loss 1.0")
        sys.stdout.write("two ")
        sys.stdout.write("parts\nand\nlines\n")
    print("after")
    assert capsys.readouterr().out.splitlines() == [
        "[group 2] epoch 1/3: d_loss 1.0",
        "[group 2] two parts",
        "[group 2] and",
        "[group 2] lines",
        "after",
    ]


def test_a_labelled_line_reaches_the_stream_whole(capsys) -> None:
    """``print`` writes a line's text and its end in two calls; a line another thread writes
    to the same stream between them (the search's candidate lines) must not split it."""
    shared = sys.stdout
    with labelled_stdout("[group 0] "):
        sys.stdout.write("epoch 1/1: d_loss 1.0")
        shared.write("search: candidate 1 of 8\n")
        sys.stdout.write("\n")
        print("flushed mid-line", end="", flush=True)
        print(" and ended")
        print("unended", end="")
    print()
    assert capsys.readouterr().out.splitlines() == [
        "search: candidate 1 of 8",
        "[group 0] epoch 1/1: d_loss 1.0",
        "[group 0] flushed mid-line and ended",
        "[group 0] unended",
    ]


OPTUNA_STUDY = (
    "from evogan.logs import route_optuna\n"
    "route_optuna()\n"
    "import optuna\n"
    "optuna.create_study().optimize(lambda t: t.suggest_float('x', 0, 1), n_trials=2)\n"
    "optuna.logging.get_logger('optuna').warning('a warning gets through')\n"
)


@pytest.mark.parametrize("level", ["", "INFO"])
def test_optuna_lines_go_through_evogan_logging(level: str) -> None:
    env = mpi_env()
    env.pop("EVOGAN_LOG_LEVEL", None)
    if level:
        env["EVOGAN_LOG_LEVEL"] = level
    result = subprocess.run(
        [sys.executable, "-c", OPTUNA_STUDY], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "optuna: warning: a warning gets through" in lines
    assert not any(line.startswith("[I ") or line.startswith("[W ") for line in lines)
    infos = [line for line in lines if line.startswith("optuna: info: ")]
    assert len(infos) == (3 if level else 0)  # study created, trial 0 and 1 finished


@pytest.mark.slow
def test_inspect_reports_progress_and_streams_the_file_once(tmp_path: Path) -> None:
    showers = tmp_path / "showers.h5"
    assert main(["data", "synth", "--out", str(showers), "--events", "48", "--seed", "1"]) == 0
    result = evogan_here("data", "inspect", str(showers), "--plot", str(tmp_path / "showers.png"))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("inspect: ")]
    assert len(lines) == 1, result.stderr  # one scan for the report and the figure
    assert re.match(r"inspect: 48/48 events \(100%\), [\d.]+ events/s, ETA 0s$", lines[0])
