"""An exception on any rank ends every rank promptly, with one line naming the rank.

Without this, a rank that raises leaves its peers waiting forever in the next collective call
or ring receive. The failing rank prints ``rank R of N on HOST: <error>`` and calls
``MPI_Abort`` on the world, which the launcher turns into a non-zero exit of the whole job.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from evogan.errors import EvoganError

T = TypeVar("T")

USER_ERROR_EXIT = 2
BUG_EXIT = 1
INTERRUPT_EXIT = 130


def _world():
    """The world communicator when MPI is running with more than one rank, else None.

    MPI is only looked at when the command already imported it, so single-process commands
    that never touch MPI pay nothing for the guard.
    """
    if "mpi4py.MPI" not in sys.modules:
        return None
    from mpi4py import MPI

    if not MPI.Is_initialized() or MPI.Is_finalized() or MPI.COMM_WORLD.size < 2:
        return None
    return MPI.COMM_WORLD


def failure_line(rank: int, size: int, host: str, exc: BaseException) -> str:
    """``rank R of N on HOST: <error>``; user errors keep their own wording."""
    if isinstance(exc, EvoganError):
        what = str(exc)
    elif isinstance(exc, KeyboardInterrupt):
        what = "interrupted"
    elif isinstance(exc, SystemExit):
        what = f"exited with status {exc.code}"
    else:
        what = f"{type(exc).__name__}: {exc}"
    return f"rank {rank} of {size} on {host}: {what}"


def _exit_code(exc: BaseException) -> int:
    if isinstance(exc, EvoganError):
        return USER_ERROR_EXIT
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPT_EXIT
    return BUG_EXIT


def abort_world(exc: BaseException) -> None:
    """Print the failure line and abort every rank; returns only when this process is alone."""
    world = _world()
    if world is None:
        return
    from mpi4py import MPI

    if not isinstance(exc, EvoganError | KeyboardInterrupt | SystemExit):
        traceback.print_exception(exc, file=sys.stderr)
    line = failure_line(world.rank, world.size, MPI.Get_processor_name(), exc)
    print(f"evogan: error: {line}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    world.Abort(_exit_code(exc))


def run_guarded(function: Callable[..., T], *args: object) -> T:
    """Call ``function(*args)``; on a multi-rank run any exception aborts the whole job."""
    with guard():
        return function(*args)


@contextmanager
def guard() -> Iterator[None]:
    """Context form of :func:`run_guarded` for scripts and tests launched under mpirun."""
    try:
        yield
    except SystemExit as exc:
        if exc.code not in (None, 0):
            abort_world(exc)
        raise
    except BaseException as exc:
        abort_world(exc)
        raise
