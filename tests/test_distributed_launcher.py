"""The resume command repeats the launch the job was started with (evogan.distributed.launcher):
Open MPI's ``mpirun`` with its own arguments as given, read under a real ``mpirun``."""

from __future__ import annotations

import shlex
import sys

from evogan.distributed.launcher import mpirun_prefix, resume_line
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
