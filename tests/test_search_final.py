"""The final significance step of a search campaign and the reproduce command of a table row.

Under real ``mpirun -n 4`` (2 groups x 2 ranks): a tiny campaign ends by re-training its best
candidate and the base spec with 2 fresh seeds each and writes ``final`` into summary.json (a
SIGTERM during that step stops it, and ``--resume`` completes it from the finished trainings); a
row's ``reproduce`` command gives the table's score again; ``evogan report --final`` re-runs the
step for a summary without one, stops on SIGTERM between trainings keeping the finished ones, and
its printed command completes it with the same numbers. Without MPI: the config refuses
``final.retrain_seeds`` below 2, the step's seeds are fresh, and ``final`` and its table hold
failures as worst scores."""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from evogan.cli import main
from evogan.config import load_config
from evogan.config.search import SearchConfig
from evogan.errors import ConfigError
from evogan.physics import WORST_SCORE
from evogan.search import resolve_base
from evogan.search.final import BASELINE, OUTCOME, build_final, final_seeds
from evogan.search.fitness import member_seeds
from tests.conftest import REPO, evogan, kill_job, launch, mpirun, terminate_ranks, wait_for
from tests.gan_fixtures import tiny_campaign

TINY = REPO / "configs" / "arch_search_tiny.yaml"


def _config(tmp_path: Path, **changes) -> Path:
    """The campaign tests' tiny config with two members per candidate."""
    from tests.test_search_campaign import _config as tiny_config

    fitness = {"members": 2, "beta": 0.5, "test_events": 20, "energy_bins": 2}
    return tiny_config(tmp_path, **{"fitness": fitness, **changes})


def test_retrain_seeds_below_two_is_refused(tmp_path: Path) -> None:
    path = _config(tmp_path, final={"retrain_seeds": 1})
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "final.retrain_seeds = 1" in message and "greater than or equal to 2" in message
    assert "\n" not in message
    result = evogan("search", str(_config(tmp_path)), "--set", "final.retrain_seeds=1")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "final.retrain_seeds" in lines[0] and "1" in lines[0]


def test_final_seeds_are_fresh_and_reproducible(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, final={"retrain_seeds": 5, "top": 2}))
    assert isinstance(config, SearchConfig)
    seeds = final_seeds(config)
    assert len(set(seeds)) == 5 and seeds == final_seeds(config)
    assert not set(seeds) & set(member_seeds(config, 5))
    other = config.model_copy(update={"seed": 1})
    assert not set(seeds) & set(final_seeds(other))


def test_final_counts_failures_as_worst_and_tests_against_the_baseline(tmp_path: Path) -> None:
    from evogan.search.campaign_report import CampaignRecord, final_table

    config = resolve_base(load_config(_config(tmp_path)), _config(tmp_path))
    seeds = [11, 12, 13, 14]
    row = {"id": "t00001", "fitness": 1.0, "genome": {"g_filters": 3}}
    entries = [("t00001", config.spec, row), (BASELINE, config.spec, None)]
    good = [1.0, 1.1, 1.2, 1.3]
    outcomes = {(0, s): (good[s], "") for s in range(4)}
    outcomes.update({(1, s): (3.0 + s, "") for s in range(3)})
    outcomes[(1, 3)] = (WORST_SCORE, "nan: training losses became NaN or infinite")
    final = build_final(config, entries, seeds, outcomes, wall_s=1.0)
    json.dumps(final, allow_nan=False)  # strict JSON as summary.json is written
    (candidate,), baseline = final["candidates"], final["baseline"]
    assert baseline["scores"] == [3.0, 4.0, 5.0, WORST_SCORE]
    assert baseline["failed"] == [{"seed": 14, "reason": outcomes[(1, 3)][1]}]
    assert candidate["p_value"] == pytest.approx(1 / 70) and candidate["better"]
    assert candidate["method"] == "exact" and candidate["campaign_fitness"] == 1.0
    assert candidate["mean"] == pytest.approx(1.15)
    assert candidate["sem"] == pytest.approx(0.12909944 / 2)
    record = CampaignRecord("ga (x)", tmp_path, [], {"final": final})
    table = final_table([record])
    assert "| ga (x) | t00001 | 1, 1.1, 1.2, 1.3 |" in table
    assert "yes (p=0.0143) |\n" in table and "(baseline) |\n" in table  # one test: no Holm
    assert "Holm over" not in table
    assert "baseline, seed 14: nan: training losses" in table


