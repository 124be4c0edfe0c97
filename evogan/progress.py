"""Progress of long work, shown on rank 0 only: a rich bar with rate and ETA on a terminal,
a plain line every few seconds when stdout/stderr go to a Slurm log.

Every command that runs longer than a few seconds wraps its loop in :func:`progress`::

    with progress("validate", total=events, unit="events", show=rank == 0) as task:
        for chunk in chunks:
            ...
            task.advance(len(chunk), note=f"score {score:.3f}")

The display goes to stderr so ``--json`` output on stdout stays parseable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from evogan.settings import progress_mode

LINE_SECONDS = 10.0
"""Seconds between two plain progress lines (logs are read by people, not replayed)."""

_hushed = 0
"""Depth of :func:`hushed` blocks this process is in."""
_live: list[Progress] = []
"""The bar on screen, if any: work started under it becomes a second line of the same bar
(two live displays on one terminal overwrite each other)."""


def format_seconds(seconds: float) -> str:
    """``75 -> "1m15s"``, ``4000 -> "1h06m"``: an ETA a person reads at a glance."""
    if seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def format_rate(rate: float) -> str:
    """``0.0123 -> "0.0123"``, ``7780.4 -> "7780"``: three significant digits, and whole
    numbers from a thousand up, where ``%g`` would switch to ``7.78e+03``."""
    if rate != rate:  # NaN: not known yet
        return "?"
    return f"{rate:.3g}" if abs(rate) < 1000 else f"{rate:.0f}"


class _RateColumn(ProgressColumn):
    """Units per second (rich's own speed column only knows bytes)."""

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        unit = f" {task.fields['unit']}" if task.fields.get("unit") else ""
        return Text("?/s" if speed is None else f"{format_rate(speed)}{unit}/s")


class Task:
    """One unit of long work: count what is done, optionally with a short note."""

    def __init__(
        self,
        description: str,
        total: float | None,
        unit: str,
        stream: TextIO | None,
        warmup: float = 0,
    ) -> None:
        self.description = description
        self.total = total
        self.unit = unit
        self.warmup = warmup
        self._warm: tuple[float, float] | None = None  # (time, completed) when warm-up ended
        self.completed = 0.0
        self.note = ""
        self.started = time.monotonic()
        self._stream = stream
        self._last_line = self.started
        self._printed = 0.0  # what the last plain line reported
        self._bar = None
        self._bar_task = None

    def advance(self, amount: float = 1, note: str | None = None) -> None:
        """Add ``amount`` to what is done; ``note`` replaces the note shown beside the rate."""
        self.update(self.completed + amount, note)

    def update(self, completed: float, note: str | None = None) -> None:
        """Set what is done (for work that reports a position rather than increments)."""
        self.completed = completed
        if self.warmup > 0 and self._warm is None and completed >= self.warmup:
            self._warm = (time.monotonic(), completed)
        if note is not None:
            self.note = note
        if self._bar is not None:
            self._bar.update(self._bar_task, completed=completed, note=self.note)
        elif self._stream is not None:
            now = time.monotonic()
            if now - self._last_line >= LINE_SECONDS:
                self._last_line, self._printed = now, completed
                print(self.line(), file=self._stream, flush=True)

    @property
    def rate(self) -> float:
        """Units per second since the start; with ``warmup``, since the first ``warmup`` units
        were done (their time holds one-time costs such as compilation), and NaN until a unit
        after them is done."""
        if self.warmup <= 0:
            since, done = self.started, 0.0
        elif self._warm is None or self.completed <= self._warm[1]:
            return float("nan")
        else:
            since, done = self._warm
        elapsed = time.monotonic() - since
        return (self.completed - done) / elapsed if elapsed > 0 else 0.0

    def eta(self) -> float:
        """Seconds left at the rate so far (inf when unknown)."""
        if not self.total or not self.rate > 0:
            return float("inf")
        return max(0.0, (self.total - self.completed) / self.rate)

    def line(self) -> str:
        """``validate: 1200/5000 events (24%), 310 events/s, ETA 12s, score 0.41``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            share = 100 * self.completed / self.total
            done = f"{self.completed:g}/{self.total:g}{unit} ({share:.0f}%)"
        else:
            done = f"{self.completed:g}{unit}"
        parts = [f"{self.description}: {done}", f"{format_rate(self.rate)}{unit}/s"]
        if self.total:
            parts.append(f"ETA {format_seconds(self.eta())}")
        if self.note:
            parts.append(self.note)
        return ", ".join(parts)


@contextmanager
def progress(
    description: str,
    total: float | None = None,
    *,
    unit: str = "",
    show: bool = True,
    warmup: float = 0,
) -> Iterator[Task]:
    """A :class:`Task` whose progress is displayed while the block runs.

    ``show`` is false on every rank but 0 (and the task then only counts). ``warmup``: units
    whose time the rate and ETA leave out (a training's first step compiles and autotunes).
    ``EVOGAN_PROGRESS`` picks the display: ``auto`` (a bar on a terminal, lines otherwise),
    ``bar``, ``lines`` or ``off``. Inside :func:`hushed` the task only counts. Work that
    raises prints no last line: the error's own line follows the periodic ones.
    """
    mode = progress_mode() if show and not _hushed else "off"
    if mode == "auto":
        mode = "bar" if sys.stderr.isatty() else "lines"
    task = Task(description, total, unit, sys.stderr if mode == "lines" else None, warmup)
    if mode != "bar":
        yield task  # work that raises ends without a last count: its error line is the news
        if mode == "lines" and task.completed != task._printed:
            print(task.line(), file=sys.stderr, flush=True)
        return
    if _live:
        with _bar_line(_live[-1], task):
            yield task
        return
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[note]}"),
    ]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        _live.append(bar)
        try:
            with _bar_line(bar, task):
                yield task
        finally:
            _live.pop()


@contextmanager
def _bar_line(bar: Progress, task: Task) -> Iterator[None]:
    """Show ``task`` as one line of ``bar`` while the block runs."""
    task._bar = bar
    task._bar_task = bar.add_task(task.description, total=task.total, note="", unit=task.unit)
    try:
        yield
    finally:
        task._bar = None
        bar.remove_task(task._bar_task)


@contextmanager
def hushed() -> Iterator[None]:
    """Progress started in this block only counts: a search trains its candidates under its
    own display, and a second live bar on the same terminal is an error in rich."""
    global _hushed
    _hushed += 1
    try:
        yield
    finally:
        _hushed -= 1
