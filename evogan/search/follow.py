"""Search progress on world rank 0: "candidate k of N, best so far, ETA" as candidates finish.

Candidates finish on every rank group and each group's writer (island leader or study owner)
appends its rows to the campaign table. Rank 0 learns about all of them by following the
table files from a background thread, so the backends need no extra messages and the lines
keep coming while rank 0 itself trains a candidate or waits for the other groups.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from evogan.progress import Task, format_seconds, progress
from evogan.search.campaign import TABLE, Campaign

POLL_SECONDS = 1.0
"""How often rank 0 looks for new table rows (a candidate trains for minutes)."""


class TableFollower:
    """The complete rows appended to a campaign's table files since the previous call."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.offsets: dict[Path, int] = {}

    def new_rows(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        if not self.folder.is_dir():
            return rows
        for path in sorted(self.folder.glob("*.jsonl")):
            offset = self.offsets.get(path, 0)
            with open(path, "rb") as stream:
                stream.seek(offset)
                data = stream.read()
            complete = data.rfind(b"\n") + 1  # a line still being written waits for its end
            for line in data[:complete].splitlines():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a torn line left by a killed session
            self.offsets[path] = offset + complete
        return rows


class Tally:
    """Candidates trained so far (all sessions) and the best fitness among them."""

    def __init__(self, target: int, earlier: list[dict[str, Any]]) -> None:
        self.target = target
        self.done = 0
        self.best: tuple[float, str] | None = None
        self.leading: tuple[float, str] | None = None  # best PBT segment of a worker in training
        for row in earlier:
            self.count(row)
        self.earlier = self.done

    def count(self, row: dict[str, Any]) -> bool:
        """Count ``row``; False for a genome refused before training (not a candidate)."""
        if row.get("status") == "invalid":
            return False
        self.done += 1
        fitness = row.get("fitness")
        ok = row.get("status") == "ok" and fitness is not None and math.isfinite(fitness)
        if ok and row.get("partial"):  # a PBT segment before the last: progress, not a result
            if self.leading is None or fitness < self.leading[0]:
                self.leading = (float(fitness), row["id"])
        elif ok and (self.best is None or fitness < self.best[0]):
            self.best = (float(fitness), row["id"])
        return True

    def best_text(self) -> str:
        """The best result so far, or while PBT workers still train, their best segment."""
        if self.best is not None:
            return f"{self.best[0]:.4f} ({self.best[1]})"
        if self.leading is not None:
            fitness, name = self.leading
            return f"none yet (workers training, best segment {fitness:.4f} ({name}))"
        return "none yet"

    def line(self, row: dict[str, Any], eta: float) -> str:
        """``search: candidate 5 of 64: i01g002c00 on ranks [2, 3] ok, fitness 2.3761 in 4.9 s;
        best so far 2.3761 (i00g001c01); ETA 3m20s``."""
        if row.get("status") == "ok":
            outcome = f"ok, fitness {row['fitness']:.4f}"
            outcome += f" ({row['reason']})" if row.get("reason") else ""
        else:
            outcome = f"{row.get('status')} ({row.get('reason')})"
        best = self.best_text()
        return (
            f"search: candidate {self.done} of {self.target}: {row['id']} on ranks "
            f"{row.get('ranks')} {outcome} in {row.get('wall_s', 0.0):.1f} s; "
            f"best so far {best}; ETA {format_seconds(eta)}"
        )


@contextmanager
def follow_candidates(campaign: Campaign, target: int, show: bool) -> Iterator[None]:
    """While the block runs, print one line per finished candidate and keep a progress display
    (with rate and ETA over this session's candidates); nothing when ``show`` is false."""
    if not show:
        yield
        return
    follower = TableFollower(campaign.path / TABLE)
    tally = Tally(target, follower.new_rows())
    left = max(target - tally.earlier, 0)
    with progress("search", total=left, unit="candidates") as task:
        out = sys.stdout  # inside the display: a rich bar keeps these lines above itself
        with polled(lambda: _report(follower, tally, task, out), "evogan-search-follow"):
            yield


@contextmanager
def polled(poll: Callable[[], None], name: str) -> Iterator[None]:
    """Call ``poll`` every ``POLL_SECONDS`` in a thread while the block runs, and once more
    after it, so the last rows of the table are seen too."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(POLL_SECONDS):
            poll()

    thread = threading.Thread(target=watch, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        poll()


def _report(follower: TableFollower, tally: Tally, task: Task, out: TextIO) -> None:
    for row in follower.new_rows():
        if not tally.count(row):
            continue
        best = tally.best or tally.leading
        task.update(tally.done - tally.earlier, note="" if best is None else f"best {best[0]:.4f}")
        out.write(tally.line(row, task.eta()) + "\n")
        out.flush()
