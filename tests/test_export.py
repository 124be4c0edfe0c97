"""``evogan export --format onnx``: ONNX Runtime runs the exported generator to what ``evogan
generate`` writes for the same draws (float32, within :data:`RTOL` relative plus :data:`ATOL`
of the batch's largest cell), on the CLIC ECAL grid and on the CaloChallenge dataset-2 cylinder
(circular padding, MeV rows), from a finished run's best model, a stopped run's best model and
last checkpoint, and a spec with per-cell noise; the file's metadata reads back; bad inputs are
refused in one line with nothing written; docs/howto/deploy.md's snippet runs."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from evogan import __version__
from evogan.cli import main
from evogan.detectors import detector_for
from evogan.gan3d.model.blocks import event_keys, event_normal
from evogan.gan3d.model.generate import generate_showers
from evogan.gan3d.model.model_file import save_generator
from evogan.gan3d.model.networks import Generator
from evogan.gan3d.model.onnx_file import read_metadata
from evogan.gan3d.model.shower_graph import graph_inputs
from evogan.gan3d.model.spec import GanSpec, load_spec
from evogan.gan3d.training.run_models import pick_generator
from tests.conftest import REPO, mpi_env
from tests.gan_fixtures import one_thread, write_showers

ort = pytest.importorskip("onnxruntime")

RTOL = 1e-4
ATOL = 1e-5
"""ONNX Runtime against torch in float32: |ort - torch| <= RTOL |torch| + ATOL max|torch|
(the convolutions sum in another order; measured differences are about 1e-6 of the largest
cell)."""
SCRIPT = "tests/mpi_scripts/train_gan.py"
CLIC, CC2 = "configs/gan3d_tiny.yaml", "configs/gan3d_cc2_tiny.yaml"
VALIDATION = ["trainer.validate_every=1", "trainer.validation_events=24"]
VALIDATION += ["trainer.validation_bins=2", "trainer.standing_batches=2"]
DEPLOY = REPO / "docs" / "howto" / "deploy.md"


def _sets(*pairs: str) -> list[str]:
    return [arg for pair in pairs for arg in ("--set", pair)]


def _train(config: str, run: Path, steps: int, epochs: int, stop_at: int, *more: str) -> None:
    """A one-process training of ``config`` stopped by SIGTERM after step ``stop_at``."""
    size = _sets(f"trainer.steps_per_epoch={steps}", f"trainer.epochs={epochs}", *more)
    signal = ["--signal-rank", "0", "--signal-step", str(stop_at)]
    args = [sys.executable, SCRIPT, config, "--run-dir", str(run), *size, *signal]
    done = subprocess.run(args, cwd=REPO, env=mpi_env(), capture_output=True, text=True)
    assert done.returncode == 75, done.stderr[-3000:]


@pytest.fixture(scope="module")
def clic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny CLIC spec stopped after its first step (no best model yet), and a copy resumed
    to the end (best_model.h5: the final generator, no validation)."""
    root = tmp_path_factory.mktemp("clic")
    _train(CLIC, root / "stopped", 2, 1, 1)
    shutil.copytree(root / "stopped", root / "finished")
    with one_thread():  # in this process, as a launched training runs
        assert main(["train", "--resume", str(root / "finished")]) == 0
    return {"stopped": root / "stopped", "finished": root / "finished"}


@pytest.fixture(scope="module")
def cc2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny cc2 spec validated after epoch 1 and stopped in epoch 2: a best model with its
    score, and a later checkpoint."""
    run = tmp_path_factory.mktemp("cc2") / "run"
    _train(CC2, run, 2, 2, 3, *VALIDATION)
    return run


@dataclass(frozen=True)
class Exported:
    """An ``evogan export`` of a run: the file, and what the command said."""

    run: Path
    out: Path
    said: str
    note: str


def _exported(run: Path, out: Path, *args: str) -> Exported:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert main(["export", str(run), *args, "--out", str(out)]) == 0, stderr.getvalue()
    return Exported(run, out, stdout.getvalue().strip(), stderr.getvalue().strip())


@pytest.fixture(scope="module")
def clic_onnx(clic: dict[str, Path]) -> Exported:
    """The finished CLIC run's default export."""
    return _exported(clic["finished"], clic["finished"].parent / "clic.onnx", "--format", "onnx")


