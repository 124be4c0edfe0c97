"""``trainer.backend``: sync gradient averaging over a gloo group set up from the MPI
communicator gives the MPI path's weights (tests/test_gan_stop.py's gloo run, stopped twice and
resumed, ends with them), and bad choices are refused in one line.

Why exact equality at 2 ranks: both paths average each gradient element as one two-term float
sum scaled by 1/2, and a + b == b + a in IEEE arithmetic, so no rounding can differ. At 4 ranks
the all-reduce algorithms add the four terms in different orders; that moves a sum by at most a
few units in the last place, so after a few SGD steps the weights agree to 1e-6 (weights are
~0.5, one ulp is 6e-8), and the measured difference is 3e-8.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from mpi4py import MPI

from evogan.cli import main
from evogan.config import load_config
from evogan.config.trainer import TrainerConfig
from evogan.distributed.cuda_aware import mpi_cuda_aware
from evogan.distributed.torch_group import TorchGroup
from evogan.errors import ConfigError, EvoganError
from evogan.gan3d.training.setup import choose_ring_buffers, rank_backend
from evogan.store import load_weights, read_metrics

from .conftest import TINY_GAN, TINY_GAN_SIZE, mpirun

SCRIPT, CONFIG = TINY_GAN
SIZE = TINY_GAN_SIZE
GLOO = ["--set", "trainer.backend=gloo"]
OUTPUTS = ("best_model.h5", "last_model.h5", "discriminator.h5")
LOSSES = ("d_loss", "g_loss", "d_energy", "g_ecal_sum")


def _same_weights(run: Path, other: Path) -> None:
    for name in OUTPUTS:
        mine, _ = load_weights(run / name)
        theirs, _ = load_weights(other / name)
        assert mine.keys() == theirs.keys()
        assert all(mine[k].equal(theirs[k]) for k in theirs), name


def _losses(run: Path) -> list[list[float]]:
    return [[r[k] for k in LOSSES] for r in read_metrics(run / "metrics.jsonl", "epoch")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tiny_gan_run: Path) -> dict[str, Path]:
    """2-rank tiny-spec trainings: MPI (shared), and MPI overlapped with backward. The gloo
    run of the same steps, stopped twice and resumed on the way, is tests/test_gan_stop.py's,
    which compares its weights and losses with the MPI run's."""
    root = tmp_path_factory.mktemp("gan-backend")
    overlap = ["--set", "trainer.backend=mpi", "--set", "trainer.overlap=true"]
    done = mpirun(2, [SCRIPT, CONFIG, "--run-dir", str(root / "mpi-overlap"), *SIZE, *overlap])
    assert done.returncode == 0, done.stderr[-3000:]
    return {"mpi": tiny_gan_run, "mpi-overlap": root / "mpi-overlap"}


@pytest.mark.mpi
@pytest.mark.slow
def test_overlapped_mpi_at_two_ranks_gives_the_weights_of_the_blocking_path(
    runs: dict[str, Path],
) -> None:
    _same_weights(runs["mpi-overlap"], runs["mpi"])
    assert _losses(runs["mpi-overlap"]) == _losses(runs["mpi"])
    summary = json.loads((runs["mpi-overlap"] / "summary.json").read_text())
    calls = [
        [r[net]["calls"] for net in ("generator", "discriminator")] for r in summary["exchange"]
    ]
    assert calls == [[12, 6], [12, 6]]  # 6 steps: 2 generator updates, 1 discriminator update


@pytest.mark.mpi
@pytest.mark.slow
def test_a_failing_rank_ends_a_gloo_job_promptly_with_its_rank_named(tmp_path: Path) -> None:
    """The failing rank releases its group and leaves; the launcher ends the other rank."""
    fail = ["--fail-rank", "1", "--fail-step", "1"]
    args = [SCRIPT, CONFIG, "--run-dir", str(tmp_path / "run"), *SIZE, *GLOO, *fail]
    done = mpirun(2, args, timeout=60)
    assert done.returncode != 0
    assert "rank 1 of 2 on" in done.stderr and "injected failure at epoch 0 step 1" in done.stderr


