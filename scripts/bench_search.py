"""Benchmark of architecture search campaigns on a tiny 3DGAN family (CPU, < 10 minutes).

    python scripts/bench_search.py --out /tmp/bench_search [--candidates 16] [--steps 6]

Runs the same budget with the GA backend and with Optuna TPE, both under
``mpirun -n 4`` as 2 groups (islands) x 2 ranks, then re-trains the shipped default spec
(configs/gan3d_tiny.yaml) and each campaign's best architecture at the equal training budget
under ``mpirun -n 2`` (one group), with the campaign's member seeds and with fresh seeds, and
writes ``bench_search.json`` plus the ``evogan report`` of both campaigns. Reported figures:
rank busy time / wall time, trained candidates per hour, best vs default validation score.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from evogan.distributed.launcher import mpirun_prefix

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "arch_search_tiny.yaml"


def _env(out: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    env.setdefault("EVOGAN_CACHE_DIR", str(out / "cache"))
    return env


def _mpirun(ranks: int, args: list[str], out: Path, log: Path) -> float:
    command = [*mpirun_prefix(ranks), sys.executable, *args]
    start = time.perf_counter()
    with open(log, "w") as stream:
        result = subprocess.run(
            command, env=_env(out), cwd=REPO, stdout=stream, stderr=subprocess.STDOUT
        )
    if result.returncode != 0:
        raise SystemExit(f"bench: {' '.join(args[:3])} failed; see {log}")
    return time.perf_counter() - start


def _config(out: Path, backend: str, candidates: int, steps: int, members: int) -> Path:
    raw = yaml.safe_load(TINY.read_text())
    raw.update(backend=backend, candidates=candidates, base=str(REPO / "configs/gan3d_tiny.yaml"))
    raw["budget"] = {"kind": "steps", "amount": steps}
    raw["fitness"] = {"members": members, "beta": 0.5, "test_events": 40, "energy_bins": 2}
    raw["ga"].update(population=4, offspring=2)
    raw["optuna"] = {"sampler": "tpe", "startup_trials": 4}
    path = out / f"{backend}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def evaluate_main(campaign: Path, result: Path) -> None:
    """Under mpirun: train the default spec and the campaign's best genome at equal budget."""
    from mpi4py import MPI

    from evogan.config import load_config
    from evogan.distributed import guard
    from evogan.search import Scorer, Space, evaluate

    world = MPI.COMM_WORLD
    with guard():
        config = load_config(campaign / "config.yaml")
        space = Space(config.space, config.spec)
        best = json.loads((campaign / "summary.json").read_text())["best"][0]
        scorer = Scorer(config)
        report = {}
        for seeds_from in (config.seed, config.seed + 1):  # campaign seeds, then fresh ones
            settings = config.model_copy(update={"seed": seeds_from})
            for name, genome in (("default", space.default()), ("best", best["genome"])):
                spec = config.spec if name == "default" else space.spec(genome)
                work = result.parent / f"eval-{campaign.name}-{name}-{seeds_from}"
                outcome = evaluate(settings, spec, world, work, scorer)
                report[f"{name}_seed{seeds_from}"] = outcome.as_row()
        if world.rank == 0:
            result.write_text(json.dumps(report, indent=2, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_search"))
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--members", type=int, default=1)
    parser.add_argument(
        "--evaluate", nargs=2, type=Path, metavar=("CAMPAIGN", "RESULT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.evaluate:
        evaluate_main(*args.evaluate)
        return
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    figures: dict = {
        "candidates": args.candidates,
        "steps": args.steps,
        "members": args.members,
        "ranks": 4,
        "groups": "2 x 2 ranks",
        "campaigns": {},
    }
    for backend in ("ga", "optuna"):
        config = _config(out, backend, args.candidates, args.steps, args.members)
        campaign = out / f"campaign-{backend}"
        print(f"bench: {backend} campaign, {args.candidates} candidates ...", flush=True)
        wall = _mpirun(
            4,
            ["-m", "evogan", "search", str(config), "--run-dir", str(campaign)],
            out,
            out / f"{backend}.log",
        )
        summary = json.loads((campaign / "summary.json").read_text())
        result = out / f"equal-budget-{backend}.json"
        print(f"bench: re-training default and best of {backend} at equal budget ...", flush=True)
        _mpirun(
            2,
            [str(Path(__file__).resolve()), "--evaluate", str(campaign), str(result)],
            out,
            out / f"equal-budget-{backend}.log",
        )
        equal = json.loads(result.read_text())
        figures["campaigns"][backend] = {
            "command_wall_s": wall,
            "session_wall_s": summary["session_wall_s"],
            "busy_fraction_mean": summary["busy_fraction"]["mean"],
            "busy_fraction_min": summary["busy_fraction"]["min"],
            "candidates_per_hour": summary["candidates_per_hour"],
            "status_counts": summary["status_counts"],
            "invalid_genomes": summary["invalid_genomes"],
            "best_id": summary["best"][0]["id"],
            "best_fitness_in_campaign": summary["best"][0]["fitness"],
            "equal_budget": {
                k: {
                    "fitness": v["fitness"],
                    "status": v["status"],
                    "member_scores": v["member_scores"],
                }
                for k, v in equal.items()
            },
        }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "evogan",
            "report",
            str(out / "campaign-ga"),
            str(out / "campaign-optuna"),
            "--out",
            str(out / "report"),
        ],
        env=_env(out),
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (out / "bench_search.json").write_text(json.dumps(figures, indent=2, default=str))
    for backend, f in figures["campaigns"].items():
        eq = f["equal_budget"]
        print(
            f"{backend}: busy {100 * f['busy_fraction_mean']:.1f}% (min "
            f"{100 * f['busy_fraction_min']:.1f}%), {f['candidates_per_hour']:.0f} candidates/h, "
            f"best {f['best_id']} fitness {f['best_fitness_in_campaign']:.4f}; equal budget: "
            f"best {eq['best_seed0']['fitness']:.4f} vs default "
            f"{eq['default_seed0']['fitness']:.4f} (fresh seeds: best "
            f"{eq['best_seed1']['fitness']:.4f} vs default "
            f"{eq['default_seed1']['fitness']:.4f})"
        )
    print(f"bench: wrote {out / 'bench_search.json'} and {out / 'report'}")


if __name__ == "__main__":
    main()
