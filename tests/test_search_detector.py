"""Search per detector: the shipped spaces hold only genes whose every value fits their base
spec's detector, a gene none of whose values does is refused in one line before a campaign
directory exists (in process, and on every rank of ``mpirun -n 2``), and a tiny campaign on
the cylindrical CaloChallenge-2 geometry prunes, is stopped by SIGTERM, resumes and ends with
the final test under real ``mpirun -n 2`` (one island of two ranks)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from evogan.config.base import validate
from evogan.config.search import GeneConfig, SearchConfig
from evogan.errors import EXIT_STOPPED, ConfigError
from evogan.gan3d.model.generate import generate_showers
from evogan.gan3d.model.model_file import load_generator
from evogan.search import Space, resolve_base
from tests.conftest import REPO, kill_job, launch, mpirun, terminate_ranks

CC2 = REPO / "configs" / "arch_search_cc2.yaml"
SHIPPED = sorted((REPO / "configs").glob("arch_search_*.yaml"))
CC2_GRID = (9, 16, 45)
# The dense seed of the CLIC small spec and of the CLIC tiny spec: written for 51x51x25.
CLIC_SEEDS = {
    "name": "g_seed",
    "type": "categorical",
    "path": "dense_seed",
    "choices": [[4, 17, 17, 25], [2, 17, 17, 5]],
}


def _resolved(path: Path, space: list[dict] | None = None) -> SearchConfig:
    raw = yaml.safe_load(path.read_text())
    if space is not None:
        raw["space"] = space
    return resolve_base(validate(SearchConfig, raw, source=path.name), path)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_value_of_every_shipped_gene_fits_the_detector(path: Path) -> None:
    config = _resolved(path)
    space = Space(config.space, config.spec)
    for gene in space.genes:
        assert space.failures(gene) == [], gene.name
    assert space.check(space.default()) is None
    space.base_genome()  # start_from_base works with every shipped space


def test_the_cc2_search_is_written_for_the_cylinder() -> None:
    config = _resolved(CC2)
    assert config.data.detector == config.spec.detector == "calochallenge-2"
    assert config.spec.output_shape == CC2_GRID and config.spec.circular_axis == 1
    assert config.data.synthetic.log_uniform and config.data.synthetic.energy_range == (1, 1000)
    space = Space(config.space, config.spec)
    rng = np.random.default_rng(0)
    genomes = [space.sample(rng) for _ in range(40)]
    genomes += [space.mutate(g, rng, 0.5) for g in genomes]
    assert {tuple(g["d_kernel"]) for g in genomes} == {(3, 3, 3), (3, 5, 3), (5, 5, 3)}
    for genome in genomes:  # every genome makes the detector's grid: nothing to repair
        assert space.spec(genome).output_shape == CC2_GRID


@pytest.mark.parametrize(
    ("genes", "refused", "values", "reason"),
    [
        (
            [CLIC_SEEDS],
            "g_seed",
            "[[4, 17, 17, 25], [2, 17, 17, 5]]",
            "generator block 3 of 3 (Conv3D 1 filters kernel (3, 3, 3) same) produces "
            "(1, 17, 17, 75) but output_shape needs (1, 9, 16, 45)",
        ),
        (  # every count of copies of the x3-upsampling block makes too many layers
            [
                {
                    "name": "g_up",
                    "type": "blocks",
                    "net": "generator",
                    "repeat": 0,
                    "low": 2,
                    "high": 3,
                }
            ],
            "g_up",
            "[2, 3]",
            "produces (1, 9, 16, 135) but output_shape needs (1, 9, 16, 45)",
        ),
        (  # a per-block zero_pad that widens the ring in every copy
            [
                {
                    "name": "d_blocks",
                    "type": "blocks",
                    "net": "discriminator",
                    "repeat": 1,
                    "low": 1,
                    "high": 2,
                },
                {
                    "name": "d_pad",
                    "type": "categorical",
                    "per_block": "d_blocks",
                    "field": "zero_pad",
                    "choices": [[0, 1, 0], [0, 2, 0]],
                },
            ],
            "d_pad",
            "[[0, 1, 0], [0, 2, 0]]",
            "turns the circular angular axis of 16 cells into 18",
        ),
        (
            [
                {
                    "name": "g_out",
                    "type": "int",
                    "path": "generator.-1.filters",
                    "low": 2,
                    "high": 8,
                }
            ],
            "g_out",
            "[2, 4, 5, 6, 8]",
            "the last generator block must have 1 filter",
        ),
    ],
)
def test_a_gene_no_value_of_which_fits_the_detector_is_refused(
    genes: list[dict], refused: str, values: str, reason: str
) -> None:
    config = _resolved(CC2)
    extra = [GeneConfig(**gene) for gene in genes]
    with pytest.raises(ConfigError) as caught:
        Space([*config.space, *extra], config.spec)
    message = str(caught.value)
    assert message.startswith(
        f"space gene {refused}: none of its values {values} makes a valid spec for detector "
        "calochallenge-2 (9x16x45): spec: "
    ), message
    assert reason in message and message.endswith("; change its range") and "\n" not in message


def test_a_gene_with_one_value_that_fits_is_kept() -> None:
    """Values that do not fit are the repair's business (GA) or failed trials (Optuna)."""
    config = _resolved(CC2)
    gene = GeneConfig(name="g_up", type="blocks", net="generator", repeat=0, low=1, high=2)
    space = Space([*config.space, gene], config.spec)
    ((value, reason),) = space.failures(gene)
    assert value == 2 and "produces (1, 9, 16, 135)" in reason
    clic = _resolved(REPO / "configs" / "arch_search_small.yaml", [CLIC_SEEDS])
    assert [v for v, _ in Space(clic.space, clic.spec).failures(clic.space[0])] == [[2, 17, 17, 5]]


