"""Environment variables, read in one place (all carry the ``EVOGAN_`` prefix)."""

from __future__ import annotations

import math
import os
from pathlib import Path


def _path(name: str, default: Path) -> Path:
    """The path in variable ``name``; set but empty counts as unset (``Path("")`` would be the
    current directory)."""
    value = os.environ.get(name, "")
    return Path(value) if value.strip() else default


def _switch(name: str) -> bool:
    """Variable ``name`` as an on/off switch, on unless set to 0, false, no or off."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    """Where generated default data is cached (``EVOGAN_CACHE_DIR``)."""
    return _path("EVOGAN_CACHE_DIR", _path("XDG_CACHE_HOME", Path.home() / ".cache") / "evogan")


def kernel_dir() -> Path:
    """Where compiled C kernels are kept (``EVOGAN_KERNEL_DIR``, default ``kernels/`` in the
    cache directory): apart from the data cache, so that runs each given their own data cache
    (tests, per-job scratch folders) share one build per CPU type instead of compiling again."""
    return _path("EVOGAN_KERNEL_DIR", cache_dir() / "kernels")


def populations_dir() -> Path:
    """Default root of run directories (``EVOGAN_POPULATIONS``)."""
    return _path("EVOGAN_POPULATIONS", Path("populations"))


def native_kernels() -> bool:
    """Whether compiled C kernels may be built and used (``EVOGAN_NATIVE``, default 1; 0 keeps
    the pure torch code paths, e.g. to compare them or where no C compiler exists)."""
    return _switch("EVOGAN_NATIVE")


def hints() -> bool:
    """Whether hints about this machine are said (``EVOGAN_HINTS``, default 1; 0 silences
    them: bf16 on a CPU with AMX, FFT convolutions on CPUs, no C compiler, ...)."""
    return _switch("EVOGAN_HINTS")


AGREE_SECONDS = 10.0


def agree_seconds() -> float:
    """How long the ranks of a job wait for each other to report the same error before the rank
    that saw it ends the job (``EVOGAN_AGREE_SECONDS``, default 10): one line when every rank
    hits it, as a bad config does. Longer where ranks reach an error far apart (a slow shared
    file system), shorter where an error of one rank (a file one node lacks) should end the job
    sooner; a value that is not a number of seconds >= 0 keeps the default."""
    try:
        value = float(os.environ.get("EVOGAN_AGREE_SECONDS", AGREE_SECONDS))
    except ValueError:
        return AGREE_SECONDS
    return value if math.isfinite(value) and value >= 0 else AGREE_SECONDS


PROGRESS_MODES = ("auto", "bar", "lines", "off")


def progress_mode() -> str:
    """How long work shows its progress (``EVOGAN_PROGRESS``): ``auto`` (a bar on a terminal,
    a line every few seconds in logs), ``bar``, ``lines`` or ``off``."""
    mode = os.environ.get("EVOGAN_PROGRESS", "auto").strip().lower()
    return mode if mode in PROGRESS_MODES else "auto"


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level() -> str:
    """Level of evogan's and third-party libraries' log lines (``EVOGAN_LOG_LEVEL``, default
    ``WARNING``: Optuna's per-trial INFO lines only appear when asked for)."""
    level = os.environ.get("EVOGAN_LOG_LEVEL", "WARNING").strip().upper()
    return level if level in LOG_LEVELS else "WARNING"
