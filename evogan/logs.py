"""One logging setup for evogan and the libraries it drives (Optuna above all).

Optuna prints an INFO line per trial through its own handler; in a search that is hundreds of
lines interleaved with evogan's. :func:`setup` puts a single stderr handler on the root logger
at ``EVOGAN_LOG_LEVEL`` (WARNING by default), and :func:`route_optuna` removes Optuna's handler
and lets its records propagate to that one, so every library's log line looks alike, is quiet
by default and is turned up in one place.

:func:`hint` says what this machine suggests (bf16 on a CPU with AMX, no C compiler, ...):
once per process, on world rank 0 only, as ``evogan: hint: ...`` at WARNING, so
``EVOGAN_HINTS=0`` or ``EVOGAN_LOG_LEVEL=ERROR`` silences it.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from typing import TextIO

from evogan.settings import hints, log_level

_HANDLER_NAME = "evogan"
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_said: set[str] = set()


class _Format(logging.Formatter):
    """``optuna: warning: Trial 3 failed ...``, the shape of ``evogan: error: ...``; a record
    with a ``label`` shows it in place of its level (``evogan: hint: ...``)."""

    def format(self, record: logging.LogRecord) -> str:
        source = record.name.split(".")[0]
        label = getattr(record, "label", record.levelname.lower())
        return f"{source}: {label}: {record.getMessage()}"


class _Stderr(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a record comes, not as it was at setup (tests
    and redirections replace it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _stream: TextIO) -> None:
        pass


def setup(level: str | None = None) -> logging.Handler:
    """Install (once) the stderr handler on the root logger; returns it."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if h.get_name() == _HANDLER_NAME), None)
    if handler is None:
        handler = _Stderr()
        handler.set_name(_HANDLER_NAME)
        handler.setFormatter(_Format())
        root.addHandler(handler)
    root.setLevel(level or log_level())
    return handler


def route_optuna(level: str | None = None) -> None:
    """Send Optuna's records through :func:`setup`'s handler at evogan's level (call after
    importing optuna: it installs its own handler on first use)."""
    import optuna

    setup(level)
    optuna.logging.disable_default_handler()
    optuna.logging.enable_propagation()
    logging.getLogger("optuna").setLevel(level or log_level())


def _world_rank() -> int:
    """This process's rank in its MPI job: MPI's where it has started, else the launcher's
    (starting MPI here, from the bottom of the package, would bypass its transport rule in
    :mod:`evogan.distributed.mpi`); 0 for a lone process."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return mpi.COMM_WORLD.Get_rank()
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def hint(text: str) -> None:
    """Say ``text`` once per process, on world rank 0 (every rank group of a search meets the
    same machine), unless ``EVOGAN_HINTS=0``. Callers say a hint once the checks that can
    refuse the command have passed, so that a refusal stays its one error line."""
    if text in _said or not hints() or _world_rank() != 0:
        return
    _said.add(text)
    logging.getLogger("evogan").warning(text, extra={"label": "hint"})


class _Labelled(io.TextIOBase):
    """A text stream that starts every line with ``label`` and passes on whole lines: ``print``
    writes a line's text and its end in two calls, and another thread writing to the same
    stream between them (the search's "candidate k of N" lines) would split the line. A partial
    line goes on when flushed."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = label
        self.fresh = True
        self.pending = ""

    def write(self, text: str) -> int:
        whole, newline, self.pending = (self.pending + text).rpartition("\n")
        if newline:
            self._pass_on(whole + newline)
        return len(text)

    def flush(self) -> None:
        self._pass_on(self.pending)
        self.pending = ""
        self.stream.flush()

    def _pass_on(self, text: str) -> None:
        pieces = []
        for piece in text.splitlines(keepends=True):
            if self.fresh:
                pieces.append(self.label)
            pieces.append(piece)
            self.fresh = piece.endswith("\n")
        if pieces:
            self.stream.write("".join(pieces))


class _Display(io.TextIOBase):
    """stdout that outlives its reader: once the pipe is closed (``evogan evolve ... | head``)
    the rest goes to /dev/null and the command carries on, its results being in files."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            self.stream.write(text)
        except BrokenPipeError:
            self._to_null()
        return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._to_null()

    def _to_null(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self.stream.fileno())
        os.close(null)

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()


def survive_closed_stdout() -> None:
    """Make ``sys.stdout`` carry on when its reader goes away (see :class:`_Display`)."""
    if not isinstance(sys.stdout, _Display):
        sys.stdout = _Display(sys.stdout)


@contextmanager
def labelled_stdout(label: str) -> Iterator[None]:
    """Prefix every line printed in the block with ``label`` (``[group 2] epoch 1/3: ...``):
    several rank groups share one log, and a line must say which group wrote it."""
    labelled = _Labelled(sys.stdout, label)
    try:
        with redirect_stdout(labelled):
            yield
    finally:
        labelled.flush()
