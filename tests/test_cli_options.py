"""The command line's own grammar and refusals: several settings after one ``--set``, the list
form named where a list is wanted, ``report``'s usage naming ``--out``, and refusals that come
before torch and MPI load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evogan.cli import build_parser
from evogan.commands.options import split_sets
from evogan.config import load_config
from evogan.errors import ConfigError
from evogan.store.lock import FINISHED, write_status
from tests.conftest import REPO
from tests.test_cli_lifecycle import fake_run

CONFIGS = REPO / "configs"


def test_one_set_takes_several_settings_and_leaves_the_config_alone() -> None:
    argv = ["train", "--set", "a=1", "b.c=2", "configs/x.yaml", "--set", "d=[1, 2]"]
    args = build_parser().parse_args(split_sets(argv))
    assert args.overrides == ["a=1", "b.c=2", "d=[1, 2]"] and args.config == Path("configs/x.yaml")
    args = build_parser().parse_args(split_sets(["train", "configs/x.yaml", "--set=a=1", "b=2"]))
    assert args.overrides == ["a=1", "b=2"]
    before = ["validate", "--set", "data.ecal_key=E", "data.energy_key=p", "RUN", "ref.h5"]
    args = build_parser().parse_args(split_sets(before))
    assert args.overrides == ["data.ecal_key=E", "data.energy_key=p"]
    assert args.reference == "ref.h5"
    assert split_sets(["train", "--set", "a=1", "--", "b=2"]) == [
        "train", "--set", "a=1", "--", "b=2"
    ]  # fmt: skip


def test_several_settings_after_one_set_reach_the_config() -> None:
    code = (
        "import sys\nfrom evogan.cli import main\n"
        "sys.exit(main(['train', 'configs/smoke.yaml', '--set', 'ga.epochs=x', 'train.epochs=2']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "ga.epochs = 'x' is not allowed" in done.stderr  # b=2 was not an unknown argument


def test_a_single_value_where_a_list_belongs_names_the_list_form() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(CONFIGS / "smoke.yaml", ["data.files=one.h5"])
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith(
        "give a list: [one.h5] (on the command line --set 'data.files=[one.h5]')"
    )


def test_report_usage_names_out_as_required() -> None:
    report = build_parser()._subparsers._group_actions[0].choices["report"]
    usage = report.format_usage()
    assert "CAMPAIGN_DIR [CAMPAIGN_DIR ...] --out DIR" in usage and "[--out OUT]" not in usage
    assert "--reproduce ID:MEMBER [--out DIR]" in usage
    assert "required, except with --reproduce" in " ".join(report.format_help().split())


def _refusal(tmp_path: Path, *argv: str) -> tuple[str, bool]:
    """The error line of ``evogan ARGV`` and whether torch or MPI had loaded by then."""
    code = (
        "import json, sys\nfrom evogan.cli import main\n"
        f"code = main({list(argv)!r})\n"
        "print(json.dumps([code, 'torch' in sys.modules or 'mpi4py.MPI' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    code, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 2, done.stderr
    return done.stderr.strip().splitlines()[-1], loaded


@pytest.mark.slow
def test_refusals_that_need_no_torch_come_before_it(tmp_path: Path) -> None:
    line, loaded = _refusal(tmp_path, "search", str(CONFIGS / "arch_search_tiny.yaml"))
    assert "must be a multiple of ranks_per_group = 2, got 1" in line and not loaded
    pbt = str(CONFIGS / "arch_search_small_pbt.yaml")
    line, loaded = _refusal(tmp_path, "search", pbt, "--set", "ranks_per_group=1")
    assert "needs a population of at least 2 rank groups" in line and not loaded
    for command, config in (("train", "gan3d_tiny.yaml"), ("evolve", "regressor_ga.yaml")):
        run = fake_run(tmp_path, command, CONFIGS / config)
        write_status(run, FINISHED)
        line, loaded = _refusal(tmp_path, command, "--resume", str(run))
        assert "already finished (status.json)" in line and not loaded
    line, loaded = _refusal(tmp_path, "report", str(tmp_path))
    assert "needs --out DIR" in line and not loaded


@pytest.mark.parametrize(
    ("command", "config", "record", "content"),
    [
        ("train", "gan3d_tiny.yaml", "manifest.json", {"world_size": 2}),
        ("evolve", "regressor_ga.yaml", "manifest.json", {"layout": {"world_size": 2}}),
        ("search", "arch_search_small.yaml", "campaign.json", {"world_size": 4}),
    ],
)
def test_a_resume_on_another_rank_count_is_refused_before_torch(
    tmp_path: Path, command: str, config: str, record: str, content: dict
) -> None:
    run = fake_run(tmp_path, "my run", CONFIGS / config)
    (run / record).write_text(json.dumps(content))
    ranks = next(iter(content.values())) if command != "evolve" else 2
    line, loaded = _refusal(tmp_path, command, "--resume", str(run))
    assert not loaded
    assert line.endswith(
        f"{run} was run on {ranks} rank(s) and must be resumed on as many; resume it with "
        f"mpirun -n {ranks} evogan {command} --resume '{run}' (got 1)"
    )
    assert not (run / "status.json").exists()  # refused before the run was claimed
