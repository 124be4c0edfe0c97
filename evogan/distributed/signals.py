"""SIGTERM/SIGINT (the end of an allocation) agreed across ranks without blocking anyone.

The handler only sets a flag. :class:`StopAgreement` turns the flags of all ranks into one
decision: ``sync`` mode does a blocking all-reduce every generation (everyone stops at the same
generation, which keeps resumed runs bit-for-bit identical); ``async`` mode keeps one
``Iallreduce`` in flight and starts the next only when it completed, so a rank never waits for
a slow peer and every rank sees the same sequence of rounds. Each round also carries a value
(the island's best fitness), so rank 0 can show the global best without an extra message.
:meth:`StopAgreement.finish` keeps taking part in rounds after this rank's work is done until
all ranks are done or a stop is agreed, so nobody is left waiting in a reduction its peers
never join.

SIGUSR1 stops like SIGTERM: Open MPI's ``mpirun`` passes it on to every rank as it is, while a
SIGTERM or SIGINT (Ctrl-C) of ``mpirun`` itself makes it end the ranks (SIGTERM, then SIGKILL
0.25 s later), too soon for an agreed stop. :func:`report_stop_signals` lets the run record such
a signal at once, so that a run killed that way resumes from its last checkpoint.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, parent, ...), or None
    when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def rank_pids(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (the ranks a launcher such as mpirun started), read
    from /proc: what a batch system signals at the end of an allocation."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(entry.name)
            if fields is not None and int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a killed rank whose launcher is
    gone may stay a zombie until something reaps it)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def local_ranks_running() -> bool:
    """Whether every rank of this Open MPI job on this node still runs (True under other
    launchers). ``mpirun`` ends a job with the same SIGTERM when it was signalled and when a
    rank failed; a rank already gone tells the second."""
    size = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "")
    if not size.isdigit():
        return True
    return sum(running(pid) for pid in rank_pids(os.getppid())) >= int(size)


@dataclass
class StopFlag:
    """Set by the signal handler; ``signal_name`` says which signal arrived first."""

    raised: bool = False
    signal_name: str | None = None
    when: float = field(default=0.0)

    def set(self, signum: int, frame: Any = None) -> None:
        del frame
        if not self.raised:
            self.raised = True
            self.signal_name = signal.Signals(signum).name
            self.when = time.monotonic()


class Interrupted(BaseException):
    """SIGTERM/SIGINT outside a checkpointing loop: unwinds like KeyboardInterrupt, so every
    ``finally`` (temporary files, open HDF5 files) runs before the command exits."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


_pending: list[str] = []
RETRY_SECONDS = 0.01


def _interrupt(signum: int, frame: Any = None) -> None:
    del frame
    if signum != signal.SIGALRM:
        _pending.append(signal.Signals(signum).name)
    if _pending:
        raise Interrupted(_pending[0])


def _swallowed(unraisable: Any, previous: Any) -> None:
    """Python drops an exception raised inside a finalizer or weakref callback; when that was
    our :class:`Interrupted`, raise it again a moment later (SIGALRM) instead of losing it."""
    if isinstance(unraisable.exc_value, Interrupted):
        signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS)
    else:
        previous(unraisable)


def check_stop() -> None:
    """Raise :class:`Interrupted` if a stop signal arrived (a safe point for long writers)."""
    if _pending:
        raise Interrupted(_pending[0])


@contextmanager
def raise_on_stop_signals() -> Iterator[None]:
    """SIGTERM and SIGINT raise :class:`Interrupted` in the block (loops that checkpoint
    replace this with :func:`catch_stop_signals` for their own duration)."""
    signals = (*STOP_SIGNALS, signal.SIGALRM)
    previous = {sig: signal.signal(sig, _interrupt) for sig in signals}
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: _swallowed(unraisable, hook)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.unraisablehook = hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def catch_stop_signals(flag: StopFlag) -> Iterator[StopFlag]:
    """Route SIGTERM and SIGINT to ``flag`` for the block; previous handlers come back after."""
    previous = {sig: signal.signal(sig, flag.set) for sig in STOP_SIGNALS}
    try:
        yield flag
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def report_stop_signals(record: Callable[[str], None]) -> Iterator[None]:
    """Call ``record(name)`` from a thread as the first stop signal arrives. Python
    runs signal handlers in the main thread between bytecodes, which may be waiting in MPI or
    a long kernel; the interpreter's wakeup file descriptor is written by the C handler at
    once (only in the main thread can it be set: elsewhere nothing is reported)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read, write = os.pipe()
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    threading.Thread(target=_report, args=(read, record), daemon=True).start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write)


def _report(read: int, record: Callable[[str], None]) -> None:
    """Read signal numbers until the write end closes; report the first stop signal. A
    record only spares a killed run its --force, so one that fails (a full disk) changes
    nothing else, and the pipe keeps being read."""
    reported = False
    try:
        while data := os.read(read, 64):
            stops = [number for number in data if number in STOP_SIGNALS]
            if stops and not reported:
                reported = True
                with suppress(Exception):
                    record(signal.Signals(stops[0]).name)
    finally:
        os.close(read)


class StopAgreement:
    """One stop decision shared by every rank of ``comm`` (``None``: this process alone)."""

    def __init__(self, comm: Any, flag: StopFlag, mode: str = "async") -> None:
        self.comm = comm.Dup() if comm is not None and comm.size > 1 else None
        self.flag = flag
        self.mode = mode
        self.stopped = False
        self.rounds = 0
        self.value = float("inf")
        self.global_value = float("inf")
        self._request: Any = None
        self._send = np.zeros(3, np.float64)
        self._recv = np.zeros(3, np.float64)

    def poll(self) -> bool:
        """True once all ranks agreed to stop; call once per generation (cheap, non-blocking
        in async mode)."""
        if self.stopped:
            return True
        if self.comm is None:
            self.global_value = self.value
            self.stopped = self.flag.raised
            return self.stopped
        if self.mode == "sync":
            self._round(done=False)
            self._request.Wait()
            return self._settle(done=False)
        if self._request is None:
            self._round(done=False)
        if self._request.Test():
            return self._settle(done=False)
        return False

    def finish(self, wait: float = 0.01) -> bool:
        """This rank has no more work: join rounds until all are done or a stop is agreed.
        Returns whether the run ended by a stop."""
        if self.comm is None:
            return self.stopped or self.flag.raised
        while not self.stopped:
            if self._request is None:
                self._round(done=True)
            while not self._request.Test():
                time.sleep(wait)
            if self._settle(done=True):
                break
        return self.stopped

    def _round(self, done: bool) -> None:
        from evogan.distributed.mpi import MPI

        # MIN over ranks: -1 if anyone stops, 1 only if everyone is done, the best value
        self._send[:] = (-float(self.flag.raised), float(done), self.value)
        self._request = self.comm.Iallreduce(self._send, self._recv, op=MPI.MIN)

    def _settle(self, done: bool) -> bool:
        """Read a completed round; True when the run must end (stop, or everyone done)."""
        self._request = None
        self.rounds += 1
        self.global_value = float(self._recv[2])
        if self._recv[0] < 0:
            self.stopped = True
            return True
        return done and self._recv[1] == 1.0

    def close(self) -> None:
        if self.comm is not None:
            if self._request is not None:
                self._request.Wait()
            self.comm.Free()
            self.comm = None
