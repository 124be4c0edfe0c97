"""``evogan validate``: shower files and generators scored with the floor, JSON output, the
figures, and bad input refused in one line."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from matplotlib.image import imread

from evogan.cli import main
from evogan.data.synthetic import generate_showers, write_synthetic
from evogan.data.writer import ShowerWriter
from evogan.physics.targets import TOLERANCES
from tests.conftest import evogan_here
from tests.gan_fixtures import save_tiny_generator, tiny_campaign

# The generators say they were trained on less than the reference's 10-100 GeV.
TRAINED_ON = {"energy_gev": [40.0, 60.0], "theta_deg": [90.0, 90.0]}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("validate")
    return {
        "ref": write_synthetic(root / "ref.h5", 120, (10.0, 100.0), seed=1),
        "gen": write_synthetic(root / "gen.h5", 120, (10.0, 100.0), seed=2),
        "g1": save_tiny_generator(root / "g1.h5", seed=1, trained_on=TRAINED_ON),
        "g2": save_tiny_generator(root / "g2.h5", seed=2, trained_on=TRAINED_ON),
        "root": root,
    }


def _write(path: Path, energy: np.ndarray, shape=(51, 51, 25), empty: int = -1) -> Path:
    ecal = generate_showers(energy, np.random.default_rng(0))[..., : shape[2]]
    ecal = ecal[:, : shape[0], : shape[1]]
    if empty >= 0:
        ecal[empty] = 0.0
    with ShowerWriter(path, shape) as writer:
        writer.append(ecal, energy)
    return path


@pytest.mark.slow
def test_shower_file_scores_at_the_floor_with_json_and_figures(files: dict, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = evogan_here(
        "validate",
        str(files["gen"]),
        str(files["ref"]),
        "--json",
        "--out",
        str(out),
        "--bins",
        "3",
        "--events",
        "500",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["events"] == 120 and math.isfinite(report["score"])
    fewer = "the reference holds 120 showers, fewer than --events 500; all 120 are scored"
    assert report["notes"] == [fewer]
    shown = result.stderr.splitlines()  # progress of the long steps, as lines off a terminal
    for step in ("read reference: ", "read generated: 120/120 showers (100%)", "floor: 6/6"):
        assert any(line.startswith(step) for line in shown), (step, shown)
    floor = report["floor"]
    assert floor["spread"] > 0 and report["score"] < floor["score"] + 3 * floor["spread"]
    for name in ("separation", "classifier_auc", "fpd", "kpd", "sf_error", "bad_fraction"):
        assert set(report["metrics"][name]) == {"value", "error"}, name
    assert report["worst_features"] and "spectrum" in report["separation"]
    targets = report["targets"]  # showers of one distribution meet every learning target
    assert {(r["quantity"], r["bin"]) for r in targets} == {
        (quantity, b) for quantity in TOLERANCES for b in range(3)
    }
    assert all(r["within"] for r in targets), [r for r in targets if not r["within"]]
    assert json.loads((out / "score.json").read_text())["score"] == report["score"]
    for png, width in (("features.png", 1200), ("profiles.png", 1200)):
        image = imread(out / png)
        assert image.shape[1] > width and image.shape[0] > 600, png
        assert image[..., :3].std() > 0.05, png  # drawn, not blank
    bare = tmp_path / "bare"
    args = [str(files["gen"]), str(files["ref"]), "--bins", "3", "--out", str(bare)]
    assert main(["validate", *args, "--no-figures"]) == 0
    assert [p.name for p in bare.iterdir()] == ["score.json"]
    assert json.loads((bare / "score.json").read_text())["score"] == report["score"]


@pytest.mark.slow
def test_run_directory_ensemble_counts_each_generator_once(
    files: dict, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"  # laid out as a data-parallel gan3d run: best = copy of rank 0
    (run / "generators").mkdir(parents=True)
    (run / "config.yaml").write_text("task: gan3d\ndata: {}\n")
    shutil.copy(files["g1"], run / "generators" / "rank-00000.h5")
    shutil.copy(files["g2"], run / "generators" / "rank-00001.h5")
    shutil.copy(files["g1"], run / "best_model.h5")
    args = [str(run), str(files["ref"]), "--events", "60", "--bins", "3"]
    assert main(["validate", *args, "--ensemble", str(run), "--beta", "0.5", "--no-figures"]) == 0
    shown = capsys.readouterr().out
    report = json.loads((run / "validation" / "score.json").read_text())
    assert report["files"] == [str(run / "validation" / "score.json")]
    assert [p.name for p in (run / "validation").iterdir()] == ["score.json"]
    ensemble = report["ensemble"]
    identical, beyond = report["notes"]
    assert ensemble["members"] == 2 and "byte-identical" in identical
    assert beyond.startswith("the reference's primary energies span 1") and beyond.endswith(
        "beyond the 40-60 GeV this generator was trained on: showers outside that range are "
        "extrapolations"
    )
    assert f"note: {beyond}" in shown
    assert ensemble["models"] == [
        str(run / "best_model.h5"),
        str(run / "generators" / "rank-00001.h5"),
    ]
    scores = np.array(ensemble["member_scores"])
    assert report["score"] == pytest.approx(scores.mean() + 0.5 * scores.std())
    assert report["score"] > report["floor"]["score"] + 3 * report["floor"]["spread"]
    assert "ensemble of 2" in shown and "byte-identical" in shown
    assert f"scoring {run / 'best_model.h5'}" in shown


def _refused(capsys, *args: str) -> str:
    code = main(["validate", *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    return err


def test_bad_input_gets_one_line(files: dict, tmp_path: Path, capsys) -> None:
    ref, out = str(files["ref"]), str(tmp_path / "never")
    small = _write(tmp_path / "small.h5", np.full(4, 20.0), shape=(25, 25, 25))
    err = _refused(capsys, str(small), ref, "--out", out)
    assert (
        "clic-ecal-25 (cartesian, 25x25x25), the reference clic-ecal (cartesian, 51x51x25)" in err
    )
    far = _write(tmp_path / "far.h5", np.full(6, 300.0))
    assert "must overlap, got 300-300 GeV and" in _refused(capsys, str(far), ref, "--out", out)
    assert "energy bins (50), got 40" in _refused(
        capsys, str(files["gen"]), ref, "--events", "40", "--bins", "50", "--out", out
    )
    dirty = _write(tmp_path / "dirty.h5", np.linspace(20, 80, 8), empty=2)
    err = _refused(capsys, str(files["gen"]), str(dirty), "--out", out)
    assert "must not contain empty or non-finite showers, got 1 of 8" in err
    assert "needs generators" in _refused(
        capsys, str(files["gen"]), ref, "--ensemble", str(files["g2"]), "--out", out
    )
    err = _refused(capsys, str(files["gen"]), ref, "--precision", "bf16", "--out", out)
    assert "--precision bf16 runs a generator, but" in err and "holds showers" in err
    err = _refused(capsys, str(files["gen"]), ref, "--beta", "nan", "--out", out)
    assert err.endswith("--beta takes finite numbers only, got nan")
    missing = str(tmp_path / "no_such_model.h5")  # named as GENERATED, even with no reference
    err = _refused(capsys, missing, str(tmp_path / "no_such_ref.h5"), "--out", out)
    assert err.endswith(
        f"GENERATED {missing} does not exist; pass a generator .h5 file, a "
        "gan3d run directory or shower file(s)"
    )
    assert not Path(out).exists()


def test_generators_that_cannot_be_scored_are_refused_before_the_reference_is_read(
    files: dict, tmp_path: Path, capsys
) -> None:
    narrow = _write(tmp_path / "narrow.h5", np.linspace(20, 80, 8), shape=(25, 25, 25))
    with h5py.File(narrow, "r+") as f:  # reading the reference would end on this cell
        f["ECAL"][3, 0, 0, 0] = np.nan
    out = str(tmp_path / "never")
    err = _refused(capsys, str(files["g1"]), str(narrow), "--out", out)
    assert err.endswith(
        "generator showers have cells (51, 51, 25), the reference (25, 25, 25); "
        "compare showers of the same cell window"
    )
    assert not Path(out).exists()


def test_an_out_that_cannot_be_made_is_refused_before_reading(files: dict, tmp_path: Path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    gen, ref = str(files["gen"]), str(files["ref"])
    missing = str(tmp_path / "missing.h5")  # never read: --out is checked first
    assert _refused(capsys, gen, missing, "--out", str(afile / "sub")) == (
        f"evogan: error: --out {afile / 'sub'} cannot be created: {afile} is a file; pass a "
        "directory (created if missing)"
    )
    assert _refused(capsys, gen, ref, "--out", str(afile)) == (
        f"evogan: error: --out must be a directory, got the file {afile}; pass a directory "
        "(created if missing)"
    )
    run = tmp_path / "run"  # the default --out, RUN/validation, is a file
    run.mkdir()
    shutil.copy(files["g1"], run / "best_model.h5")
    (run / "validation").write_text("")
    err = _refused(capsys, str(run), ref)
    assert f"got the file {run / 'validation'}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "run"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_an_out_in_a_read_only_directory_is_refused(files: dict, tmp_path: Path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    err = _refused(capsys, str(files["gen"]), str(files["ref"]), "--out", str(locked / "v"))
    assert f"no write permission on {locked}" in err


def test_a_search_campaign_is_refused_naming_its_best_generator(files: dict, tmp_path, capsys):
    campaign = tiny_campaign(tmp_path / "camp", {"c-best": 2.0, "c-newest": 5.0})
    best = campaign / "candidates" / "c-best" / "member-0" / "best_model.h5"
    ref, out = str(files["ref"]), str(tmp_path / "v")
    err = _refused(capsys, str(campaign), ref, "--out", out)
    assert f"{campaign} is a search campaign, not a run" in err
    assert f"best candidate c-best (fitness 2), {best}, or another" in err
    err = _refused(capsys, str(files["g1"]), ref, "--ensemble", str(campaign), "--out", out)
    assert f"best candidate c-best (fitness 2), {best}," in err
    failed = tiny_campaign(tmp_path / "failed", {"c-nan": math.inf})
    err = _refused(capsys, str(failed), ref, "--out", out)
    assert "no candidate trained to the end with status ok yet" in err
    assert not Path(out).exists()


@pytest.mark.slow
def test_a_directory_of_several_runs_is_refused_as_one_and_taken_as_an_ensemble(
    files: dict, tmp_path: Path, capsys
):
    """A search candidate's folder holds one run per member: its newest generator is no better
    than the others, so it is not picked as "the" generator; --ensemble takes them all."""
    candidate = tmp_path / "candidates" / "c-1"
    for member, generator in enumerate(("g1", "g2")):
        (candidate / f"member-{member}").mkdir(parents=True)
        shutil.copy(files[generator], candidate / f"member-{member}" / "best_model.h5")
    out = tmp_path / "v"
    err = _refused(capsys, str(candidate), str(files["ref"]), "--out", str(out))
    assert f"{candidate} holds the generators of 2 runs (member-0, member-1); pass one" in err
    assert f"or all as --ensemble {candidate}" in err
    args = [str(files["g1"]), str(files["ref"]), "--ensemble", str(candidate), "--out", str(out)]
    assert main(["validate", *args, "--events", "24", "--bins", "2", "--json", "--no-figures"]) == 0
    ensemble = json.loads(capsys.readouterr().out)["ensemble"]
    assert ensemble["models"] == [str(files["g1"]), str(candidate / "member-1" / "best_model.h5")]


@pytest.mark.slow
def test_a_window_no_detector_has_scores_warns_of_narrower_energies_and_refuses_the_set(
    tmp_path: Path, capsys
) -> None:
    """One validate of shower files on a 49x49x25 window: the score needs no detector, and
    generated energies narrower than the reference's are warned of and still scored; the
    CaloChallenge set, which needs a detector, is refused."""
    ref = _write(tmp_path / "ref.h5", np.linspace(20.0, 80.0, 16), shape=(49, 49, 25))
    narrow = _write(tmp_path / "narrow.h5", np.linspace(20.0, 40.0, 12), shape=(49, 49, 25))
    two = ["--bins", "2"]
    code = main(
        ["validate", str(narrow), str(ref), *two, "--json", "--no-figures", "--out", str(tmp_path)]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    warning = "warning: generated energies 20-40 GeV cover less than the reference's"
    assert warning in captured.err, captured.err
    assert math.isfinite(json.loads(captured.out)["score"]), captured.out
    err = _refused(capsys, str(narrow), str(ref), *two, "--calochallenge")
    assert "(49, 49, 25)" in err and "data.detector" in err
