"""Open MPI's ``self`` transport for a process no launcher started, and never for real ranks."""

from __future__ import annotations

import os

import pytest

from evogan.distributed.transports import self_transport_when_alone, started_by_launcher
from tests.conftest import mpirun

BTL = "OMPI_MCA_btl"  # Open MPI's MCA names are case-sensitive


@pytest.mark.parametrize(
    ("environment", "launched"),
    [
        ({}, False),
        ({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_MCA_pml": "ob1", "PATH": "/bin"}, False),
        ({"PMIX_RANK": "0", "PMIX_NAMESPACE": "prterun-x@1"}, True),  # mpirun / prterun
        ({"OMPI_COMM_WORLD_SIZE": "1"}, True),
        ({"SLURM_PROCID": "3", "SLURM_JOB_ID": "77"}, True),  # srun
        ({"PMI_RANK": "1", "PMI_SIZE": "4"}, True),  # srun --mpi=pmi2, mpiexec.hydra
    ],
)
def test_launchers_are_told_by_their_variables(environment, launched) -> None:
    assert started_by_launcher(environment) is launched


def test_alone_the_block_runs_with_self_and_the_variable_leaves_after(monkeypatch) -> None:
    for name in list(os.environ):
        if started_by_launcher({name: ""}):
            monkeypatch.delenv(name)
    monkeypatch.delenv(BTL, raising=False)
    with self_transport_when_alone():
        assert os.environ[BTL] == "self"
    assert BTL not in os.environ
    with pytest.raises(RuntimeError), self_transport_when_alone():
        raise RuntimeError("a failing command")
    assert BTL not in os.environ


def test_a_user_setting_is_kept(monkeypatch) -> None:
    monkeypatch.setenv(BTL, "self,sm,tcp")
    with self_transport_when_alone():
        assert os.environ[BTL] == "self,sm,tcp"
    assert os.environ[BTL] == "self,sm,tcp"


def test_ranks_that_mpirun_started_keep_open_mpis_transports() -> None:
    script = (
        "import os; from evogan.distributed.transports import self_transport_when_alone as s\n"
        "with s():\n"
        "    from mpi4py import MPI\n"
        "    total = MPI.COMM_WORLD.allreduce(MPI.COMM_WORLD.rank + 1)\n"
        "    print(os.environ.get('OMPI_MCA_btl'), total)\n"
    )
    done = mpirun(2, ["-c", script], timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["None 3", "None 3"]
