"""Open MPI's ``self`` transport for a process no launcher started, and never for real ranks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
        ({"PMIX_RANK": "3", "SLURM_PROCID": "3"}, True),  # srun --mpi=pmix
        ({"PMI_RANK": "1", "PMI_SIZE": "4"}, True),  # srun --mpi=pmi2, mpiexec.hydra
        ({"SLURM_PROCID": "0", "SLURM_JOB_ID": "77"}, False),  # a Slurm job's batch script
        ({"PMIX_MCA_gds": "hash", "PRTE_MCA_verbose": "0", "PMIX_ROOT": "/opt/pmix"}, False),
        ({"HYDRA_HOST_FILE": "hosts", "PMI_PORT_RANGE": "7000:7100"}, False),
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


def _lone_process(first_import: str, backing: Path, exported: dict[str, str]) -> str:
    """Run ``first_import`` in a process that no launcher started, with the user's ``exported``
    settings; its OMPI_MCA_btl after."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not started_by_launcher({name: ""}) and name != BTL
    }
    environment.update(exported)
    environment["OMPI_MCA_btl_sm_backing_directory"] = str(backing)
    script = f"import os\n{first_import}\nprint(os.environ.get({BTL!r}))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    "exported", [{}, {"PMIX_MCA_gds": "hash", "PRTE_MCA_verbose": "0"}], ids=["plain", "mca"]
)
def test_a_lone_process_that_evogan_starts_mpi_in_leaves_no_segment(tmp_path, exported) -> None:
    """Plain mpi4py is the control: the PyPI Open MPI's shared-memory transport leaves its
    segment in the backing folder after a world of one. evogan's modules start MPI with the
    ``self`` transport only, also under PMIx settings that many sites export, and the variable
    does not outlive the start."""
    control, evogan = tmp_path / "control", tmp_path / "evogan"
    control.mkdir()
    evogan.mkdir()
    _lone_process("from mpi4py import MPI", control, exported)
    if not any(control.iterdir()):
        pytest.skip("this MPI leaves no shared-memory segment behind: nothing to avoid")
    assert _lone_process("import evogan.distributed.comm", evogan, exported) == "None"
    assert list(evogan.iterdir()) == []


def test_the_manifest_names_the_mpi_library_only_once_the_run_started_it() -> None:
    script = (
        "import sys\n"
        "from evogan.store.manifest import versions\n"
        "print(versions()['mpi'], 'mpi4py.MPI' in sys.modules)\n"
        "from evogan.distributed.mpi import MPI\n"
        "print(versions()['mpi'] == MPI.Get_library_version().splitlines()[0].strip())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["None False", "True"]
