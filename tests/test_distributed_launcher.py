"""The resume command repeats the launch the job was started with (evogan.distributed.launcher):
Open MPI's ``mpirun`` with its own arguments as given, read under a real ``mpirun``; a command
for another rank count (a search candidate's reproduce line) changes only the count."""

from __future__ import annotations

import os
import shlex
import sys

from evogan.distributed.launcher import launch_prefix, mpirun_prefix, resume_line
from tests.conftest import REPO, mpi_env, run_launched


def test_without_a_launcher_the_command_is_evogan_alone_or_mpirun_n(tmp_path) -> None:
    run = tmp_path / "my run"
    assert resume_line("evolve", "runs/x") == "evogan evolve --resume runs/x"
    line = resume_line("train", run, ranks=2)
    assert shlex.split(line) == ["mpirun", "-n", "2", "evogan", "train", "--resume", str(run)]


def test_under_mpirun_the_command_repeats_its_arguments(tmp_path) -> None:
    code = (
        "from evogan.distributed.launcher import resume_line\n"
        "print(resume_line('evolve', 'runs/my run', ranks=1))\n"
    )
    setting = ["-x", "EXAMPLE_SETTING=a b"]  # an argument with a space keeps its quotes
    command = [*mpirun_prefix(1), *setting, sys.executable, "-c", code]
    done = run_launched(command, env=mpi_env(), cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    words = ["mpirun", "-n", "1", "--oversubscribe", *setting, "evogan", "evolve", "--resume"]
    assert shlex.split(done.stdout.strip()) == [*words, "runs/my run"]


def test_another_rank_count_keeps_the_launchers_other_arguments(tmp_path) -> None:
    code = (
        "from evogan.distributed.launcher import launch_prefix\n"
        "print(launch_prefix(2))\n"
        "print(launch_prefix(1))\n"
    )
    for count in (["-n", "1"], ["--np=1"]):
        launcher = mpirun_prefix(1)
        command = [launcher[0], *count, "--oversubscribe", sys.executable, "-c", code]
        done = run_launched(command, env=mpi_env(), cwd=REPO, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        two, one = done.stdout.strip().splitlines()
        again = ["--np=2"] if count == ["--np=1"] else ["-n", "2"]
        assert shlex.split(two) == ["mpirun", *again, "--oversubscribe"]
        assert shlex.split(one) == ["mpirun", *count, "--oversubscribe"]


def test_an_unread_open_mpi_launch_on_a_crowded_node_adds_oversubscribe(monkeypatch) -> None:
    """Rank 0 under a launcher it cannot read (a shell between them): ``mpirun -n N``, with
    ``--oversubscribe`` where all N ranks share one node of fewer cores."""
    monkeypatch.delenv("OMPI_COMMAND", raising=False)
    many = str((os.cpu_count() or 1) + 1)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", many)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", many)
    assert launch_prefix(int(many)) == f"mpirun -n {many} --oversubscribe"
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1")  # spread over nodes
    assert launch_prefix(int(many)) == f"mpirun -n {many}"
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE")  # another MPI: its launcher takes no such flag
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE")
    assert launch_prefix(int(many)) == f"mpirun -n {many}"
