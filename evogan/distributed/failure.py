"""How a command ends, on one process or on every rank of an MPI job: one printed line, one
exit code (:mod:`evogan.errors`), the run's status recorded, nobody left waiting.

- finished: 0. Stopped by a signal after a checkpoint (:class:`~evogan.errors.RunStopped`,
  raised on every rank): rank 0 prints the resume command, every rank exits 75.
- A user error (:class:`~evogan.errors.EvoganError`, exit 2) or a signal before any checkpoint
  (exit 75) usually hits every rank alike (a bad config is read by all). The ranks tell rank 0
  with a point-to-point message; when all did within :func:`~evogan.settings.agree_seconds`
  (10 s) rank 0 alone prints and every rank exits normally, with no abort.
- Anything else, or an error only some ranks hit, ends the job from the rank that saw it:
  it prints ``rank R of N on HOST: ...`` (a traceback first for bugs) and leaves with
  ``os._exit``; the launcher (mpirun, ``srun --kill-on-bad-exit``) then ends the other ranks.
  Measured with Open MPI 5.0: ``MPI_Abort`` adds two banners (its own and the launcher's),
  ``os._exit`` only the launcher's; mpirun prints that banner for any non-zero exit, even a
  clean one of every rank, and no setting of the ranks can silence it (srun prints none).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from evogan.distributed.signals import (
    Interrupted,
    local_ranks_running,
    raise_on_stop_signals,
    report_stop_signals,
)
from evogan.distributed.tags import Tag
from evogan.errors import (
    EXIT_FAILURE,
    EXIT_STOPPED,
    EXIT_USER_ERROR,
    EvoganError,
    RunStopped,
)
from evogan.settings import agree_seconds
from evogan.store.lock import (
    FAILED,
    FINISHED,
    STOPPED,
    lifecycle,
    note_signal,
    settle,
    settle_refused,
)

T = TypeVar("T")

_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS")


def launched_ranks() -> int:
    """Ranks of the job this process was launched in, read from the launcher's environment
    (so a command that never needed MPI does not start it to report an error)."""
    for name in _SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 1


def world() -> Any:
    """The world communicator of a multi-rank job, else None."""
    if "mpi4py.MPI" not in sys.modules and launched_ranks() < 2:
        return None
    from evogan.distributed.mpi import MPI

    if not MPI.Is_initialized() or MPI.Is_finalized() or MPI.COMM_WORLD.size < 2:
        return None
    return MPI.COMM_WORLD


def rank0_decides(function: Callable[[], T], comm: Any = None) -> T:
    """Run ``function`` on rank 0 of ``comm`` (default: the world) only; every rank gets its
    result, or raises its user error (so a check that only rank 0 can make still ends every
    rank the same way)."""
    comm = world() if comm is None else comm
    if comm is None or comm.size < 2:
        return function()
    answer: tuple[bool, Any] = (True, None)
    if comm.rank == 0:
        try:
            answer = (True, function())
        except EvoganError as exc:
            answer = (False, str(exc))
    ok, value = comm.bcast(answer, root=0)
    if not ok:
        raise EvoganError(value)
    return value


def all_succeeded(failure: BaseException | None, value: Any = None, comm: Any = None) -> list:
    """Collective over ``comm`` (default: the world): every rank says whether its share of a
    joint piece of work (a file written in parts) failed, so that all keep or all discard
    their shares. Every rank's ``value`` when none failed; else every rank raises: its own
    ``failure`` where there is one, elsewhere the first failing rank's stop signal as the same
    stop, or its error as a user error naming that rank."""
    comm = world() if comm is None else comm
    if comm is None or comm.size < 2:
        if failure is not None:
            raise failure
        return [value]
    said = None if failure is None else describe(failure)[1]
    stop = failure.signal_name if isinstance(failure, Interrupted) else None
    if isinstance(failure, KeyboardInterrupt):
        stop = "SIGINT"
    reports = comm.allgather((said, stop, value))
    if failure is not None:
        raise failure
    for rank, (said, stop, _) in enumerate(reports):
        if stop is not None:
            raise Interrupted(stop)
        if said is not None:
            raise EvoganError(f"rank {rank} of {comm.size}: {said}")
    return [value for _, _, value in reports]


def describe(exc: BaseException) -> tuple[int, str]:
    """Exit code and message of the exception that ended a command."""
    if isinstance(exc, RunStopped):
        return EXIT_STOPPED, str(exc)
    if isinstance(exc, Interrupted | KeyboardInterrupt):
        name = exc.signal_name if isinstance(exc, Interrupted) else "SIGINT"
        return EXIT_STOPPED, (
            f"stopped by {name} before anything resumable was written; start the command again"
        )
    if isinstance(exc, EvoganError):
        return EXIT_USER_ERROR, str(exc)
    return EXIT_FAILURE, f"{type(exc).__name__}: {exc}"


def _status(code: int, message: str) -> None:
    if code == EXIT_USER_ERROR:
        settle_refused(message)
    else:
        settle({EXIT_STOPPED: STOPPED, EXIT_FAILURE: FAILED}[code], message)


def _shared(comm: Any, code: int) -> bool:
    """True when every rank reported ``code``-kind endings to rank 0 in time
    (:func:`~evogan.settings.agree_seconds`)."""
    deadline = time.monotonic() + agree_seconds()
    if comm.rank == 0:
        pending = set(range(1, comm.size))
        while pending and time.monotonic() < deadline:
            while comm.iprobe(tag=Tag.FAILURE):
                from evogan.distributed.mpi import MPI

                status = MPI.Status()
                comm.recv(source=MPI.ANY_SOURCE, tag=Tag.FAILURE, status=status)
                pending.discard(status.Get_source())
            time.sleep(0.01)
        if pending:
            return False
        for rank in range(1, comm.size):
            comm.send(code, dest=rank, tag=Tag.FAILURE)
        return True
    comm.isend(code, dest=0, tag=Tag.FAILURE)
    while time.monotonic() < deadline:
        if comm.iprobe(source=0, tag=Tag.FAILURE):
            comm.recv(source=0, tag=Tag.FAILURE)
            return True
        time.sleep(0.01)
    return False


def end(exc: BaseException) -> int:
    """Print the one line for ``exc``, record the run's status and return the exit code; a
    failure that not every rank shares ends this process (and so the job) here."""
    code, message = describe(exc)
    comm = world()
    if comm is None:
        if code == EXIT_FAILURE:
            traceback.print_exception(exc, file=sys.stderr)
        _status(code, message)
        _print(code, message)
        return code
    if isinstance(exc, RunStopped) or (code != EXIT_FAILURE and _shared(comm, code)):
        if comm.rank == 0:
            _status(code, message)
            _print(code, message)
        return code
    from evogan.distributed.mpi import MPI

    if code == EXIT_FAILURE:
        traceback.print_exception(exc, file=sys.stderr)
    _status(code, message)
    _print(code, f"rank {comm.rank} of {comm.size} on {MPI.Get_processor_name()}: {message}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _print(code: int, message: str) -> None:
    prefix = "evogan:" if code == EXIT_STOPPED else "evogan: error:"
    print(f"{prefix} {message}", file=sys.stderr, flush=True)


def _note_stop(name: str) -> None:
    """Record a stop signal in the runs this process holds, unless a rank of the job on this
    node is already gone: then the signal is the launcher ending a failed job, which must not
    pass for a stop."""
    if local_ranks_running():
        note_signal(name)


@contextmanager
def guard() -> Iterator[None]:
    """Wrap a whole command (the CLI, or an MPI script): SIGTERM/SIGINT unwind cleanly, runs
    created or resumed inside are locked and get their final status (a stop signal is noted
    in it as it arrives), and every ending becomes :func:`end`'s line and exit code (raised as
    ``SystemExit``)."""
    with lifecycle(), raise_on_stop_signals(), report_stop_signals(_note_stop):
        try:
            yield
        except SystemExit:
            raise
        except BaseException as exc:
            raise SystemExit(end(exc)) from None
        settle(FINISHED)


def run_guarded(function: Callable[..., Any], *args: object) -> int:
    """Call ``function(*args)`` inside :func:`guard`; returns the exit code."""
    try:
        with guard():
            return int(function(*args) or 0)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_FAILURE