def _one_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "evogan: error:" in line]
    assert len(errors) == 1, result.stderr[-3000:]
    return errors[0]


@pytest.mark.slow
def test_the_cli_refuses_a_clic_gene_on_every_rank_before_any_directory(tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    space = [*yaml.safe_load(CC2.read_text())["space"], CLIC_SEEDS]
    args = ["-m", "evogan", "search", str(CC2), "--run-dir", str(out)]
    job = launch(2, [*args, "--set", f"space={json.dumps(space)}"])
    try:
        stdout, stderr = job.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        kill_job(job)
        pytest.fail("evogan search hung on a refused gene")
    line = _one_error(subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr))
    assert line == (
        "evogan: error: space gene g_seed: none of its values [[4, 17, 17, 25], [2, 17, 17, 5]] "
        "makes a valid spec for detector calochallenge-2 (9x16x45): spec: generator block 3 of 3 "
        "(Conv3D 1 filters kernel (3, 3, 3) same) produces (1, 17, 17, 75) but output_shape "
        "needs (1, 9, 16, 45); change the blocks' kernels, zero_pad, upsample or filters; change "
        "its range"
    )
    assert list(tmp_path.iterdir()) == [] and "search:" not in stdout


# A tiny spec laid out as configs/gan3d_cc2_small.yaml (depth x3 in the first block, then
# `same` convolutions) with one or two filters, so the cc2 space's kernel genes apply to it.
TINY_CC2 = {
    "name": "gan3d-cc2-tiny",
    "latent_size": 8,
    "conditioning": {"mode": "concat", "angle": False, "energy_scale": 100.0},
    "dense_seed": [2, 9, 16, 15],
    "generator": [
        {
            "upsample": [1, 1, 3],
            "filters": 2,
            "kernel": [1, 1, 1],
            "padding": "same",
            "batch_norm": True,
        },
        {"filters": 2, "kernel": [3, 3, 3], "padding": "same", "noise": True},
        {"filters": 1, "kernel": [1, 1, 1], "padding": "same", "init": "glorot_normal"},
    ],
    "discriminator": [{"filters": 2, "kernel": [3, 3, 3], "padding": "same", "dropout": 0.2}],
    "pooling": {"kind": "avg", "size": [3, 4, 5]},
    "heads": {"energy": True, "ecal_sum": True, "angle": False},
    "loss_weights": {"real_fake": 3.0, "energy": 0.1, "ecal_sum": 0.1},
    "batch_size": 8,
    "cell_scale": 50.0,
    "cell_power": 0.85,
}
TINY_GENES = ("g_lr", "d_lr", "g_mid_kernel", "g_noise", "d_kernel", "energy_weight")
CANDIDATES = 8


