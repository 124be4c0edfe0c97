"""Launchers: the ``mpirun`` that belongs to the running Python, and the launch this process is
a rank of.

The test extras install Open MPI from PyPI into the environment's ``bin``, beside the
interpreter. Benchmarks and tests that launch their own jobs look there first, so they run
the MPI that ``mpi4py`` was built against even when the environment is not activated, and
fall back to the first ``mpirun`` on ``PATH`` (a site's module).

A stopped run prints the command that resumes it (:func:`resume_line`), and that command must
work when pasted: it repeats the launcher with the arguments this job was started with
(``mpirun -n 4 --oversubscribe``, a hostfile, ``--mca`` settings). Open MPI 5's ranks on the
node ``mpirun`` runs on are its children (``prterun``, which ``mpirun`` becomes), and every
rank knows its program and arguments (``OMPI_COMMAND``, ``OMPI_ARGV``), so what comes before
them on the launcher's command line is the launcher's own part. A search candidate's
``reproduce`` command runs on the ranks of one group: the same launcher, its rank count changed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

_OPEN_MPI_LAUNCHERS = ("prterun", "mpirun", "mpiexec", "orterun")
_COUNT_OPTIONS = ("-n", "-np", "--n", "--np", "-c")


def find_mpirun() -> str | None:
    """Path of the environment's ``mpirun``, else the first on ``PATH``, else None."""
    beside_python = shutil.which("mpirun", path=str(Path(sys.executable).parent))
    return beside_python or shutil.which("mpirun")


def mpirun_prefix(ranks: int) -> list[str]:
    """``mpirun -n ranks --oversubscribe`` with the launcher :func:`find_mpirun` picks."""
    launcher = find_mpirun()
    if launcher is None:
        raise FileNotFoundError(
            "mpirun not found: install the test extras (pip install -e '.[test]') "
            "or load your site's MPI module"
        )
    return [launcher, "-n", str(ranks), "--oversubscribe"]


def launch_prefix(ranks: int) -> str:
    """The launcher part of a command that runs on ``ranks`` ranks as this job was started:
    Open MPI's ``mpirun`` with its arguments as given and its rank count set to ``ranks``,
    ``srun -n RANKS`` under Slurm's ``srun``, ``mpirun -n RANKS`` where neither can be read (a
    rank under a remote node's daemon, other MPI libraries; with ``--oversubscribe`` when
    Open MPI's ranks all share one node of fewer cores), nothing for one process that no
    launcher started."""
    arguments = _mpirun_arguments()
    if arguments is not None:
        return shlex.join(["mpirun", *_with_count(arguments, ranks)])
    if _parent_name() == "slurmstepd":
        return f"srun -n {ranks}"
    if ranks < 2:
        return ""
    environ = os.environ
    size, local = environ.get("OMPI_COMM_WORLD_SIZE"), environ.get("OMPI_COMM_WORLD_LOCAL_SIZE")
    crowded = size is not None and size == local and ranks > (os.cpu_count() or 1)
    return f"mpirun -n {ranks}" + (" --oversubscribe" if crowded else "")


def _with_count(arguments: list[str], ranks: int) -> list[str]:
    """Launcher ``arguments`` with their rank count set to ``ranks``; ``-n RANKS`` in front
    where they give none (a hostfile's slots) and this job has another size."""
    words = list(arguments)
    for at, word in enumerate(words):
        name, equals, _ = word.partition("=")
        if name not in _COUNT_OPTIONS:
            continue
        if equals:
            words[at] = f"{name}={ranks}"
        elif at + 1 < len(words):
            words[at + 1] = str(ranks)
        return words
    if os.environ.get("OMPI_COMM_WORLD_SIZE") == str(ranks):
        return words
    return ["-n", str(ranks), *words]


def _mpirun_arguments() -> list[str] | None:
    """The arguments this process's parent, Open MPI's launcher, was given before the program
    (``["-n", "4", "--oversubscribe"]``); None when the parent is no Open MPI launcher of one
    program (several programs joined by ``:`` have no single command to repeat)."""
    program, arguments = os.environ.get("OMPI_COMMAND"), os.environ.get("OMPI_ARGV", "")
    if program is None or os.environ.get("OMPI_NUM_APP_CTX", "1") != "1":
        return None
    try:
        words = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode().split("\0")[:-1]
    except (OSError, UnicodeDecodeError):
        return None
    if not words or Path(words[0]).name not in _OPEN_MPI_LAUNCHERS:
        return None
    for at in range(1, len(words)):
        if words[at] == program and " ".join(words[at + 1 :]) == arguments:
            return words[1:at]
    return None


def _parent_name() -> str:
    try:
        return Path(f"/proc/{os.getppid()}/comm").read_text().strip()
    except OSError:
        return ""


def resume_line(command: str, path: str | Path, ranks: int = 1) -> str:
    """The shell command that resumes the run at ``path`` with ``evogan COMMAND``, ready to
    paste: the launcher as this job was started (:func:`launch_prefix`) and the path quoted."""
    launcher = launch_prefix(ranks)
    evogan = f"evogan {command} --resume {shlex.quote(str(path))}"
    return f"{launcher} {evogan}" if launcher else evogan