def test_several_tested_candidates_win_only_after_holms_correction(tmp_path: Path) -> None:
    """Two candidates of one campaign, and two campaigns in one report, against one baseline:
    each p-value is multiplied out over the tests made (Holm), in the summary and the table."""
    from evogan.search.campaign_report import CampaignRecord, final_table

    config = resolve_base(load_config(_config(tmp_path)), _config(tmp_path))
    seeds = [11, 12, 13, 14]
    entries = [
        (name, config.spec, {"id": name, "fitness": 1.0, "genome": {}})
        for name in ("t00001", "t00002")
    ] + [(BASELINE, config.spec, None)]
    outcomes = {(0, s): (1.0 + s / 10, "") for s in range(4)}  # below every baseline score
    second = [1.0, 1.1, 3.5, 4.5]  # 3 of 16 pairs above the baseline's: p = 7/70
    outcomes.update({(1, s): (second[s], "") for s in range(4)})
    outcomes.update({(2, s): (3.0 + s, "") for s in range(4)})
    final = build_final(config, entries, seeds, outcomes, wall_s=1.0)
    first, other = final["candidates"]
    assert first["p_value"] == pytest.approx(1 / 70) and other["p_value"] == pytest.approx(0.1)
    assert first["p_holm"] == pytest.approx(2 / 70) and first["better"]
    assert other["p_holm"] == pytest.approx(0.1) and not other["better"]
    assert final["correction"] == "Holm over the 2 candidate(s) tested"
    records = [CampaignRecord(f"{m} (x)", tmp_path, [], {"final": final}) for m in ("ga", "tpe")]
    table = final_table(records)
    assert "p, Holm over the 4 tests here" in table
    assert table.count("| no (0.0571) |") == 2  # 1/70 x 4: a win alone, not over 4 tests
    assert table.count("| no (0.2) |") == 2  # 0.1 x 2
    assert "yes (p=0.0143, Holm 0.0286)" in table


def test_winners_of_several_campaigns_are_compared_with_each_other(tmp_path: Path) -> None:
    """Three campaigns' winners pairwise (two-sided), and whether the baseline's scores agree
    across the campaigns that re-trained it on the same fresh seeds."""
    from evogan.search.campaign_report import CampaignRecord, winners_table

    config = resolve_base(load_config(_config(tmp_path)), _config(tmp_path))
    seeds = [11, 12, 13, 14]

    def record(label: str, winner: list[float], baseline: list[float]) -> CampaignRecord:
        entries = [("w", config.spec, {"id": "w", "fitness": 1.0, "genome": {}})]
        outcomes = {(0, s): (winner[s], "") for s in range(4)}
        outcomes.update({(1, s): (baseline[s], "") for s in range(4)})
        entries.append((BASELINE, config.spec, None))
        final = build_final(config, entries, seeds, outcomes, wall_s=1.0)
        return CampaignRecord(label, tmp_path, [], {"final": final})

    base = [3.0, 4.0, 5.0, 6.0]
    ga = record("ga (a)", [1.0, 1.1, 1.2, 1.3], base)
    tpe = record("tpe (b)", [2.0, 2.1, 2.2, 2.3], base)
    random = record("random (c)", [1.05, 1.15, 1.25, 1.35], [3.0, 4.0, 5.0, 6.5])
    assert winners_table([ga]) == ""
    table = winners_table([ga, tpe, random])
    assert "| ga (a) | w | tpe (b) | w | -1.0000 | 0.0286 |" in table  # 2 / C(8, 4)
    assert "| ga (a) | w | random (c) | w | -0.0500 | 0.686 |" in table
    assert "| tpe (b) | w | random (c) | w | +0.9500 | 0.0286 |" in table
    assert "in ga (a), tpe (b), random (c): scores differ by up to 0.5." in table
    assert "the same scores" in winners_table([ga, tpe])


