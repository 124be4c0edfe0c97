"""The one reader of the state files a run keeps between its processes: ``status.json``,
``manifest.json``, ``campaign.json``, the GAN's ``checkpoint.json``, a search island's state,
a summary, and the line-per-record Optuna journal.

A file cut short by a kill or a full disk, emptied, zero-filled by a crash, or holding some
other JSON than an object is refused in one line that names the file, what is wrong with it and
how to repair it, before anything is written. Journals get one repair of their own: a last line
torn by a killed append is cut off after the whole file is kept as a backup
(:func:`repair_torn_tail`), never appended after.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evogan.errors import EvoganError

_STRUCTURE = set(",:{}[]")


def read_state(path: str | Path, fix: str, keys: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON object in ``path``; one EvoganError ending in ``fix`` when the file is missing,
    unreadable, damaged, or lacks one of ``keys``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise EvoganError(f"{path} is missing; {fix}") from None
    except OSError as exc:
        raise EvoganError(f"{path} cannot be read ({exc.strerror}); {fix}") from None
    value, problem = _parse(data)
    if problem is not None:
        raise EvoganError(f"{path} is damaged ({problem}); {fix}")
    require_keys(path, value, keys, fix)
    return value


def require_keys(path: Path, record: Any, keys: Iterable[str], fix: str) -> None:
    """Refuse, naming the first one, a state record (or part of one) that is not an object
    with every key of ``keys``."""
    missing = [key for key in keys if not isinstance(record, dict) or key not in record]
    if missing:
        raise EvoganError(f"{path} is damaged (it has no {missing[0]!r} entry); {fix}")


def _parse(data: bytes) -> tuple[Any, str | None]:
    """(the JSON object in ``data``, None) or (None, what is wrong with it)."""
    if not data.strip():
        return None, "empty"
    if not data.strip(b"\0 \t\r\n"):
        return None, "zero-filled: its data never reached the disk"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text at byte {exc.start}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, _decode_problem(text, exc)
    if not isinstance(value, dict):
        return None, f"it holds a JSON {type(value).__name__}, not an object"
    return value, None


def _decode_problem(text: str, exc: json.JSONDecodeError) -> str:
    """Truncated when the error lies in the text's last token (the end was cut off), else
    where the JSON breaks."""
    rest = text[exc.pos :].rstrip()
    if exc.msg.startswith("Unterminated string") or not (
        _STRUCTURE & set(rest) or any(c.isspace() for c in rest)
    ):
        return "truncated: it ends inside its JSON"
    return f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"


def torn_tail(path: str | Path, fix: str) -> int | None:
    """Where the torn last line of the JSON-lines file ``path`` starts (a write cut off by a
    kill: no line end, or not JSON), or None when every line is whole; one EvoganError ending
    in ``fix`` when a line before the last is damaged (no cut repairs that)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EvoganError(f"{path} cannot be read ({exc.strerror}); {fix}") from None
    lines = data.splitlines(keepends=True)
    offset = 0
    for number, line in enumerate(lines, start=1):
        whole = line.endswith(b"\n") and _is_json(line)
        if not whole and number == len(lines):
            return offset
        if not whole:
            raise EvoganError(
                f"{path} is damaged (line {number} of {len(lines)} is not a JSON record, and "
                f"it is not the last line, which a killed write would leave); {fix}"
            )
        offset += len(line)
    return None


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def repair_torn_tail(path: str | Path, offset: int) -> Path:
    """Keep the whole of ``path`` as ``NAME.torn-TIME`` beside it, then cut it at ``offset``
    (from :func:`torn_tail`); returns the backup."""
    path = Path(path)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    backup = path.with_name(f"{path.name}.torn-{stamp}")
    shutil.copy2(path, backup)
    with open(path, "r+b") as stream:
        stream.truncate(offset)
        stream.flush()
        os.fsync(stream.fileno())
    return backup
