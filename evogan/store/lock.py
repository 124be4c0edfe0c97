"""Who may write a run directory, and how its last process ended.

``RUN/.lock`` is held with ``flock`` by the one process that writes the run (rank 0) for its
whole life, so a second ``evogan`` on a live run fails at once; the kernel drops the lock when
the holder dies, so a killed run never blocks its own resume. ``RUN/status.json`` says
``running``, ``stopped`` (by a signal, after a checkpoint), ``failed`` or ``finished``; resume
and the Slurm templates read it so that nothing resumes a crashed run blindly, and a damaged
one is refused in one line (:mod:`evogan.store.state_files`) rather than read as no status.

Locks and status are only taken inside :func:`lifecycle` (the CLI and the MPI test scripts
enter it once, through :func:`evogan.distributed.failure.guard`): library calls in a notebook
or a test process neither lock nor leave a status behind. A command refused by a user error
leaves the directory as it found it (:func:`settle_refused`): a resumed run gets its status
and lock file back byte for byte, a new run loses what this process wrote into it.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import platform
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ParamSpec, TypeVar

from evogan.errors import EvoganError
from evogan.store.atomic import atomic_write
from evogan.store.state_files import read_state

LOCK = ".lock"
STATUS = "status.json"
RUNNING, STOPPED, FAILED, FINISHED = "running", "stopped", "failed", "finished"


@dataclass
class _Claim:
    """A run this process holds, and what it takes to put the directory back as it was."""

    handle: IO[bytes]
    lock_before: bytes | None
    """The lock file's bytes before the claim (None: the claim created it)."""
    resumed: bool
    status_before: bytes | None = None
    """A resumed run's status.json bytes as found (None: it had none)."""
    made: list[Path] = field(default_factory=list)
    """Directories the creation of a new run made, deepest first."""
    wrote: set[str] = field(default_factory=set)
    """Names this process wrote into a new run (:func:`note_written`)."""


_held: dict[Path, _Claim] = {}
_active = [False]
_writing = threading.RLock()
"""Held while runs are claimed, settled or noted: :func:`note_signal` runs in a thread."""
P = ParamSpec("P")
T = TypeVar("T")


def _one_writer(function: Callable[P, T]) -> Callable[P, T]:
    @functools.wraps(function)
    def serialised(*args: P.args, **kwargs: P.kwargs) -> T:
        with _writing:
            return function(*args, **kwargs)

    return serialised


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


@_one_writer
def claim(
    path: str | Path,
    *,
    resume: bool = False,
    force: bool = False,
    extend: bool = False,
    extending: Sequence[str] = (),
    made: Sequence[Path] = (),
) -> None:
    """Lock ``path`` for this process and mark it running (no-op outside :func:`lifecycle`);
    with ``resume``, first refuse a run that must not be continued (:func:`check_resumable`);
    ``made``: the directories creating the new run made (removed again if it is refused)."""
    if not _active[0]:
        if resume:
            check_resumable(path, force, extend, extending)
        return
    path = Path(path).resolve()
    if path in _held:
        return
    handle, lock_before = _lock(path)
    held = _Claim(handle, lock_before, resume, made=[Path(p).resolve() for p in made])
    if resume:
        held.status_before = _bytes(path / STATUS)
        try:
            check_resumable(path, force, extend, extending)
        except EvoganError:
            _put_back_lock(path, held)
            handle.close()
            raise
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {platform.node()}\n".encode())
    handle.flush()
    _held[path] = held
    write_status(path, RUNNING)


def note_written(file: Path) -> None:
    """Record that this process wrote ``file`` straight into a new run it holds, so that a
    refusal of the run may remove it (nothing is recorded for other files)."""
    if not _held:
        return
    held = _held.get(file.parent.resolve())
    if held is not None and not held.resumed:
        held.wrote.add(file.name)


def _lock(path: Path) -> tuple[IO[bytes], bytes | None]:
    """The open, exclusively locked ``RUN/.lock`` and its bytes before (None: made here). A
    file system without ``flock`` support gets a one-line note and no lock rather than no run;
    a lock file that a refused command removed between our open and our lock is opened anew."""
    file = path / LOCK
    for _ in range(5):
        handle, created = _open_lock(file)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().decode(errors="replace").strip() or "another process"
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
        if _same_file(handle, file):
            handle.seek(0)
            return handle, None if created else handle.read()
        handle.close()
    raise EvoganError(f"cannot lock run directory {path}: its {LOCK} keeps being replaced")


def _open_lock(file: Path) -> tuple[IO[bytes], bool]:
    """``file`` opened for reading and writing, never through a symbolic link; True when this
    call created it."""
    flags = os.O_RDWR | os.O_NOFOLLOW
    try:
        try:
            return os.fdopen(os.open(file, flags | os.O_CREAT | os.O_EXCL, 0o644), "r+b"), True
        except FileExistsError:
            return os.fdopen(os.open(file, flags), "r+b"), False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EvoganError(
                f"{file} is a symbolic link; evogan writes its run lock there and follows no "
                f"link with it: remove the link (rm {shlex.quote(str(file))})"
            ) from None
        raise EvoganError(f"cannot lock run directory {file.parent}: {exc.strerror}") from None


