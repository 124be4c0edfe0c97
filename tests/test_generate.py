"""``evogan generate``: showers from a generator file, readable by ``evogan data inspect``."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from evogan import logs
from evogan.cli import main
from evogan.data.reader import ShowerDataset, open_files
from evogan.data.synthetic import generate_showers as generate_synthetic
from evogan.data.synthetic import write_synthetic
from evogan.data.writer import ShowerWriter
from evogan.gan3d.model import precision as precision_module
from evogan.gan3d.model.generate import event_conditions, generate_events
from evogan.gan3d.model.model_file import load_generator
from tests.conftest import evogan_here
from tests.gan_fixtures import one_thread, save_tiny_generator, tiny_campaign


@pytest.mark.slow
def test_generate_then_inspect_round_trip(tmp_path: Path) -> None:
    model = save_tiny_generator(tmp_path / "g.h5", seed=4)
    out = tmp_path / "gan.h5"
    result = evogan_here(
        "generate",
        str(model),
        "--events",
        "20",
        "--energy-range",
        "50",
        "60",
        "--seed",
        "9",
        "--out",
        str(out),
        "--batch-size",
        "8",
    )
    assert result.returncode == 0, result.stderr
    inspected = evogan_here("data", "inspect", str(out), "--json")
    assert inspected.returncode == 0, inspected.stderr
    report = json.loads(inspected.stdout)
    assert report["events"] == 20 and report["layout"] == "evogan"
    made = {"generator": str(model), "spec": "gan3d-tiny-51x51x25", "precision": "float32"}
    assert report["made_by"] == {**made, "seed": 9}
    chunk = ShowerDataset.from_files(open_files(out)).read()
    assert chunk.ecal.shape == (20, 51, 51, 25)
    assert np.all((chunk.energy >= 50) & (chunk.energy <= 60))
    assert np.all((chunk.theta >= np.radians(60)) & (chunk.theta <= np.radians(120)))
    # The file holds exactly what the generator makes for events 0-19 of seed 9, each batch of
    # the grid of 8 run whole (the last one for events 16-23), on one thread as the command ran.
    spec, generator, _ = load_generator(model)
    angles = (np.radians(60.0), np.radians(120.0))
    again = []
    with one_thread():
        for start in range(0, 20, 8):
            numbers = np.arange(start, start + 8)
            energy, theta = event_conditions(9, numbers, (50.0, 60.0), angles)
            made = generate_events(spec, generator, energy, theta, 9, numbers)
            again.append(made[: 20 - start])
    again = np.concatenate(again)
    again[again < 1e-6] = 0.0  # the reader's cell threshold
    np.testing.assert_array_equal(chunk.ecal, again)
    with h5py.File(out, "r") as handle:
        np.testing.assert_array_equal(handle["event"][:], np.arange(20))
        assert handle.attrs["batch_size"] == 8


def _conditions(path: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    """Energies (GeV), angles (degrees) and attributes of a generated file."""
    chunk = ShowerDataset.from_files(open_files(path)).read()
    with h5py.File(path, "r") as handle:
        attrs = dict(handle.attrs)
    return chunk.energy, np.degrees(chunk.theta), attrs


@pytest.mark.slow
def test_generation_draws_the_trained_conditions_and_notes_extrapolation(
    tmp_path: Path, capsys
) -> None:
    trained = {"energy_gev": [20.0, 40.0], "theta_deg": [80.0, 100.0]}
    model = str(save_tiny_generator(tmp_path / "g.h5", seed=4, trained_on=trained))
    base = ["generate", model, "--events", "30", "--batch-size", "16", "--out"]
    assert main([*base, str(tmp_path / "default.h5")]) == 0
    assert "note:" not in capsys.readouterr().err
    energy, theta, attrs = _conditions(tmp_path / "default.h5")
    assert energy.min() >= 20 and energy.max() <= 40 and np.ptp(energy) > 10
    assert theta.min() >= 80 - 1e-4 and theta.max() <= 100 + 1e-4 and np.ptp(theta) > 10
    assert list(attrs["energy_range"]) == [20, 40] and list(attrs["theta_range_deg"]) == [80, 100]
    edge = ["--energy-range", "19.2", "40.8", "--theta-range", "79", "101"]  # within 5% of span
    assert main([*base, str(tmp_path / "edge.h5"), *edge]) == 0
    assert "note:" not in capsys.readouterr().err
    wide = ["--energy-range", "10", "40", "--theta-range", "60", "120"]
    assert main([*base, str(tmp_path / "wide.h5"), *wide]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: energies drawn by --energy-range span 10-40 GeV, beyond the 20-40 GeV this "
        "generator was trained on: showers outside that range are extrapolations",
        "note: angles drawn by --theta-range span 60-120 degrees, beyond the 80-100 degrees "
        "this generator was trained on: showers outside that range are extrapolations",
    ]
    energy, theta, _ = _conditions(tmp_path / "wide.h5")
    assert energy.min() < 20 and theta.min() < 80
    plain = str(save_tiny_generator(tmp_path / "plain.h5", seed=4))  # records no conditions
    assert main(["generate", plain, "--events", "30", "--out", str(tmp_path / "plain-out.h5")]) == 0
    assert "note:" not in capsys.readouterr().err
    energy, theta, attrs = _conditions(tmp_path / "plain-out.h5")
    assert list(attrs["energy_range"]) == [2, 500] and energy.max() > 40
    assert theta.min() >= 60 - 1e-4 and theta.max() <= 120 + 1e-4


def _shower_file(
    path: Path, events: int, theta_deg: tuple[float, float], seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic showers of 10-100 GeV at angles in ``theta_deg`` written to ``path``; their
    energies and angles (rad)."""
    rng = np.random.default_rng(seed)
    energy = rng.uniform(10.0, 100.0, events).astype(np.float32)
    theta = np.radians(rng.uniform(*theta_deg, events)).astype(np.float32)
    with ShowerWriter(path, (51, 51, 25)) as writer:
        writer.append(generate_synthetic(energy, rng, theta=theta), energy, theta)
    return energy, theta


