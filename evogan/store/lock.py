"""Who may write a run directory, and how its last process ended.

``RUN/.lock`` is held with ``flock`` by the one process that writes the run (rank 0) for its
whole life, so a second ``evogan`` on a live run fails at once; the kernel drops the lock when
the holder dies, so a killed run never blocks its own resume. ``RUN/status.json`` says
``running``, ``stopped`` (by a signal, after a checkpoint), ``failed`` or ``finished``; resume
and the Slurm templates read it so that nothing resumes a crashed run blindly.

Locks and status are only taken inside :func:`lifecycle` (the CLI and the MPI test scripts
enter it once, through :func:`evogan.distributed.failure.guard`): library calls in a notebook
or a test process neither lock nor leave a status behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from evogan.errors import EvoganError
from evogan.store.atomic import atomic_write

LOCK = ".lock"
STATUS = "status.json"
RUNNING, STOPPED, FAILED, FINISHED = "running", "stopped", "failed", "finished"

_held: dict[Path, tuple[IO[str], dict[str, Any] | None]] = {}
"""Runs this process holds, with the status each had before it resumed them (None: created
here, {}: resumed without a status)."""
_active = [False]


@contextmanager
def lifecycle() -> Iterator[None]:
    """Runs created or resumed inside the block are locked and get a status; the caller
    records the outcome with :func:`settle` (all held runs are released at the end)."""
    _active[0] = True
    try:
        yield
    finally:
        settle(None)
        _active[0] = False


def claim(
    path: str | Path, *, resume: bool = False, force: bool = False, extend: bool = False
) -> None:
    """Lock ``path`` for this process and mark it running (no-op outside :func:`lifecycle`);
    with ``resume``, first refuse a run that must not be continued (:func:`check_resumable`)."""
    if not _active[0]:
        if resume:
            check_resumable(path, force, extend)
        return
    path = Path(path).resolve()
    if path in _held:
        return
    handle = _lock(path)
    before = (read_status(path) or {}) if resume else None
    if resume:
        try:
            check_resumable(path, force, extend)
        except EvoganError:
            handle.close()
            raise
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {platform.node()}\n")
    handle.flush()
    _held[path] = (handle, before)
    write_status(path, RUNNING)


def _lock(path: Path) -> IO[str]:
    """The open, exclusively locked ``RUN/.lock`` (a file system without ``flock`` support
    gets a one-line note and no lock rather than no run)."""
    try:
        handle = open(path / LOCK, "a+")  # noqa: SIM115 (held until settle)
    except OSError as exc:
        raise EvoganError(f"cannot lock run directory {path}: {exc.strerror}") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise EvoganError(
            f"run directory {path} is in use by {holder}; wait for it to end (or stop it) "
            "before starting another process on it"
        ) from None
    except OSError as exc:
        print(
            f"evogan: note: no file locks on the file system of {path} ({exc.strerror}); "
            "a second process on this run would not be noticed",
            file=sys.stderr,
        )
    return handle


def settle(status: str | None, error: str | None = None) -> None:
    """Record ``status`` in every run this process holds and release them (``None``: release
    only, keeping what was recorded)."""
    for path, (handle, _) in list(_held.items()):
        if status is not None:
            write_status(path, status, error)
        handle.close()
        del _held[path]


def settle_refused(error: str) -> None:
    """A user error ended the process: a resumed run gets back the status it had (the same
    resume can be retried once the command is fixed), a new run is marked failed."""
    for path, (_, before) in list(_held.items()):
        if before is None:
            write_status(path, FAILED, error)
        elif not before:
            (path / STATUS).unlink(missing_ok=True)
        else:
            atomic_write(path / STATUS, json.dumps(before) + "\n")
    settle(None)


def write_status(path: str | Path, status: str, error: str | None = None) -> None:
    record: dict[str, Any] = {
        "status": status,
        "pid": os.getpid(),
        "host": platform.node(),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if error is not None:
        record["error"] = error
    atomic_write(Path(path) / STATUS, json.dumps(record) + "\n")


def read_status(path: str | Path) -> dict[str, Any] | None:
    """The recorded status of a run (None for runs made outside :func:`lifecycle`)."""
    file = Path(path) / STATUS
    if not file.is_file():
        return None
    try:
        record = json.loads(file.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def resume_line(command: str, path: str | Path, ranks: int = 1) -> str:
    """The shell command that resumes the run at ``path`` with ``evogan COMMAND``, ready to
    paste: the path is quoted, and a run of several ranks is launched on as many."""
    launcher = f"mpirun -n {ranks} " if ranks > 1 else ""
    return f"{launcher}evogan {command} --resume {shlex.quote(str(path))}"


def _extension(path: Path) -> str:
    """How the finished run at ``path`` can be given more to do, e.g. "a larger --set
    ga.epochs", named for its own task."""
    from evogan.config.resume import extending_keys

    keys = extending_keys(path)
    if not keys:
        return "a resume-safe --set (docs/cluster.md)"
    *first, last = keys
    return f"a larger --set {', '.join(first)} or {last}" if first else f"a larger --set {last}"


def check_resumable(path: str | Path, force: bool = False, extend: bool = False) -> None:
    """Refuse, in one line, to resume a run that did not stop cleanly, or one that finished
    unless ``extend`` (resume-safe overrides such as a larger budget were given)."""
    record = read_status(path) or {}
    status = record.get("status")
    if status == FINISHED and not extend:
        raise EvoganError(
            f"{path} already finished (status.json); nothing to resume unless you extend it "
            f"with {_extension(Path(path))}"
        )
    if force or status in (None, STOPPED, FINISHED):
        return
    again = f"--resume {shlex.quote(str(path))} --force"
    if status == FAILED:
        why = record.get("error") or "see the job log"
        raise EvoganError(f"{path} failed ({why}); fix the cause, then resume it with {again}")
    raise EvoganError(
        f"{path} ended without recording why (status {status!r}: killed, or a rank crashed); "
        f"check the job log, then resume it with {again}"
    )
