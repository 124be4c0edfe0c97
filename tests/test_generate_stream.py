"""Streaming ``evogan generate``: a shower is a function of the seed and its event number, so a
generation splits over ranks (real ``mpirun``, one file per rank joined by virtual datasets) and
any event comes out again bit for bit; a stop or a refusal leaves nothing behind."""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from evogan.cli import main
from evogan.commands.generate_stream import Request, check_ranks, rank_range
from evogan.data.reader import ShowerDataset, open_files
from evogan.errors import EXIT_STOPPED, EXIT_USER_ERROR, EvoganError
from evogan.gan3d.model.blocks import NoiseInjection, event_keys, event_normal
from evogan.gan3d.model.generate import event_conditions, generate_events
from evogan.gan3d.model.networks import build_models
from evogan.gan3d.model.spec import GanSpec
from tests.conftest import kill_job, launch, mpirun, rank_pid
from tests.gan_fixtures import one_thread, save_tiny_generator, tiny_spec, write_showers

STOPPED = (
    "evogan: stopped by SIGTERM before anything resumable was written; start the command again"
)


def test_an_events_draws_depend_on_the_seed_and_its_number_only() -> None:
    keys = event_keys(3, "latent")
    numbers = torch.arange(1000)
    whole = event_normal(keys, numbers, (16,))
    pieces = [event_normal(keys, numbers[a:b], (16,)) for a, b in ((0, 1), (1, 613), (613, 1000))]
    assert torch.equal(torch.cat(pieces), whole)
    order = torch.randperm(1000, generator=torch.Generator().manual_seed(0))
    assert torch.equal(event_normal(keys, numbers[order], (16,)), whole[order])
    assert abs(float(whole.mean())) < 0.03 and abs(float(whole.std()) - 1) < 0.03
    for other in (
        event_normal(keys, numbers + 2**32, (16,)),
        event_normal(event_keys(4, "latent"), numbers, (16,)),
    ):
        assert not (other == whole).all(dim=1).any()  # no event shares another's draws
    energy, theta = event_conditions(3, np.arange(20000), (1.0, 1000.0), (1.0, 2.0), True)
    assert energy.min() >= 1.0 and energy.max() <= 1000.0 and theta.min() >= 1.0
    assert 25 < np.median(energy) < 40  # log-uniform: the median near sqrt(1000) = 31.6
    again, _ = event_conditions(3, np.arange(19990, 20010), (1.0, 1000.0), None, True)
    np.testing.assert_array_equal(again[:10], energy[19990:])


def test_per_cell_noise_goes_with_the_event_number_not_the_row() -> None:
    raw = tiny_spec().model_dump()
    for block in raw["generator"]:
        block["noise"] = True
    spec = GanSpec.model_validate(raw)
    generator, _ = build_models(spec, torch.Generator().manual_seed(0))
    layers = [m for m in generator.modules() if isinstance(m, NoiseInjection)]
    with torch.no_grad():
        for layer in layers:
            layer.scale.fill_(0.5)
    energy, theta = np.full(4, 100.0, np.float32), np.full(4, 1.5, np.float32)
    numbers = np.array([10, 11, 12, 2**35])
    with one_thread():  # at its place in a batch of its size an event's shower is bit-exact
        made = generate_events(spec, generator, energy, theta, 3, numbers)
        others = generate_events(spec, generator, energy, theta, 3, np.array([10, 7, 12, 8]))
        other_seed = generate_events(spec, generator, energy, theta, 4, numbers)
    np.testing.assert_array_equal(others[[0, 2]], made[[0, 2]])
    assert not np.array_equal(others[1], made[1]) and not np.array_equal(made[0], made[2])
    assert not (made == other_seed).all(axis=(1, 2, 3)).any()
    assert all(layer.events is None for layer in layers)  # restored after the pass
    single = NoiseInjection(1)
    with torch.no_grad():
        single.scale.fill_(1.0)
    keys, rows = event_keys(3, "noise", 0), torch.tensor([5, 6, 7])
    single.events = (keys, rows)
    drawn = single(torch.zeros(3, 1, 2, 3, 4))
    assert torch.equal(drawn, event_normal(keys, rows, (1, 2, 3, 4)))