@pytest.mark.slow
def test_conditions_from_shower_files_are_taken_in_order(tmp_path: Path, capsys) -> None:
    source = tmp_path / "geant4.h5"
    energy, theta = _shower_file(source, 12, (70.0, 110.0), seed=0)
    trained = {"energy_gev": [10.0, 100.0], "theta_deg": [80.0, 100.0]}
    model = str(save_tiny_generator(tmp_path / "g.h5", seed=4, trained_on=trained))
    out = tmp_path / "matched.h5"
    args = ["generate", model, "--conditions-from", str(source), "--out", str(out)]
    assert main([*args, "--events", "10"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and notes[0].startswith(
        "note: the --conditions-from showers' angles span 7"
    )
    chunk = ShowerDataset.from_files(open_files(out)).read()
    np.testing.assert_array_equal(chunk.energy, energy[:10])
    np.testing.assert_allclose(chunk.theta, theta[:10], rtol=1e-6)
    with h5py.File(out, "r") as handle:
        assert list(handle.attrs["conditions_from"]) == [str(source)]
        assert list(handle.attrs["energy_range"]) == [energy[:10].min(), energy[:10].max()]
    assert main([*args[:-1], str(tmp_path / "all.h5")]) == 0  # no --events: every shower
    capsys.readouterr()
    assert len(ShowerDataset.from_files(open_files(tmp_path / "all.h5"))) == 12
    refusals = {
        "--events 13 is more than the 12 showers of --conditions-from": ["--events", "13"],
        "--conditions-from takes the energies and angles of": ["--energy-range", "10", "20"],
        f"--conditions-from takes the energies and angles of {source}; drop --log-uniform": [
            "--log-uniform"
        ],
    }
    for message, extra in refusals.items():
        assert main([*args[:-1], str(tmp_path / "never.h5"), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and message in err, err
    assert main(["generate", model, "--out", str(tmp_path / "never.h5")]) == 2
    assert "--events is required unless --conditions-from" in capsys.readouterr().err
    assert not (tmp_path / "never.h5").exists()


def test_generate_errors_are_one_line_and_leave_no_file(tmp_path: Path, capsys) -> None:
    model = save_tiny_generator(tmp_path / "g.h5", seed=4)
    out = tmp_path / "x.h5"
    assert main(["generate", str(model), "--events", "0", "--out", str(out)]) == 2
    assert "--events must be at least 1, got 0" in capsys.readouterr().err
    assert main(["generate", str(tmp_path / "none.h5"), "--events", "2", "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
    not_model = tmp_path / "data.h5"
    not_model.write_bytes(b"not hdf5")
    assert main(["generate", str(not_model), "--events", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not a readable HDF5 file" in err
    showers = write_synthetic(tmp_path / "showers.h5", 4, (10.0, 20.0), seed=0)
    assert main(["generate", str(showers), "--events", "2", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"evogan: error: {showers} holds showers, not a generator; pass a generator file or a "
        "gan3d run directory (shower files go to evogan validate and data inspect)"
    )
    for device, problem in (
        ("tpu", "--device must be cpu, cuda or cuda:N, got 'tpu'"),
        ("cuda:x", "--device must be cpu, cuda or cuda:N, got 'cuda:x'"),
    ):
        assert (
            main(["generate", str(model), "--events", "2", "--out", str(out), "--device", device])
            == 2
        )
        assert problem in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert (
            main(["generate", str(model), "--events", "2", "--out", str(out), "--device", "cuda"])
            == 2
        )
        assert "--device cuda: torch sees no GPU here; use --device cpu" in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.glob(".x.h5*")) == []


def test_a_search_campaign_is_refused_naming_its_best_generator(tmp_path: Path, capsys) -> None:
    campaign = tiny_campaign(tmp_path / "camp", {"c-best": 2.0, "c-newest": 5.0})
    best = campaign / "candidates" / "c-best" / "member-0" / "best_model.h5"
    out = tmp_path / "x.h5"
    assert main(["generate", str(campaign), "--events", "2", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"evogan: error: {campaign} is a search campaign, not a run; pass the generator of its "
        f"best candidate c-best (fitness 2), {best}, or another candidate's (evogan report "
        f"{campaign} --out DIR ranks them)"
    )
    assert not out.exists() and list(tmp_path.glob(".x.h5*")) == []
    assert main(["generate", str(best), "--events", "2", "--out", str(out)]) == 0
    from evogan.commands.options import CAMPAIGN_MANIFEST
    from evogan.search.campaign import MANIFEST

    assert CAMPAIGN_MANIFEST == MANIFEST  # known without importing evogan.search


def _six_showers(tmp_path: Path, option: str, value: str) -> tuple[np.ndarray, dict]:
    """Six showers of the tiny generator (seed 4) from noise seed 3 with ``option value``, and
    the written file's attributes."""
    model = save_tiny_generator(tmp_path / "g.h5", seed=4)
    out = tmp_path / f"{value}.h5"
    args = ["generate", str(model), "--events", "6", "--seed", "3", "--out", str(out)]
    assert main([*args, option, value]) == 0
    with h5py.File(out, "r") as handle:
        attrs = dict(handle.attrs)
    return ShowerDataset.from_files(open_files(out)).read().ecal, attrs


@pytest.mark.slow
def test_the_fft_convolution_generates_the_same_showers(tmp_path: Path) -> None:
    """``--convolution fft`` (the GPU default) against the direct form on this CPU: the tiny
    generator's 27-tap convolution runs as FFTs, to float32 rounding of the same showers."""
    direct, _ = _six_showers(tmp_path, "--convolution", "direct")
    fft, _ = _six_showers(tmp_path, "--convolution", "fft")
    assert 0 < np.abs(fft - direct).max() <= 1e-5 * np.abs(direct).max()


@pytest.mark.slow
def test_bf16_generation_stays_within_bf16_rounding_and_says_so(tmp_path: Path) -> None:
    """``--precision bf16`` (the fast setting on CPUs with bf16 arithmetic) against float32 from
    the same seed: every cell within 5% of the largest cell (measured up to 2.2% over three tiny
    generators: bf16 keeps 8 bits in every layer) and each shower's sum within 2% (measured up
    to 0.5%); the file records the precision."""
    reference, reference_attrs = _six_showers(tmp_path, "--precision", "float32")
    fast, fast_attrs = _six_showers(tmp_path, "--precision", "bf16")
    assert (reference_attrs["precision"], fast_attrs["precision"]) == ("float32", "bf16")
    assert 0 < np.abs(fast - reference).max() <= 5e-2 * reference.max()
    sums = reference.sum(axis=(1, 2, 3))
    np.testing.assert_allclose(fast.sum(axis=(1, 2, 3)), sums, rtol=2e-2)


BF16_HINT = (
    "evogan: hint: this CPU has bf16 arithmetic (AVX512-BF16 or AMX): --precision bf16 "
    "generates about 2x faster"
)


@pytest.mark.parametrize(
    ("amx", "precision", "hinted"),
    [(True, "float32", True), (True, "bf16", False), (False, "float32", False)],
)
def test_float32_generation_on_a_bf16_cpu_points_to_bf16_on_stderr(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    amx: bool,
    precision: str,
    hinted: bool,
) -> None:
    monkeypatch.setattr(precision_module, "cpu_generates_bf16_faster", lambda: amx)
    monkeypatch.setattr(logs, "_said", set())
    _six_showers(tmp_path, "--precision", precision)
    captured = capsys.readouterr()
    assert captured.out.startswith("wrote 6 showers") and "AMX" not in captured.out
    hints = [line for line in captured.err.splitlines() if line.startswith(BF16_HINT)]
    assert len(hints) == hinted


@pytest.mark.slow
def test_a_refused_generation_says_its_one_line_error_and_no_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bf16 query answers yes here whatever this CPU has: a refusal's stderr is its one
    error line; the bf16 hint comes once the generation can go ahead, once per process, and
    ``EVOGAN_HINTS=0`` silences it."""
    monkeypatch.setattr(precision_module, "cpu_generates_bf16_faster", lambda: True)
    monkeypatch.setattr(logs, "_said", set())
    source = tmp_path / "four.h5"
    _shower_file(source, 4, (80.0, 100.0), seed=1)
    model = str(save_tiny_generator(tmp_path / "g.h5", seed=4))
    args = ["generate", model, "--conditions-from", str(source), "--out"]
    assert main([*args, str(tmp_path / "never.h5"), "--events", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("evogan: error: --events 5 is more than the 4 showers") and (
        err.count("\n") == 1
    ), err
    said = []
    for run in range(2):
        assert main([*args, str(tmp_path / f"run-{run}.h5")]) == 0
        said.append([line for line in capsys.readouterr().err.splitlines() if "AMX" in line])
    assert len(said[0]) == 1 and said[0][0].startswith(BF16_HINT) and said[1] == []
    monkeypatch.setattr(logs, "_said", set())
    monkeypatch.setenv("EVOGAN_HINTS", "0")
    assert main([*args, str(tmp_path / "silenced.h5")]) == 0
    assert "AMX" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "start", "end"),
    [
        (
            ["--events", "1000000000000"],
            "--events 1,000,000,000,000 (",
            " free for {out}; ask for fewer --events, or write to a file system with room",
        ),
        (
            ["--events", "10000000", "--batch-size", "10000000"],
            "--batch-size 10,000,000 showers of gan3d-tiny-51x51x25 needs at least 15.6 TB of "
            "memory, more than the ",
            " available here; lower --batch-size",
        ),
        (["--events", "4", "--energy-range", "10", "inf"], "--energy-range takes finite", "10 inf"),
        (["--events", "4", "--theta-range", "nan", "90"], "--theta-range takes finite", "nan 90"),
    ],
)
def test_counts_beyond_memory_or_disk_and_infinite_ranges_are_refused_in_one_line(
    options: list[str], start: str, end: str, tmp_path: Path, capsys
) -> None:
    """10^12 showers are refused on the disk they need (measured on a first batch, before
    anything is written), no longer on memory: showers stream to the file."""
    model = save_tiny_generator(tmp_path / "g.h5", seed=4)
    out = tmp_path / "x.h5"
    assert main(["generate", str(model), *options, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"evogan: error: {start}"), err
    assert err.strip().endswith(end.format(out=out))
    assert not out.exists() and list(tmp_path.glob(".x.h5*")) == []
