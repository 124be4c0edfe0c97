"""Shared fixtures: small synthetic files and a launcher for real ``mpirun`` subprocesses."""

from __future__ import annotations

import compileall
import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evogan.distributed.launcher import find_mpirun, mpirun_prefix
from evogan.distributed.signals import rank_pids, running

REPO = Path(__file__).resolve().parents[1]
SHARED_MEMORY = pytest.StashKey[str]()


TIMING = ("seconds", "_per_s", "finished", "eval_share")
"""Parts of summary/metrics keys that hold wall-clock figures (differ between equal runs)."""


def untimed(record: dict) -> dict:
    """``record`` without wall-clock fields, also inside lists of records (per_island)."""
    return {
        k: [untimed(r) for r in v] if isinstance(v, list) and v and isinstance(v[0], dict) else v
        for k, v in record.items()
        if not any(t in k for t in TIMING)
    }


def pytest_configure(config: pytest.Config) -> None:
    """One folder for Open MPI's shared-memory segments of this session (the test process's
    own MPI included, so before any test module imports mpi4py), removed at its end: ranks
    that the kill tests SIGKILL never unlink theirs, and a ``/dev/shm`` that fills with them
    slows or breaks later launches."""
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    folder = tempfile.mkdtemp(prefix="evogan-tests-", dir=parent)
    config.stash[SHARED_MEMORY] = folder
    os.environ.update(
        OMPI_MCA_btl_sm_backing_directory=folder, OMPI_MCA_osc_sm_backing_directory=folder
    )
    os.environ.setdefault("OMPI_MCA_mca_base_param_files", _mca_param_files(Path(folder)))
    _share_cores()
    _share_kernels()
    _compile_package()


def _share_kernels() -> None:
    """The C kernels are compiled once for the session, in the kernel folder of the cache the
    suite was started with: the tests that give each run a fresh data cache
    (``EVOGAN_CACHE_DIR``) would otherwise each build them again, 2-9 s a kernel."""
    from evogan.settings import kernel_dir

    os.environ.setdefault("EVOGAN_KERNEL_DIR", str(kernel_dir()))


def _compile_package() -> None:
    """Bytecode for evogan's own modules, written once per session where the environment says
    not to write it (``PYTHONDONTWRITEBYTECODE``, as in many CI containers): an editable
    install then has none, and every process the suite launches, some 400 ranks, would compile
    about 150 modules from source again (0.19 s of CPU each). Installed packages such as torch
    carry theirs from installation."""
    if sys.flags.dont_write_bytecode and "PYTEST_XDIST_WORKER" not in os.environ:
        compileall.compile_dir(REPO / "evogan", quiet=2)


def _share_cores() -> None:
    """One share of the cores per test worker, unless OMP_NUM_THREADS says otherwise: torch's
    default of a thread per core in each xdist worker oversubscribes the machine, which costs
    the in-process tests about a quarter of their time on 2 cores (docs/performance.md)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    share = max(1, len(os.sched_getaffinity(0)) // workers)
    os.environ.setdefault("OMP_NUM_THREADS", str(share))


def _mca_param_files(folder: Path) -> str:
    """A parameter file that leaves out Open MPI's libfabric transport, read before the user's
    and the installation's own files. Its network probe costs every rank about a second at
    start, and the tests launch ranks on one machine only. A file and not
    ``OMPI_MCA_btl``, which a lone process's own transport rule would see as a user's choice
    (:mod:`evogan.distributed.transports`)."""
    ours = folder / "mca-params.conf"
    ours.write_text("btl = ^ofi\n")
    files = [ours, Path.home() / ".openmpi" / "mca-params.conf"]
    launcher = find_mpirun()
    if launcher is not None:
        files.append(Path(launcher).resolve().parents[1] / "etc" / "openmpi-mca-params.conf")
    return ",".join(str(f) for f in files)


def _mpirun_command(ranks: int, args: list[str]) -> list[str]:
    try:
        return [*mpirun_prefix(ranks), sys.executable, *args]
    except FileNotFoundError as error:
        pytest.fail(str(error))


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(config.stash[SHARED_MEMORY], ignore_errors=True)


# Open MPI 5's launcher occasionally fails before starting any rank (a PMIx listener thread
# that does not come up); nothing of evogan has run then, so the helper launches once more.
LAUNCHER_FLAKE = "The PMIx server's listener thread failed to start"


def mpi_env() -> dict[str, str]:
    """Environment for mpirun subprocesses (root is allowed: CI runs as root)."""
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
        PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe",
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        OMPI_MCA_osc="^ucx",  # the PyPI build's UCX one-sided component only warns here
    )
    return env


def imported_by(code: str, module: str) -> bool:
    """Whether running ``code`` in a new Python process imports ``module`` (start-up costs that
    every rank would pay)."""
    check = f"{code}\nimport sys\nprint({module!r} in sys.modules)\n"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1] == "True"


def mpirun(
    ranks: int, args: list[str], timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python args...`` under a real ``mpirun -n ranks`` and return the finished process."""
    return run_launched(
        _mpirun_command(ranks, args), env=mpi_env(), cwd=cwd or REPO, timeout=timeout
    )