def _tiny_cc2(tmp_path: Path) -> Path:
    """configs/arch_search_cc2.yaml at test size: the tiny spec, 200 showers, 4 steps with a
    rung at 1 (factor 4: a child goes on only with the best rung score of its island so far),
    1 island of 2 ranks, 2 final seeds; the island starts from the base."""
    raw = yaml.safe_load(CC2.read_text())
    raw.pop("base")
    raw.update(
        spec=TINY_CC2,
        candidates=CANDIDATES,
        ranks_per_group=2,
        start_from_base=True,
        budget={"kind": "steps", "amount": 4},
        pruning={"kind": "successive_halving", "min_budget": 1, "reduction_factor": 4},
        fitness={"members": 1, "beta": 0.5, "test_events": 20, "energy_bins": 2},
        final={"retrain_seeds": 2, "top": 1},
        ga={"population": 2, "offspring": 2, "invalid": "repair", "migration": {"migrants": 0}},
        space=[g for g in raw["space"] if g["name"] in TINY_GENES],
    )
    raw["data"]["synthetic"] = {
        "events": 200,
        "energy_range": [1.0, 1000.0],
        "log_uniform": True,
        "seed": 7,
    }
    raw["data"]["chunk_events"] = 200
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _rows(campaign: Path) -> list[dict]:
    rows = []
    for path in sorted((campaign / "table").glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


@pytest.mark.slow
def test_a_cylindrical_campaign_prunes_resumes_after_sigterm_and_tests_its_winner(
    tmp_path: Path,
) -> None:
    config, out = _tiny_cc2(tmp_path), tmp_path / "campaign"
    os.environ["EVOGAN_CACHE_DIR"] = str(tmp_path / "cache")
    try:
        job = launch(2, ["-m", "evogan", "search", str(config), "--run-dir", str(out)])
        deadline = time.monotonic() + 300
        while not _rows(out) and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        terminate_ranks(job)
        _, stderr = job.communicate(timeout=300)
        assert job.returncode == EXIT_STOPPED, stderr[-3000:]
        assert f"resume with: mpirun -n 2 --oversubscribe evogan search --resume {out}" in stderr
        before = {r["id"]: r for r in _rows(out)}
        assert 1 <= len(before) < CANDIDATES
        assert "final" not in json.loads((out / "summary.json").read_text())
        result = mpirun(2, ["-m", "evogan", "search", "--resume", str(out)], timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
    finally:
        del os.environ["EVOGAN_CACHE_DIR"]

    rows = _rows(out)
    assert len(rows) == len({r["id"] for r in rows}) == CANDIDATES  # none trained twice
    for row in rows:
        assert row == before[row["id"]] if row["id"] in before else row["session"] == 1
    assert not any(r["status"] == "invalid" or r.get("repaired") for r in rows)  # none to repair
    config_now = _resolved(config)
    base = Space(config_now.space, config_now.spec).base_genome()
    assert [r["id"] for r in rows if r["genome"] == base] == ["i00g000c00"]  # once, first
    pruned = [r for r in rows if r["status"] == "pruned"]
    assert pruned and all(r["generation"] > 0 and r["rung"] == 0 for r in pruned)
    for row in rows:
        if row["status"] in ("ok", "pruned"):
            expected = ["1"] if row["status"] == "pruned" else ["1", "4"]
            assert list(row["intermediate"]) == expected
    stored = yaml.safe_load((out / "config.yaml").read_text())["spec"]
    assert stored["detector"] == "calochallenge-2" and stored["output_shape"] == list(CC2_GRID)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["status_counts"]["pruned"] == len(pruned)
    final = summary["final"]
    (winner,) = final["candidates"]
    assert winner["id"] == summary["best"][0]["id"] and final["retrain_seeds"] == 2
    for block in (winner, final["baseline"]):
        assert len(block["scores"]) == 2 and all(math.isfinite(s) for s in block["scores"])
    # The winner's generator fills the cylinder's grid with the kernels its genome chose.
    genome = next(r["genome"] for r in rows if r["id"] == winner["id"])
    spec, generator, _ = load_generator(
        out / "candidates" / winner["id"] / "member-0" / "last_model.h5"
    )
    assert spec.circular_axis == 1 and list(spec.discriminator[0].kernel) == genome["d_kernel"]
    assert list(spec.generator[1].kernel) == genome["g_mid_kernel"]
    showers = generate_showers(
        spec, generator, np.array([2.0, 50.0, 900.0]), None, torch.Generator().manual_seed(0)
    )
    assert showers.shape == (3, *CC2_GRID) and np.isfinite(showers).all()
