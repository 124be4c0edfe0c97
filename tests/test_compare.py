"""``evogan compare`` and ``evogan report``: figures and tables from tiny regressor and 3DGAN
runs, and one-line refusals of run types a command cannot draw."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from evogan.cli import main
from evogan.config import load_config
from evogan.plots.compare import RunRecord, summary_table
from evogan.plots.runs import run_colours, run_labels
from evogan.regressor.evolve import evolve_regressor
from evogan.regressor.rmsprop import train_regressor
from evogan.search.campaign import Campaign
from evogan.store import read_metrics, to_json
from tests.conftest import REPO, evogan_here
from tests.gan_fixtures import tiny_campaign

PNG = b"\x89PNG\r\n\x1a\n"
GAN_SHORT = (
    *("--set", "trainer.epochs=2", "--set", "trainer.steps_per_epoch=2"),
    *("--set", "trainer.validate_every=1", "--set", "trainer.validation_events=40"),
)


def _figure(path: Path) -> None:
    """A real, non-empty PNG (an empty matplotlib canvas is about 5 kB)."""
    assert path.read_bytes()[:8] == PNG, path
    assert path.stat().st_size > 15_000, path


TINY = {
    "task": "regressor",
    "seed": 1,
    "data": {"synthetic": {"events": 300}, "train_events": 240, "test_events": 60},
    "ga": {"batch_size": 48, "epochs": 2},
    "train": {"batch_size": 48, "epochs": 2},
}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    (root / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    cfg = load_config(root / "tiny.yaml")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(root / "cache"))
        quiet = {"announce": lambda line: None}
        ga = evolve_regressor(cfg, root / "ga", **quiet)
        rmsprop = train_regressor(cfg, root / "rmsprop", **quiet)
    return root, ga.path, rmsprop.path


@pytest.mark.slow
def test_compare_writes_figures_and_table(two_runs) -> None:
    root, ga, rmsprop = two_runs
    out = root / "figures"
    process = evogan_here("compare", str(ga), str(rmsprop), "--out", str(out))
    assert process.returncode == 0, process.stderr
    for name in ("test_loss.png", "energy_response.png", "relative_error.png"):
        _figure(out / name)
    table = (out / "summary.md").read_text()
    assert "| ga | ga |" in table and "| rmsprop | rmsprop |" in table
    assert "summary.md" in process.stdout
    assert "## Energy response" in table and "None" not in table
    fits = table.split("| run | a [GeV^1/2] |")[1].splitlines()[2:]
    assert [line.split(" | ")[0] for line in fits] == ["| ga", "| rmsprop"]
    for run in (ga, rmsprop):
        bins = RunRecord.load(run).response
        assert sum(b["count"] for b in bins) == 60
        assert all(b["low"] < b["true_mean"] < b["high"] for b in bins)
        assert all(b["ratio_err"] > 0 and b["resolution_err"] > 0 for b in bins)


def test_summary_table_reports_errors_in_percent(two_runs) -> None:
    _, ga, _ = two_runs
    record = RunRecord.load(ga)
    table = summary_table([record])
    assert f"{100 * record.summary['test_mape']:.2f}" in table
    assert len(record.epochs) == 2


def test_compare_refuses_a_directory_that_is_not_a_run(tmp_path) -> None:
    process = evogan_here("compare", str(tmp_path), "--out", str(tmp_path / "out"))
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        f"evogan: error: {tmp_path} is not an evogan run directory "
        "(no summary.json or metrics.jsonl)"
    ]
    assert not (tmp_path / "out").exists()


def test_every_run_gets_its_own_colour() -> None:
    for count in (2, 10, 11, 20, 25):
        assert len(set(run_colours(count))) == count


def test_run_labels_add_parent_folders_only_where_names_repeat(tmp_path: Path) -> None:
    paths = [tmp_path / "c3" / "member-0", tmp_path / "c7" / "member-0", tmp_path / "ga"]
    assert run_labels(paths) == ["c3/member-0", "c7/member-0", "ga"]
    deep = [tmp_path / "a" / "final" / "m", tmp_path / "b" / "final" / "m"]
    assert run_labels(deep) == ["a/final/m", "b/final/m"]


@pytest.fixture(scope="module")
def gan_run(tmp_path_factory) -> Path:
    """Two epochs of the tiny 3DGAN, scored after each (validation records, contract 4)."""
    run = tmp_path_factory.mktemp("gan") / "gan"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOGAN_CACHE_DIR", str(run.parent / "cache"))
        done = evogan_here(
            "train", str(REPO / "configs" / "gan3d_tiny.yaml"), "--run-dir", str(run), *GAN_SHORT
        )
    assert done.returncode == 0, done.stderr
    return run


@pytest.mark.slow
def test_compare_draws_gan_losses_and_validation_score(gan_run: Path, tmp_path: Path) -> None:
    assert len(read_metrics(gan_run / "metrics.jsonl", "validation")) == 2
    out = tmp_path / "figures"
    assert main(["compare", str(gan_run), "--out", str(out)]) == 0
    _figure(out / "gan_losses.png")
    _figure(out / "gan_validation.png")
    table = (out / "summary.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| gan |"))
    assert "| sync | finished | 2 | 4 | 1 |" in row
    assert "None" not in table and "?" not in table
    best = min(r["score"] for r in read_metrics(gan_run / "metrics.jsonl", "validation"))
    assert f"| 2 | {best:.4g} |" in row


@pytest.mark.slow
def test_runs_of_one_name_are_told_apart_and_a_run_given_twice_is_refused(
    gan_run: Path, tmp_path: Path, capsys
) -> None:
    """A search candidate's trainings are all ``member-0``: the table names their folders."""
    first, second = tmp_path / "c3" / "member-0", tmp_path / "c7" / "member-0"
    for copy in (first, second):
        shutil.copytree(gan_run, copy)
    out = tmp_path / "figures"
    assert main(["compare", str(first), str(second), "--out", str(out)]) == 0
    table = (out / "summary.md").read_text()
    assert "| c3/member-0 | sync |" in table and "| c7/member-0 | sync |" in table
    capsys.readouterr()
    alias = tmp_path / "c7" / ".." / "c3" / "member-0"
    never = tmp_path / "never"
    assert main(["compare", str(first), str(alias), "--out", str(never)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"evogan: error: {first} and {alias} are the same directory; give each directory once"
    ]
    assert not never.exists()


@pytest.mark.slow
def test_compare_draws_a_gan_run_without_validation(gan_run: Path, tmp_path: Path, capsys) -> None:
    """A run trained without validate_every: the same run with its validation records gone."""
    plain = tmp_path / "plain"
    shutil.copytree(gan_run, plain)
    epochs = read_metrics(plain / "metrics.jsonl", "epoch")
    (plain / "metrics.jsonl").write_text("".join(to_json(r) + "\n" for r in epochs))
    out = tmp_path / "figures"
    assert main(["compare", str(plain), "--out", str(out)]) == 0
    _figure(out / "gan_losses.png")
    assert not (out / "gan_validation.png").exists()
    assert "no run has validation records yet" in capsys.readouterr().out
    row = next(
        line for line in (out / "summary.md").read_text().splitlines() if "| plain |" in line
    )
    assert row.endswith("| 0 | - | - |")


def test_report_refuses_a_training_run_in_one_line(two_runs, capsys) -> None:
    root, ga, _ = two_runs
    out = root / "report"
    assert main(["report", str(ga), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"evogan: error: {ga} is a regressor run (evogan evolve / evogan train); evogan report "
        "draws search campaigns; use evogan compare for training runs"
    ]
    assert not out.exists()


def test_compare_refuses_a_search_campaign_and_unknown_tasks(tmp_path: Path, capsys) -> None:
    config = load_config(
        REPO / "configs" / "arch_search_tiny.yaml", [f"base={REPO / 'configs' / 'gan3d_tiny.yaml'}"]
    )
    campaign = Campaign.create(config, 1, tmp_path / "campaign").path
    capsys.readouterr()
    assert main(["compare", str(campaign), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"evogan: error: {campaign} is a search campaign (evogan search); evogan compare draws "
        "regressor runs and 3DGAN training runs; use evogan report for search campaigns"
    ]
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text("task: tuning\n")
    assert main(["compare", str(other), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"evogan: error: {other} is a run of task 'tuning'; evogan compare draws regressor runs "
        "and 3DGAN training runs; use evogan report for search campaigns"
    ]
    assert not (tmp_path / "out").exists()


def test_an_out_that_cannot_be_made_is_refused_in_one_line(
    two_runs, tmp_path: Path, capsys
) -> None:
    _, ga, _ = two_runs
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    campaign = tiny_campaign(tmp_path / "camp", {"c-best": 2.0})
    under = (
        f"evogan: error: --out {afile / 'sub'} cannot be created: {afile} is a file; pass a "
        "directory (created if missing)"
    )
    instead = (
        f"evogan: error: --out must be a directory, got the file {afile}; pass a directory "
        "(created if missing)"
    )
    for command, out, line in (  # one shared check: each command once, each case twice
        (["compare", str(ga)], afile / "sub", under),
        (["report", str(campaign)], afile, instead),
        (["report", str(campaign), "--final"], afile / "sub", under),  # before it trains
        (["report", str(campaign), "--reproduce", "c-best:0"], afile, instead),  # before it trains
    ):
        assert main([*command, "--out", str(out)]) == 2, command
        assert capsys.readouterr().err.strip().splitlines() == [line], command
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "camp"]
    assert not (campaign / "reproduce").exists() and not (campaign / "final").exists()