def run_launched(
    command: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` of ``command``, once more only when mpirun could not start it."""
    for _ in range(2):
        done = subprocess.run(
            command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
        if LAUNCHER_FLAKE not in done.stderr:
            break
    return done


def evogan(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the ``evogan`` CLI in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "evogan", *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=mpi_env(),
    )


def evogan_here(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``evogan`` CLI in this process (:func:`evogan.cli.main`, what ``python -m
    evogan`` calls), in ``cwd`` with ``env`` as the environment while it runs, its output
    captured (in the repository, as :func:`evogan` runs): a subprocess would spend two seconds
    importing torch and evogan, which this process holds. For commands that launch no ranks
    and need no signal of their own."""
    from evogan.cli import main

    out, err = io.StringIO(), io.StringIO()
    environment, here = dict(os.environ), Path.cwd()
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    os.chdir(cwd or REPO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    except SystemExit as exc:  # the argument parser's refusals
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(environment)
    return subprocess.CompletedProcess(["evogan", *args], code, out.getvalue(), err.getvalue())


def launch(ranks: int, args: list[str]) -> subprocess.Popen:
    """Start ``python args...`` under ``mpirun -n ranks`` in its own session, without waiting
    for it to end; :func:`kill_job` ends it."""
    return start_launched(
        _mpirun_command(ranks, args), env=mpi_env(), cwd=REPO, start_new_session=True
    )


def start_launched(
    command: list[str], env: dict[str, str], cwd: Path, **options
) -> subprocess.Popen:
    """``subprocess.Popen`` of an ``mpirun`` command, returned once one of its ranks runs. A
    launcher that fails before starting any rank (:data:`LAUNCHER_FLAKE`) is started once
    more, as in :func:`run_launched`; any other exit before a rank runs fails the test."""

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **options,
        )

    process = start()
    early = _exit_before_a_rank(process)
    if early is not None and LAUNCHER_FLAKE in early:
        process = start()
        early = _exit_before_a_rank(process)
    if early is not None:
        pytest.fail(
            f"`{' '.join(command)}` exited {process.returncode} before any rank ran:\n{early}"
        )
    return process


def _exit_before_a_rank(process: subprocess.Popen) -> str | None:
    """None once a rank of ``process`` runs; its stderr if the launcher ends before any does."""
    while not rank_pids(process.pid):
        if process.poll() is not None:
            return process.communicate()[1][-2000:]
        time.sleep(0.01)
    return None


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 60) -> None:
    """Wait until ``path`` exists, or a file matching it where its name is a glob pattern
    (``gen-*.h5``: ``checkpoint.keep`` prunes any one checkpoint soon after it is written);
    kill the job and fail the test if none ever does."""
    deadline = time.monotonic() + timeout
    while not (any(path.parent.glob(path.name)) if "*" in path.name else path.exists()):
        if process.poll() is not None or time.monotonic() > deadline:
            kill_job(process)
            pytest.fail(f"{path} never appeared: {process.communicate()[1][-2000:]}")
        time.sleep(0.02)


def kill_job(process: subprocess.Popen) -> None:
    """SIGKILL an MPI job and wait until its ranks are gone. Open MPI puts each rank in a
    process group of its own, so ``os.killpg`` of the launcher alone leaves the ranks running
    (and writing) for a while after it."""
    ranks = rank_pids(process.pid)
    os.killpg(process.pid, signal.SIGKILL)
    for pid in ranks:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()
    while any(running(pid) for pid in ranks):
        time.sleep(0.05)


def rank_pid(process: subprocess.Popen, rank: int) -> int:
    """The process id of world rank ``rank`` of the job ``process`` launched."""
    for pid in rank_pids(process.pid):
        with contextlib.suppress(OSError):
            variables = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in variables:
                return pid
    raise LookupError(f"no rank {rank} among the children of {process.pid}")


def terminate_ranks(process: subprocess.Popen) -> None:
    """SIGTERM every rank of ``process``, as srun / Slurm does at the end of an allocation."""
    for child in rank_pids(process.pid):
        os.kill(child, signal.SIGTERM)


def write_config(factory: pytest.TempPathFactory, name: str, config: dict) -> Path:
    """``config`` as ``tiny.yaml`` in a fresh folder, with the data cache beside it for every
    rank of the tests that use it (``EVOGAN_CACHE_DIR``)."""
    import yaml

    root = factory.mktemp(name)
    path = root / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    os.environ["EVOGAN_CACHE_DIR"] = str(root / "cache")
    return path


TINY_GAN = ["tests/mpi_scripts/train_gan.py", "configs/gan3d_tiny.yaml"]
TINY_GAN_SIZE = ["--set", "trainer.steps_per_epoch=3", "--set", "trainer.epochs=2"]


@pytest.fixture(scope="session")
def tiny_gan_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted 2-rank sync training of the tiny spec (6 steps, MPI all-reduce): the
    weights that stopped-and-resumed and other-backend runs of the same steps must end with."""
    run = tmp_path_factory.mktemp("tiny-gan") / "mpi"
    args = [*TINY_GAN, "--run-dir", str(run), *TINY_GAN_SIZE, "--set", "trainer.backend=mpi"]
    done = mpirun(2, args)
    assert done.returncode == 0, done.stderr[-3000:]
    return run