@pytest.fixture(scope="module")
def cc2_onnx(cc2: Path) -> Exported:
    """The stopped cc2 run's default export."""
    return _exported(cc2, cc2.parent / "cc2.onnx")


def _export(capsys, *args: str) -> tuple[str, str]:
    """``evogan export ARGS`` in this process; its stdout and stderr."""
    assert main(["export", *args]) == 0
    captured = capsys.readouterr()
    return captured.out.strip(), captured.err.strip()


def _run(path: Path, feed: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == list(feed)
    return session.run(["showers"], feed)[0]


def _rng_draws(spec: GanSpec, n: int, seed: int) -> dict[str, np.ndarray]:
    """The standard normal draws ``generate_showers`` makes from a generator seeded ``seed``
    for one batch of ``n``, in its order: the latent rows, then each noise block's cells."""
    rng = torch.Generator().manual_seed(seed)
    draws = {"latent": torch.randn(n, spec.noise_size, generator=rng).numpy()}
    for entry in graph_inputs(spec):
        if entry.name.startswith("cell_noise_"):
            draws[entry.name] = torch.randn((n, *entry.shape[1:]), generator=rng).numpy()
    return draws


def _draws(spec: GanSpec, n: int, seed: int) -> dict[str, np.ndarray]:
    """The standard normal draws ``evogan generate --seed`` makes for events 0..n-1: the
    latent rows, then each noise block's cells, each a function of the seed and the event."""
    events = torch.arange(n, dtype=torch.int64)
    latent = event_normal(event_keys(seed, "latent"), events, (spec.noise_size,))
    draws = {"latent": latent.numpy()}
    blocks = [e for e in graph_inputs(spec) if e.name.startswith("cell_noise_")]
    for number, entry in enumerate(blocks):
        keys = event_keys(seed, "noise", number)
        draws[entry.name] = event_normal(keys, events, tuple(entry.shape[1:])).numpy()
    return draws


def _feed(draws: dict, energy: np.ndarray, theta: np.ndarray | None) -> dict[str, np.ndarray]:
    feed = {"latent": draws["latent"], "energy": energy.astype(np.float32)}
    if theta is not None:
        feed["theta"] = theta.astype(np.float32)
    feed.update({k: v for k, v in draws.items() if k != "latent"})
    return feed


def _assert_close(onnx: np.ndarray, torch_out: np.ndarray) -> None:
    assert onnx.shape == torch_out.shape and onnx.dtype == np.float32
    scale = float(np.abs(torch_out).max())
    assert scale > 0
    np.testing.assert_allclose(onnx, torch_out, rtol=RTOL, atol=ATOL * scale)


def _generated(run: Path, out: Path, events: int, seed: int) -> dict[str, np.ndarray]:
    """``evogan generate RUN`` (one batch), read back raw: the file's own arrays and units."""
    args = ["generate", str(run), "--events", str(events), "--seed", str(seed)]
    assert main([*args, "--batch-size", str(events), "--out", str(out)]) == 0
    with h5py.File(out, "r") as handle:
        return {key: handle[key][:] for key in handle}


@pytest.mark.slow
def test_a_finished_runs_best_model_runs_in_onnx_runtime_as_generate_writes_it(
    clic_onnx: Exported, tmp_path: Path, capsys
) -> None:
    run, out = clic_onnx.run, clic_onnx.out
    assert clic_onnx.note == ""  # a finished run's best model needs no note
    assert clic_onnx.said == (
        f"wrote {out} from {run}: best_model.h5 as ONNX (latent [N, 14], energy [N] GeV, "
        "theta [N] rad -> showers [N, 51, 51, 25] GeV; docs/howto/deploy.md)"
    )
    written = _generated(run, tmp_path / "gen.h5", 12, 5)
    capsys.readouterr()
    spec = load_spec(REPO / CLIC)
    feed = _feed(_draws(spec, 12, 5), written["energy"], written["theta"])
    _assert_close(_run(out, feed), written["ECAL"])
    first = {k: v[:1] for k, v in feed.items()}  # any batch size: traced at 2, run at 12 and 1
    _assert_close(_run(out, first), written["ECAL"][:1])
    meta = read_metadata(out)
    assert (meta["model"], meta["source"]) == ("best", str(run / "best_model.h5"))
    assert meta["evogan_version"] == __version__ and meta["detector"] == "clic-ecal"
    assert json.loads(meta["spec"]) == load_spec(run / "config.yaml").model_dump(mode="json")
    names = [i["name"] for i in json.loads(meta["inputs"])]
    assert names == ["latent", "energy", "theta"] and "score" not in meta
    assert json.loads(meta["output"])["unit"] == "GeV"
    assert json.loads(meta["generator_meta"])["epochs"] == 1


@pytest.mark.slow
def test_a_stopped_run_exports_its_best_model_and_says_so(
    cc2_onnx: Exported, tmp_path: Path, capsys
) -> None:
    cc2, out, said, note = cc2_onnx.run, cc2_onnx.out, cc2_onnx.said, cc2_onnx.note
    best = json.loads(h5py.File(cc2 / "best_model.h5", "r").attrs["meta"])
    at = f"best_model.h5 (epoch 1 step 2, score {best['score']:.4g})"
    assert note == (
        f"note: {cc2} was stopped before it finished; exporting {at}; --model last exports "
        "its last checkpoint"
    )
    assert said.startswith(f"wrote {out} from {cc2}: {at} as ONNX (latent [N, 15], energy [N]")
    meta = read_metadata(out)
    assert meta["model"] == "best" and float(meta["score"]) == best["score"]
    assert meta["detector"] == "calochallenge-2" and meta["energy_unit"] == "MeV"
    written = _generated(cc2, tmp_path / "gen.h5", 10, 2)
    capsys.readouterr()
    assert written["showers"].shape == (10, 9 * 16 * 45)
    spec = load_spec(REPO / CC2)
    feed = _feed(_draws(spec, 10, 2), written["incident_energies"][:, 0], None)
    _assert_close(_run(out, feed), written["showers"])  # MeV rows in the CaloChallenge order


@pytest.mark.slow
def test_a_stopped_runs_last_model_is_its_last_checkpoint(
    cc2: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "last.onnx"
    _said, note = _export(capsys, str(cc2), "--model", "last", "--out", str(out))
    what = "the generator of the last checkpoint (after 1 epoch(s) and 1 step(s))"
    assert note == f"note: {cc2} was stopped before it finished; exporting {what}"
    meta = read_metadata(out)
    assert meta["model"] == "checkpoint" and "score" not in meta
    marker = json.loads((cc2 / "checkpoint.json").read_text())
    assert meta["source"] == str(cc2 / marker["files"][0])
    picked = pick_generator(cc2, "last")
    energy = np.geomspace(1e3, 1e6, 6).astype(np.float32)  # MeV
    draws = _rng_draws(picked.spec, 6, 4)
    rng = torch.Generator().manual_seed(4)
    gev = generate_showers(picked.spec, picked.generator, energy * np.float32(1e-3), None, rng, 6)
    rows = detector_for("calochallenge-2").geometry.to_flat(gev) * np.float32(1e3)
    _assert_close(_run(out, _feed(draws, energy, None)), rows)
    best = pick_generator(cc2).generator.state_dict()
    assert any(not v.equal(best[k]) for k, v in picked.generator.state_dict().items())


@pytest.mark.slow
def test_a_run_without_a_best_model_exports_its_last_checkpoint_saying_so(
    clic: dict[str, Path], tmp_path: Path, capsys
) -> None:
    run, out = clic["stopped"], tmp_path / "stopped.onnx"
    out.write_bytes(b"old")
    assert main(["export", str(run), "--model", "best", "--out", str(out), "--force"]) == 2
    what = "the generator of the last checkpoint (after 0 epoch(s) and 1 step(s))"
    assert capsys.readouterr().err.strip() == (
        f"evogan: error: {run} has no best_model.h5 (it was stopped before it finished); pass "
        f"--model last to export {what}"
    )
    assert out.read_bytes() == b"old"
    said, note = _export(capsys, str(run), "--out", str(out), "--force")
    assert note == (
        f"note: {run} has no best_model.h5 (it was stopped before it finished); exporting {what}"
    )
    assert said.startswith(f"replaced {out} from {run}: {what} as ONNX")
    assert read_metadata(out)["model"] == "checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == ["stopped.onnx"]  # no temporary file left


def test_per_cell_noise_blocks_become_inputs_drawn_in_generates_order(
    tmp_path: Path, capsys
) -> None:
    raw = load_spec(REPO / CC2).model_dump(mode="json")
    raw["generator"][0]["noise"] = True
    raw["conditioning"]["log_energy"] = True  # a further condition slot, ln(E / energy_scale)
    spec = GanSpec.model_validate(raw)
    generator = Generator(spec, torch.Generator().manual_seed(3))
    with torch.no_grad():
        for name, param in generator.named_parameters():
            if name.endswith("scale"):
                param.fill_(0.5)  # a trained scale; new ones start at 0 (no noise)
    model = save_generator(tmp_path / "noisy.h5", spec, generator)
    out = tmp_path / "noisy.onnx"
    said, _ = _export(capsys, str(model), "--out", str(out))
    assert "cell_noise_1 [N, 1, 9, 16, 45]" in said
    energy = np.array([2e3, 5e4, 7e5], dtype=np.float32)
    draws = _rng_draws(spec, 3, 8)
    assert list(draws) == ["latent", "cell_noise_1"]
    gev = generate_showers(
        spec, generator, energy * np.float32(1e-3), None, torch.Generator().manual_seed(8), 3
    )
    rows = detector_for("calochallenge-2").geometry.to_flat(gev) * np.float32(1e3)
    _assert_close(_run(out, _feed(draws, energy, None)), rows)
    assert read_metadata(out)["model"] == "file"


@pytest.mark.slow
def test_bad_exports_are_one_line_and_write_nothing(
    clic: dict[str, Path], tmp_path: Path, capsys, monkeypatch
) -> None:
    run, out = clic["finished"], tmp_path / "out.onnx"
    empty = tmp_path / "empty"
    empty.mkdir()
    showers = write_showers(tmp_path / "showers.h5", 2)
    existing = tmp_path / "existing.onnx"
    existing.write_bytes(b"keep me")
    cases = [
        ([str(empty), "--out", str(out)], f"{empty} holds no 3DGAN generator (no best_model.h5"),
        ([str(tmp_path / "none"), "--out", str(out)], f"{tmp_path / 'none'} does not exist"),
        ([str(showers), "--out", str(out)], f"{showers} holds showers, not a generator"),
        (
            [str(run / "best_model.h5"), "--model", "last", "--out", str(out)],
            "--model last picks a run directory's generator, but",
        ),
        (
            [str(run), "--out", str(existing)],
            f"{existing} exists; pass --force to replace it, or another --out",
        ),
        ([str(run), "--out", str(tmp_path)], "output path must be a file"),
    ]
    for args, problem in cases:
        assert main(["export", *args]) == 2, args
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"evogan: error: {problem}") and "\n" not in err, err
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # as where it is not installed
    assert main(["export", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "evogan: error: ONNX export needs the onnxscript package(s), not installed here; "
        'pip install "evogan[onnx]"'
    )
    assert existing.read_bytes() == b"keep me" and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "empty", "existing.onnx", "showers.h5",
    ]  # fmt: skip


@pytest.mark.slow
def test_the_deploy_page_snippet_runs_on_exported_files(
    clic_onnx: Exported, cc2_onnx: Exported, tmp_path: Path, monkeypatch
) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", DEPLOY.read_text(), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    for exported, shape in ((clic_onnx, (4, 51, 51, 25)), (cc2_onnx, (4, 6480))):
        folder = tmp_path / exported.out.stem
        folder.mkdir()
        shutil.copy(exported.out, folder / "gan.onnx")
        monkeypatch.chdir(folder)
        namespace: dict = {}
        exec(compile(blocks[0], "docs/howto/deploy.md python block", "exec"), namespace)
        showers = namespace["showers"]
        assert showers.shape == shape and showers.dtype == np.float32
        assert np.isfinite(showers).all() and (showers >= 0).all() and showers.max() > 0