def test_reproduce_of_an_unknown_candidate_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign = tiny_campaign(tmp_path / "camp", {"c-best": 2.0})
    assert main(["report", str(campaign), "--reproduce", "nope:0"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"evogan: error: --reproduce nope:0: 'nope' is not a candidate of {campaign}; evogan "
        f"report {campaign} --out DIR lists the best with their --reproduce commands"
    ]
    assert not (campaign / "reproduce").exists()


def _env_cache(tmp_path: Path) -> None:
    os.environ["EVOGAN_CACHE_DIR"] = str(tmp_path / "cache")


def _launch(command: str) -> list[str]:
    """``[mpirun -n N] evogan ARGS`` (a row's reproduce command) as conftest.mpirun args."""
    words = shlex.split(command)
    ranks = int(words[2]) if words[0] == "mpirun" else 1
    evogan_at = words.index("evogan")
    return [str(ranks), "-m", "evogan", *words[evogan_at + 1 :]]


def _table(campaign: Path) -> dict[str, dict]:
    rows = {}
    for path in (campaign / "table").glob("*.jsonl"):
        rows.update({r["id"]: r for r in map(json.loads, path.read_text().splitlines())})
    return rows


def _both_groups_training(campaign: Path, job: subprocess.Popen) -> None:
    """Wait until each of the 2 groups has started its first re-training of the final step (the
    job killed if they never do): a stop signal then ends the step after those two trainings."""
    deadline = time.monotonic() + 150
    while len(list((campaign / "final").glob("*/seed-*"))) < 2:
        if job.poll() is not None or time.monotonic() > deadline:
            kill_job(job)
            pytest.fail(f"the final step never started: {job.communicate()[1][-2000:]}")
        time.sleep(0.02)


@pytest.mark.slow
def test_campaign_final_step_reproduce_and_report(tmp_path: Path) -> None:
    budget = {"kind": "steps", "amount": 1}  # every training: the campaign's, final's, report's
    config = _config(tmp_path, candidates=2, final={"retrain_seeds": 2, "top": 1}, budget=budget)
    out = tmp_path / "ga"
    _env_cache(tmp_path)
    try:
        # A SIGTERM during the final step's first two trainings: 75, no `final`, and the
        # campaign's resume trains no candidate and completes the step from those two.
        job = launch(4, ["-m", "evogan", "search", str(config), "--run-dir", str(out)])
        _both_groups_training(out, job)
        terminate_ranks(job)
        _, stderr = job.communicate(timeout=120)
        assert job.returncode == 75, stderr[-3000:]
        first = sorted((out / "final").glob(f"*/seed-*/{OUTCOME}"))
        assert len(first) == 2, first
        assert f"resume with: mpirun -n 4 --oversubscribe evogan search --resume {out}" in stderr
        assert "final" not in json.loads((out / "summary.json").read_text())
        trained = len(_table(out))
        result = mpirun(4, ["-m", "evogan", "search", "--resume", str(out)], 180)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "2 of 4 kept from an earlier run" in result.stdout
        assert "better than baseline:" in result.stdout
        assert len(_table(out)) == trained == 2 and all(path.is_file() for path in first)
        summary = json.loads((out / "summary.json").read_text())
        final = summary["final"]
        (candidate,) = final["candidates"]
        assert candidate["id"] == summary["best"][0]["id"]
        for block in (candidate, final["baseline"]):
            assert len(block["scores"]) == 2 and all(math.isfinite(v) for v in block["scores"])
            assert block["mean"] == pytest.approx(sum(block["scores"]) / 2)
            for s in range(2):
                assert (out / "final" / block["id"] / f"seed-{s}" / "member-0").is_dir()
        assert final["baseline"]["id"] == BASELINE and final["retrain_seeds"] == 2
        assert 0 < candidate["p_value"] <= 1 and candidate["better"] is False  # 2 seeds: p >= 1/6
        best = _table(out)[candidate["id"]]
        assert len(best["member_seeds"]) == 2 and best["score_sem"] is not None
        reproduce = f"mpirun -n 2 --oversubscribe evogan report {out} --reproduce "
        assert best["reproduce"].startswith(reproduce)  # the campaign's launcher, on one group

        # The row's own command re-trains member 1 with its seed and gets its table score.
        assert best["reproduce"].endswith(f"{candidate['id']}:0")
        ranks, *args = _launch(best["reproduce"][: -len(":0")] + ":1")
        again = mpirun(int(ranks), args, 120)
        assert again.returncode == 0, again.stderr[-3000:]
        (line,) = [x for x in again.stdout.splitlines() if x.startswith("reproduce:")]
        score = float(line.split("score ")[1].split()[0])
        assert score == pytest.approx(best["member_scores"][1], rel=1e-6), line

        # Without `final` and the trainings' outcomes, report --final runs the step again; a
        # SIGTERM after its first training stops it (75, its own command to continue), and that
        # command keeps the finished trainings and gets the same numbers.
        summary.pop("final")
        (out / "summary.json").write_text(json.dumps(summary))
        outcomes = sorted((out / "final").glob(f"*/seed-*/{OUTCOME}"))
        assert len(outcomes) == 4
        for path in outcomes:
            path.unlink()
        report = tmp_path / "report"
        args = ["-m", "evogan", "report", str(out), "--out", str(report), "--final"]
        job = launch(2, args)
        wait_for(out / "final" / candidate["id"] / "seed-0" / OUTCOME, job, timeout=120)
        terminate_ranks(job)
        _, stderr = job.communicate(timeout=120)
        assert job.returncode == 75, stderr[-3000:]
        assert "final" not in json.loads((out / "summary.json").read_text())
        (command,) = [x.split("with: ")[1] for x in stderr.splitlines() if "resume with" in x]
        ranks, *args = _launch(command)
        again = mpirun(int(ranks), args, 180)
        assert again.returncode == 0, again.stderr[-3000:]
        assert "of 4 kept from an earlier run" in again.stdout
        redone = json.loads((out / "summary.json").read_text())["final"]
        for key in ("candidates", "baseline", "seeds"):
            assert json.dumps(redone[key]) == json.dumps(final[key])
        text = (report / "report.md").read_text()
        assert f"| {candidate['id']} |" in text and "better than baseline" in text
        assert (report / "final.png").stat().st_size > 0
        assert best["reproduce"] in text
    finally:
        del os.environ["EVOGAN_CACHE_DIR"]
