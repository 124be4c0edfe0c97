"""GA, TPE and PBT, with and without pruning: candidates per hour and best score at equal wall
time (CPU, minutes per run).

    python scripts/bench_pruning.py --out /tmp/bench_pruning [--backends ga optuna pbt]
        [--minutes 4] [--steps 9] [--factor 3] [--seeds 0 1]

Runs the tiny search family under ``mpirun -n 4`` (2 groups x 2 ranks), every run with the
same campaign seed, each until ``--minutes`` of wall time are spent (a SIGTERM then stops it;
a run that finishes earlier ends there). GA and Optuna (TPE) run twice: without pruning and with
successive halving (rungs at ``steps / factor^k``, ``--steps`` steps per member). PBT runs
once (its exploit step is its pruning): one worker per group, segments of ``--steps`` steps,
as many segments as the time allows; its genes are the hyper-parameter genes of the tiny space
(``g_lr``, ``d_lr``, ``energy_weight``) on the tiny base architecture, since PBT copies weights
between workers. Writes ``bench_pruning.json``: per run the candidates trained (PBT: segments),
pruned, candidates per hour (up to the last finished one) and the best fitness found by each
minute of campaign time (PBT: every segment counts, the weights exist at that time), and
``bench_pruning.png``, the best fitness so far against time (``--analyse`` redraws both from
the campaigns already in ``--out``). With several ``--seeds`` every run is repeated per
campaign seed, so the difference pruning makes can be read against the seed-to-seed spread.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from evogan.distributed.launcher import mpirun_prefix
from evogan.distributed.signals import rank_pids

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_search import REPO, TINY, _env

PBT_GENES = ("g_lr", "d_lr", "energy_weight")
PBT_SEGMENTS = 10_000  # more than any wall budget allows: the SIGTERM ends the run


def _config(out: Path, args: argparse.Namespace, backend: str, pruning: dict, seed: int) -> Path:
    raw = yaml.safe_load(TINY.read_text())
    raw.update(
        backend=backend, candidates=10_000, seed=seed, base=str(REPO / "configs/gan3d_tiny.yaml")
    )
    raw["budget"] = {"kind": "steps", "amount": args.steps}
    raw["fitness"] = {"members": 1, "beta": 0.0, "test_events": 40, "energy_bins": 2}
    raw["ga"].update(population=4, offspring=2)
    raw["pruning"] = pruning
    raw["final"] = {"top": 0}
    if backend == "pbt":
        raw["space"] = [gene for gene in raw["space"] if gene["name"] in PBT_GENES]
        raw["budget"]["amount"] = args.steps * PBT_SEGMENTS
        raw["pbt"] = {"interval": args.steps}
    path = out / f"{backend}-{pruning['kind']}-seed{seed}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _run(out: Path, config: Path, minutes: float) -> Path:
    """The campaign, its ranks stopped by SIGTERM after ``minutes`` (a clean stop after the
    running candidates: exit 75)."""
    campaign = out / config.stem
    command = [*mpirun_prefix(4), sys.executable, "-m", "evogan"]
    command += ["search", str(config), "--run-dir", str(campaign)]
    with open(out / f"{config.stem}.log", "w") as log:
        process = subprocess.Popen(
            command, env=_env(out), cwd=REPO, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            process.wait(timeout=60 * minutes)
        except subprocess.TimeoutExpired:
            for rank in rank_pids(process.pid):  # as Slurm does; mpirun itself would kill them
                os.kill(rank, signal.SIGTERM)
            process.wait(timeout=600)
    return campaign


def _figures(campaign: Path, minutes: float) -> dict:
    rows = []
    for path in sorted((campaign / "table").glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    trained = [r for r in rows if r["status"] not in ("invalid", "memory")]
    wall = max((r["elapsed_s"] for r in trained), default=0.0)
    curve: list[list[float]] = []
    for row in sorted((r for r in trained if r["status"] == "ok"), key=lambda r: r["elapsed_s"]):
        if not curve or row["fitness"] < curve[-1][1]:
            curve.append([row["elapsed_s"], row["fitness"]])
    best_by_minute = [
        min((best for elapsed, best in curve if elapsed <= 60 * minute), default=None)
        for minute in range(1, int(minutes) + 1)
    ]
    return {
        "candidates_trained": len(trained),
        "pruned": sum(1 for r in trained if r["status"] == "pruned"),
        "candidates_per_hour": 3600.0 * len(trained) / wall if wall > 0 else 0.0,
        "best_fitness_by_minute": best_by_minute,
        "best_curve": curve,
    }


def _plot(path: Path, result: dict) -> None:
    """Best fitness found so far against campaign time: one panel per backend, pruning off
    (solid) and on (dashed), one colour per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = sorted({name.split("/")[0] for name in result["runs"]})
    fig, axes = plt.subplots(1, len(backends), figsize=(4.2 * len(backends), 3.8), sharey=True)
    axes = [axes] if len(backends) == 1 else list(axes)
    for ax, backend in zip(axes, backends, strict=True):
        for name, run in result["runs"].items():
            owner, kind, seed = name.split("/")
            if owner != backend or not run["best_curve"]:
                continue
            times = [t / 60 for t, _ in run["best_curve"]] + [result["minutes"]]
            values = [v for _, v in run["best_curve"]]
            ax.step(
                times,
                values + values[-1:],
                where="post",
                linestyle="-" if kind == "none" else "--",
                color=f"C{result['seeds'].index(int(seed[4:]))}",
                label=f"{kind}, {seed}: {run['candidates_per_hour']:.0f}/h",
            )
        ax.set_title(
            f"pbt: rows are segments of {result['steps']} steps, weights carried on"
            if backend == "pbt"
            else f"{backend}: candidates of {result['steps']} steps",
            fontsize=9,
        )
        ax.set_xlabel("campaign wall time [min]")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, title="pruning, seed: rows per hour", title_fontsize=7)
    firsts = [r["best_fitness_by_minute"][0] for r in result["runs"].values()]
    lasts = [r["best_curve"][-1][1] for r in result["runs"].values() if r["best_curve"]]
    if firsts and None not in firsts and lasts:  # the first minute's drop off the scale
        axes[0].set_ylim(0.995 * min(lasts), 1.005 * max(firsts))
    axes[0].set_ylabel("best fitness so far (lower is better)")
    fig.suptitle(
        "tiny family, 2 groups x 2 ranks on 2 cores; fitness: validation score, lower is better",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--backends", nargs="+", choices=("ga", "optuna", "pbt"), default=["ga", "optuna", "pbt"]
    )
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--factor", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument(
        "--analyse", action="store_true", help="only re-read the campaigns already in --out"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"steps": args.steps, "minutes": args.minutes, "seeds": args.seeds, "runs": {}}
    halving = {"kind": "successive_halving", "min_budget": 1, "reduction_factor": args.factor}
    for seed in args.seeds:
        for backend in args.backends:
            for pruning in [{"kind": "none"}] + ([halving] if backend != "pbt" else []):
                config = _config(args.out, args, backend, pruning, seed)
                campaign = args.out / config.stem
                if not args.analyse:
                    _run(args.out, config, args.minutes)
                name = f"{backend}/{pruning['kind']}/seed{seed}"
                result["runs"][name] = _figures(campaign, args.minutes)
                print(name, json.dumps(result["runs"][name]), flush=True)
    (args.out / "bench_pruning.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot(args.out / "bench_pruning.png", result)


if __name__ == "__main__":
    main()
