"""Refusals that need no data come before the data and torch load: a run directory named by
``run.name`` / ``campaign.name`` that holds an earlier run, and the RMSprop baseline under
mpirun. One line, exit 2, nothing written; under mpirun on every rank. A lone process loads no
MPI to refuse; under mpirun the RMSprop refusal comes before MPI too (the launcher's
environment gives the rank count), the run directory is checked by rank 0 for all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, mpirun

PROBE = """
import json, sys
from evogan.cli import main
from evogan.distributed import failure

loaded = []
ending = failure.end


def end(exc):
    loaded.append(sorted({"torch", "mpi4py.MPI"} & set(sys.modules)))
    return ending(exc)


failure.end = end
code = main(sys.argv[1:])
print(json.dumps([code, loaded]), flush=True)
"""
"""``evogan ARGV`` through the CLI's ``main`` in a fresh process, which says its exit code and,
for each ending, whether torch or MPI had loaded when the command was refused."""

RMSPROP = str(REPO / "configs" / "regressor_rmsprop.yaml")
TAKEN = (
    "run directory {} already exists and is not empty; choose a new --run-dir / run.name or "
    "remove it"
)
ONE_PROCESS = (
    "evogan train for the regressor runs on one process (RMSprop), got 2 ranks; run it "
    "without mpirun, or use evogan evolve for the island GA"
)


def _said(stdout: str) -> list[list]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("[")]


@pytest.mark.parametrize(
    ("argv", "section"),
    [
        (["train", RMSPROP], "run"),
        (["evolve", "configs/regressor_ga.yaml"], "run"),
        (["train", "configs/gan3d_tiny.yaml"], "run"),
        (["search", "configs/arch_search_tiny.yaml", "--set", "ranks_per_group=1"], "campaign"),
    ],
)
def test_a_taken_run_name_is_refused_before_the_data_torch_and_mpi(
    tmp_path: Path, argv: list[str], section: str
) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine").write_text("an earlier run")
    names = [f"{section}.root={tmp_path}", f"{section}.name=taken"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv, "--set", *names],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert _said(done.stdout) == [[2, [[]]]], done.stderr
    assert done.stderr.splitlines() == [f"evogan: error: {TAKEN.format(taken)}"]
    assert "data:" not in done.stdout
    assert list(tmp_path.iterdir()) == [taken] and list(taken.iterdir()) == [taken / "mine"]


def test_rmsprop_under_mpirun_is_refused_on_every_rank_before_torch_and_mpi(
    tmp_path: Path,
) -> None:
    """Every rank refuses from the launcher's variables, before the run directory is checked
    (MPI would load for that), ends with exit code 2, and writes nothing; one line says why.
    Then, MPI started and those variables gone, the same check asks MPI: the fallback for
    a launcher whose environment says nothing."""
    fallback = (
        "import os\n"
        "from evogan.distributed.failure import launched_ranks\n"
        "from evogan.errors import EvoganError\n"
        "from evogan.regressor.one_process import refuse_several_ranks\n"
        "for name in ('OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_SIZE', 'MPI_LOCALNRANKS'):\n"
        "    os.environ.pop(name, None)\n"
        "assert launched_ranks() == 1\n"
        "try:\n"
        "    refuse_several_ranks()\n"
        "except EvoganError as refused:\n"
        "    print(json.dumps([str(refused)]), flush=True)\n"
        "sys.exit(code)\n"
    )
    run = tmp_path / "run"
    args = ["-c", PROBE + fallback, "train", RMSPROP, "--run-dir", str(run)]
    done = mpirun(2, args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    said = _said(done.stdout)
    assert sorted(said, key=len) == [[ONE_PROCESS], [ONE_PROCESS], [2, [[]]], [2, [[]]]], said
    errors = [line for line in done.stderr.splitlines() if line.startswith("evogan:")]
    assert errors == [f"evogan: error: {ONE_PROCESS}"]
    assert list(tmp_path.iterdir()) == []


def test_a_taken_run_name_under_mpirun_ends_every_rank_before_torch(tmp_path: Path) -> None:
    """Rank 0 looks (MPI loads for it to tell the others, torch does not) and every rank ends
    with exit code 2 and the one line, the earlier run untouched."""
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine").write_text("an earlier run")
    names = ["--set", f"run.root={tmp_path}", "run.name=taken"]
    done = mpirun(2, ["-c", PROBE + "sys.exit(code)\n", "train", "configs/gan3d_tiny.yaml", *names])
    assert done.returncode == 2, done.stderr[-3000:]
    assert _said(done.stdout) == [[2, [["mpi4py.MPI"]]], [2, [["mpi4py.MPI"]]]]
    errors = [line for line in done.stderr.splitlines() if line.startswith("evogan:")]
    assert errors == [f"evogan: error: {TAKEN.format(taken)}"]
    assert list(tmp_path.iterdir()) == [taken] and list(taken.iterdir()) == [taken / "mine"]