def _same_file(handle: IO[bytes], file: Path) -> bool:
    try:
        named = os.stat(file, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(handle.fileno())
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _bytes(file: Path) -> bytes | None:
    try:
        return file.read_bytes()
    except FileNotFoundError:
        return None


@_one_writer
def settle(status: str | None, error: str | None = None) -> None:
    """Record ``status`` in every run this process holds and release them (``None``: release
    only, keeping what was recorded)."""
    for path, held in list(_held.items()):
        if status is not None:
            write_status(path, status, error)
        held.handle.close()
        del _held[path]


@_one_writer
def settle_refused(error: str) -> None:
    """A user error ended the process: leave every run this process holds as it was found. A
    resumed run gets back its status and lock file (the same resume can be retried once the
    command is fixed); a new run loses the files this process wrote and the directories it
    made, unless it holds others (then it is marked failed)."""
    for path, held in list(_held.items()):
        if held.resumed:
            _put_back(path / STATUS, held.status_before)
            _put_back_lock(path, held)
        elif not _unmake(path, held):
            write_status(path, FAILED, error)
    settle(None)


def _put_back(file: Path, data: bytes | None) -> None:
    if data is None:
        file.unlink(missing_ok=True)
    else:
        atomic_write(file, data)


def _put_back_lock(path: Path, held: _Claim) -> None:
    """The lock file as the claim found it (removed when the claim made it), while held."""
    if held.lock_before is None:
        (path / LOCK).unlink(missing_ok=True)
        return
    held.handle.seek(0)
    held.handle.truncate()
    held.handle.write(held.lock_before)
    held.handle.flush()


def _unmake(path: Path, held: _Claim) -> bool:
    """Remove what this process put into the new run ``path``, if that is all it holds."""
    ours = {LOCK, STATUS, *held.wrote}
    if held.lock_before is not None or set(os.listdir(path)) - ours:
        return False
    for name in ours - {LOCK}:
        (path / name).unlink(missing_ok=True)
    _put_back_lock(path, held)
    for folder in held.made:
        try:
            folder.rmdir()
        except OSError:
            break
    return True


@_one_writer
def note_signal(name: str) -> None:
    """Record at once that stop signal ``name`` arrived in every run this process holds (still
    ``running``): a run its launcher kills before the stop is written then resumes from its
    last checkpoint without --force (:func:`check_resumable`)."""
    for path in _held:
        write_status(path, RUNNING, signal=name)


def write_status(
    path: str | Path, status: str, error: str | None = None, signal: str | None = None
) -> None:
    record: dict[str, Any] = {
        "status": status,
        "pid": os.getpid(),
        "host": platform.node(),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if error is not None:
        record["error"] = error
    if signal is not None:
        record["signal"] = signal
    atomic_write(Path(path) / STATUS, json.dumps(record) + "\n")


def read_status(path: str | Path) -> dict[str, Any] | None:
    """The recorded status of a run (None for runs made outside :func:`lifecycle`); a damaged
    status.json is refused in one line, never read as no status."""
    file = Path(path) / STATUS
    if not os.path.lexists(file):
        return None
    again = f"--resume {shlex.quote(str(path))} --force"
    fix = (
        "how the run's last process ended is unknown: read the job log, then resume it "
        f"with {again}, which rewrites it"
    )
    return read_state(file, fix, keys=("status",))


def _extension(keys: Sequence[str]) -> str:
    """How a finished run can be given more to do, e.g. "a larger --set ga.epochs", from the
    keys that extend its task."""
    if not keys:
        return "a resume-safe --set (docs/howto/resume.md)"
    *first, last = keys
    return f"a larger --set {', '.join(first)} or {last}" if first else f"a larger --set {last}"


def check_resumable(
    path: str | Path, force: bool = False, extend: bool = False, extending: Sequence[str] = ()
) -> None:
    """Refuse, in one line, to resume a run that did not stop cleanly, or one that finished
    unless ``extend`` (resume-safe overrides such as a larger budget were given); the refusal
    of a finished run names ``extending``, the keys that give a run of its task more to do
    (the caller reads them from the run's config: the store knows no task)."""
    try:
        record = read_status(path) or {}
    except EvoganError:
        if force:  # the user read the log: a damaged status is what --force overrides
            return
        raise
    status = record.get("status")
    if status == FINISHED and not extend:
        raise EvoganError(
            f"{path} already finished (status.json); nothing to resume unless you extend it "
            f"with {_extension(extending)}"
        )
    if status == RUNNING and "signal" in record and not force:
        print(
            f"evogan: note: {path} was ended by its launcher after {record['signal']}, before "
            "its stop was written; it resumes from its last checkpoint",
            file=sys.stderr,
        )
        return
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