@pytest.mark.parametrize(
    ("first", "events", "batch", "ranks"),
    [(0, 300, 64, 2), (5, 1, 8, 1), (7, 1000, 16, 3), (1000, 17, 4, 5), (2**40, 10**6, 512, 7)],
)
def test_ranks_take_whole_grid_batches_covering_the_request_once(
    first: int, events: int, batch: int, ranks: int
) -> None:
    request = Request(first, events, batch, seed=0)
    spans = [rank_range(request, rank, ranks) for rank in range(ranks)]
    assert spans[0][0] == first and spans[-1][1] == first + events
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    assert all(low % batch == 0 for low, _ in spans[1:])  # a batch is never split between ranks
    batches = [-(-high // batch) - low // batch for low, high in spans]
    assert max(batches) - min(batches) <= 1 and min(batches) >= 1
    check_ranks(request, ranks)
    with pytest.raises(
        EvoganError, match=f"lower --batch-size to {batch // 2} or run fewer ranks$"
    ):
        check_ranks(Request(0, batch, batch, seed=0), 2)  # one batch for two ranks


def test_conditions_from_a_file_are_taken_from_the_first_event_on(tmp_path: Path) -> None:
    source = write_showers(tmp_path / "source.h5", 12, seed=2)
    model = str(save_tiny_generator(tmp_path / "g.h5", seed=4))
    out = tmp_path / "taken.h5"
    args = ["--conditions-from", str(source), "--first-event", "3", "--batch-size", "4"]
    assert main(["generate", model, *args, "--events", "6", "--out", str(out)]) == 0
    held = ShowerDataset.from_files(open_files(source)).read()
    made = ShowerDataset.from_files(open_files(out)).read()
    np.testing.assert_array_equal(made.energy, held.energy[3:9])
    np.testing.assert_allclose(made.theta, held.theta[3:9], rtol=1e-6)
    with h5py.File(out, "r") as handle:
        np.testing.assert_array_equal(handle["event"][:], np.arange(3, 9))
    assert main(["generate", model, *args, "--events", "10", "--out", str(out)]) == 2
    assert main(["generate", model, "--events", "2", "--first-event", "-1", "--out", str(out)]) == 2


def _generate(model: Path, out: Path, *extra: str) -> list[str]:
    return ["-m", "evogan", "generate", str(model), "--seed", "5", "--out", str(out), *extra]


@pytest.mark.mpi
@pytest.mark.slow
def test_two_ranks_write_the_showers_of_one_rank_and_any_event_comes_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one-rank file and the regenerated event are made in this process, on one thread as
    the ranks run (:func:`one_thread`)."""
    model = save_tiny_generator(tmp_path / "g.h5", seed=4)
    size = ["--events", "150", "--batch-size", "32"]
    two, one, again = tmp_path / "two" / "gen.h5", tmp_path / "one.h5", tmp_path / "again.h5"
    two.parent.mkdir()
    done = mpirun(2, _generate(model, two, *size), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "150 showers" in done.stdout and "showers/s on 2 rank(s)" in done.stdout
    assert sorted(p.name for p in two.parent.iterdir()) == [
        "gen.h5",
        "gen.rank0000.h5",
        "gen.rank0001.h5",
    ]
    with one_thread():
        assert main(_generate(model, one, *size)[2:]) == 0
    with h5py.File(one, "r") as single, h5py.File(two, "r") as joined:
        assert sorted(single) == sorted(joined) == ["ECAL", "energy", "event", "sum", "theta"]
        assert joined["ECAL"].is_virtual and list(joined.attrs["parts"]) == [
            "gen.rank0000.h5",
            "gen.rank0001.h5",
        ]
        for key in single:
            np.testing.assert_array_equal(joined[key][:], single[key][:], err_msg=key)
        with h5py.File(two.parent / "gen.rank0001.h5", "r") as part:
            assert part["event"][0] == 64  # rank 1 starts at a batch of the grid
        kept = single["ECAL"][97], single["energy"][97]
    with one_thread():
        assert (
            main(_generate(model, again, "--first-event", "97", "--events", "1", *size[2:])[2:])
            == 0
        )
    with h5py.File(again, "r") as handle:
        assert handle["event"][:].tolist() == [97]
        np.testing.assert_array_equal(handle["ECAL"][0], kept[0])
        assert handle["energy"][0] == kept[1]
    chunk = ShowerDataset.from_files(open_files(two)).read()  # evogan reads the joined file
    assert len(chunk) == 150
    (two.parent / "gen.rank0001.h5").unlink()
    capsys.readouterr()
    assert main(["data", "inspect", str(two)]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.strip() == (
        f"evogan: error: {two} joins the showers of gen.rank0001.h5, which is missing beside "
        "it; keep the files written with it together, or generate them again"
    )


@pytest.mark.mpi
@pytest.mark.slow
def test_refusals_on_two_ranks_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    model = save_tiny_generator(tmp_path / "g.h5", seed=4)
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "gen.h5"
    huge = mpirun(2, _generate(model, out, "--events", "1000000000000"), timeout=300)
    assert huge.returncode == EXIT_USER_ERROR
    [line] = [line for line in huge.stderr.splitlines() if line.startswith("evogan:")]
    assert line.startswith("evogan: error: --events 1,000,000,000,000 (") and (
        " PB of disk, more than the " in line and f" free for {out}; ask for" in line
    ), line
    (folder / "gen.rank0001.h5").mkdir()  # only rank 1 cannot write its part
    blocked = mpirun(2, _generate(model, out, "--events", "8", "--batch-size", "4"), timeout=300)
    assert blocked.returncode == EXIT_USER_ERROR
    lines = [line for line in blocked.stderr.splitlines() if line.startswith("evogan:")]
    assert lines == [
        f"evogan: error: rank 1 of 2: output path must be a file, but {folder}/gen.rank0001.h5 "
        "is a directory"
    ]
    assert sorted(p.name for p in folder.iterdir()) == ["gen.rank0001.h5"]


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, 2])
def test_sigterm_to_one_rank_stops_every_rank_and_leaves_no_file(
    tmp_path: Path, ranks: int
) -> None:
    model = save_tiny_generator(tmp_path / "g.h5", seed=4)
    folder = tmp_path / "out"
    folder.mkdir()
    process = launch(
        ranks, _generate(model, folder / "gen.h5", "--events", "20000", "--batch-size", "8")
    )
    deadline = time.monotonic() + 240
    while len(list(folder.glob(".gen.*.tmp"))) < ranks:  # every rank is writing
        if process.poll() is not None or time.monotonic() > deadline:
            kill_job(process)
            pytest.fail(f"the parts never appeared: {process.communicate()[1][-2000:]}")
        time.sleep(0.05)
    time.sleep(0.2)
    os.kill(rank_pid(process, ranks - 1), signal.SIGTERM)
    _, err = process.communicate(timeout=240)
    assert process.returncode == EXIT_STOPPED, err[-3000:]
    said = [line for line in err.splitlines() if line.startswith("evogan:")]
    assert [line for line in said if not line.startswith("evogan: hint:")] == [STOPPED]
    assert "Traceback" not in err
    assert list(folder.iterdir()) == []