@pytest.fixture(scope="module")
def backend_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One 4-rank launch of tests/mpi_scripts/backend_check.py."""
    out = tmp_path_factory.mktemp("backends") / "report.json"
    done = mpirun(4, ["tests/mpi_scripts/backend_check.py", "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("overlapped", ["gloo", "mpi-overlap"])
def test_overlapped_allreduce_matches_mpi_at_four_ranks(
    backend_report: dict, overlapped: str
) -> None:
    mpi = [np.array(r["weights"]) for r in backend_report["mpi"]]
    other = [np.array(r["weights"]) for r in backend_report[overlapped]]
    assert all(np.array_equal(w, other[0]) for w in other)  # replicas stay identical
    assert np.abs(other[0] - mpi[0]).max() < 1e-6  # summation order only (module docstring)
    assert np.abs(mpi[0]).max() > 0.1
    first = backend_report[overlapped][0]
    assert first["calls"] == 6 and first["buckets"] == 3
    # Two buckets per step start from gradient hooks during backward; the third holds the
    # unused layer and starts (as zeros) only when exchange() is called.
    assert first["started_in_backward"] == 2 * 6


def test_torch_groups_over_mpi_open_side_by_side_and_close_twice() -> None:
    """A pruned search keeps several trainings open in one process: each gets its own group."""
    first, second = TorchGroup(MPI.COMM_SELF, "gloo"), TorchGroup(MPI.COMM_SELF, "gloo")
    values = torch.arange(4.0)
    first.allreduce(values).wait()
    second.allreduce(values).wait()
    assert values.tolist() == [0.0, 1.0, 2.0, 3.0]  # a sum over one rank
    for group in (first, second, first):
        group.close()


def test_backend_choice_resolves_per_mode_and_device() -> None:
    assert rank_backend(TrainerConfig(), "cpu", 2) == "mpi"  # auto on CPU
    assert rank_backend(TrainerConfig(backend="gloo"), "cpu", 2) == "gloo"
    assert rank_backend(TrainerConfig(mode="arar"), "cuda:0", 4) == "mpi"  # rings use MPI
    expected = "nccl" if torch.distributed.is_nccl_available() else "mpi"
    assert rank_backend(TrainerConfig(device="cuda"), "cuda:0", 2) == expected
    assert rank_backend(TrainerConfig(device="cuda"), "cuda:0", 1) == "mpi"  # nothing to reduce
    shared = TrainerConfig(device="cuda")
    assert rank_backend(shared, "cuda:0", 2, sharing=2) == "mpi"  # two ranks on one GPU
    with pytest.raises(
        EvoganError, match=r"^trainer\.backend = 'nccl' needs a GPU per rank, but 2"
    ):
        rank_backend(TrainerConfig(device="cuda", backend="nccl"), "cuda:0", 2, sharing=2)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["trainer.backend=nccl"],
            "trainer.backend = 'nccl' needs trainer.device = 'cuda', got trainer.device = 'cpu'; "
            "on CPU use trainer.backend: mpi, gloo or auto",
        ),
        (
            ["trainer.backend=gloo", "trainer.mode=arar"],
            "trainer.backend = 'gloo' applies to trainer.mode = 'sync' only (arar rings use "
            "MPI); use trainer.backend: mpi or auto",
        ),
        (["trainer.backend=ucc"], "trainer.backend = 'ucc' is not allowed"),
        (
            ["trainer.overlap=true", "trainer.backend=gloo"],
            "trainer.overlap = true applies to trainer.backend = 'mpi' (the gloo backend always "
            "overlaps); remove trainer.overlap",
        ),
        (
            ["trainer.overlap=true", "trainer.mode=arar"],
            "trainer.overlap = true applies to trainer.mode = 'sync' only (arar rings never "
            "wait); remove trainer.overlap",
        ),
        (
            ["trainer.overlap=true", "trainer.device=cuda"],
            "trainer.overlap = true applies to trainer.device = 'cpu' (it overlaps host buffers); "
            "on GPUs remove it: trainer.backend nccl or auto overlap on the device",
        ),
        (
            ["trainer.ring_buffers=device"],
            "trainer.ring_buffers = 'device' applies to trainer.mode = 'arar' only (sync mode's "
            "buffers follow trainer.backend); remove trainer.ring_buffers",
        ),
        (
            ["trainer.mode=arar", "trainer.rma=true", "trainer.ring_buffers=device"],
            "trainer.ring_buffers = 'device' cannot go with trainer.rma = true (RMA windows are "
            "host memory); use trainer.ring_buffers: auto or host, or trainer.rma: false",
        ),
    ],
)
def test_bad_backend_choices_are_refused_in_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(CONFIG, overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_nccl_without_a_gpu_is_refused_before_a_run_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    cuda = ["--set", "trainer.device=cuda", "--set", "trainer.backend=nccl"]
    assert main(["train", CONFIG, "--run-dir", str(run), *cuda]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line == (
        "evogan: error: trainer.backend = 'nccl' needs a CUDA GPU but torch sees none; use "
        "trainer.backend: mpi, gloo or auto with trainer.device: cpu"
    )
    assert not run.exists()


def test_the_mpi_library_answers_whether_it_is_cuda_aware() -> None:
    if "Open MPI" in MPI.Get_library_version():
        assert mpi_cuda_aware() in (True, False)  # Open MPI has MPIX_Query_cuda_support
    assert mpi_cuda_aware() in (True, False, None)


def test_ring_buffers_go_on_the_gpu_only_where_every_rank_s_mpi_can_move_them() -> None:
    def choice(aware: list[bool | None], gpu: bool = True, **keys: object) -> tuple[bool, str]:
        return choose_ring_buffers(TrainerConfig(mode="arar", **keys), gpu, aware)

    assert choice([True, True]) == (True, "this MPI is CUDA-aware")
    assert choice([True, False]) == (False, "this MPI is not CUDA-aware")
    assert choice([None, None])[0] is False  # auto does not guess
    assert choice([None], ring_buffers="device")[0] is True  # the user knows their MPI
    assert choice([True], ring_buffers="host") == (False, "trainer.ring_buffers: host")
    assert choice([True], rma=True)[0] is False  # RMA windows are host memory
    assert choice([], gpu=False)[0] is False  # CPU runs keep numpy buffers unless asked
    assert choice([], gpu=False, ring_buffers="device")[0] is True
    with pytest.raises(EvoganError) as error:
        choice([True, False], ring_buffers="device")
    assert str(error.value) == (
        "trainer.ring_buffers = 'device' but the MPI on rank 1 says it is not CUDA-aware; use "
        "trainer.ring_buffers: auto or host, or an MPI built with CUDA support"
    )
