"""Did a trained 3DGAN learn showers? The four physics numbers of the learning target, per
energy bin, on held-out reference showers, and the selection score over training.

    mpirun -n 2 evogan train configs/gan3d_small.yaml --run-dir populations/gan3d-small
    python scripts/bench_gan_learning.py populations/gan3d-small --events 2000
    python scripts/bench_gan_learning.py populations/cc2-s* --tolerance sampling_fraction=0.05

The reference is an independent synthetic sample (a seed the training set never used) of the
run's own detector and energy range (log-uniform when the run's was), so every event is held
out. For each equal-count energy bin the script compares the generated and reference means of:
the sampling fraction (E_sum/E_primary, target within 10%), the longitudinal centre of gravity
(within 1 layer), the transverse width (mean of the two energy-weighted transverse widths,
within 20%) and the hits above the cell threshold (within 25%); ``--tolerance`` sets another
target for a quantity. It also scores the same showers with every cell kept (no cell
threshold) and reads the run's validation records: the score at the first and the last
validation, the best one, and the floor, with the training wall time. Given several runs
(seeds of one config), it ends with each cell's deviation over the runs (mean, standard
deviation, worst) and how many runs meet every target.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from evogan.config import load_config
from evogan.data.synthetic import synthesize
from evogan.detectors import detector_for
from evogan.gan3d.model.generate import generate_showers
from evogan.gan3d.model.model_file import find_generator, load_generator
from evogan.physics import Reference
from evogan.physics.targets import TOLERANCES, compare_targets, format_deviation
from evogan.store import RunDir


def held_out_reference(run: RunDir, events: int) -> tuple[np.ndarray, ...]:
    """An independent synthetic sample in the run's energy range (never seen in training), and
    the cell threshold the run read its data with."""
    config = load_config(run.file("config.yaml"))
    synthetic = config.data.synthetic
    detector = detector_for(config.data.detector) if config.data.detector else None
    parts = list(
        synthesize(
            events,
            tuple(synthetic.energy_range),
            synthetic.seed + 1_000_003,
            detector=detector,
            log_uniform=synthetic.log_uniform,
        )
    )
    sample = tuple(np.concatenate([p[i] for p in parts]) for i in range(3))
    return (*sample, config.data.cell_threshold, detector)


def score_history(run: RunDir) -> dict:
    """First, last and best validation score of the run, with the floor and wall time."""
    records = run.metrics("validation")
    if not records:
        return {}
    scores = [r["score"] for r in records]
    epochs = run.metrics("epoch")
    return {
        "validations": len(records),
        "first": {k: records[0].get(k) for k in ("step", "wall_seconds", "score")},
        "last": {k: records[-1].get(k) for k in ("step", "wall_seconds", "score")},
        "best": min(scores),
        "floor": records[-1].get("floor"),
        "floor_spread": records[-1].get("floor_spread"),
        "train_seconds": round(epochs[-1]["wall_seconds"]) if epochs else None,
    }


def learning(path: Path, args: argparse.Namespace) -> dict:
    """The targets' rows, scores and validation history of one run's generator."""
    run = RunDir.open(path)
    spec, generator, _ = load_generator(find_generator(args.model or path))
    ecal, energy, theta, threshold, detector = held_out_reference(run, args.events)
    rng = torch.Generator().manual_seed(args.seed)
    angle = theta if spec.conditioning.angle else None
    generated = generate_showers(spec, generator, energy, angle, rng)
    settings = {"bins": args.bins, "detector": detector}
    reference = Reference.from_showers(ecal, energy, cell_threshold=threshold, **settings)
    scored = reference.score(generated, energy)
    rows = compare_targets(scored.table, reference.table, reference.edges, args.tolerance)
    unthresholded = Reference.from_showers(ecal, energy, cell_threshold=0.0, **settings)
    dust = np.count_nonzero((generated > 0) & (generated < threshold))
    return {
        "run": str(path),
        "events": args.events,
        "threshold": threshold,
        "energy_edges_gev": reference.edges.tolist(),
        "rows": rows,
        "all_within": all(r["within"] for r in rows),
        "score_now": scored.score,
        "score_unthresholded": unthresholded.score(generated, energy).score,
        "below_threshold": dust / max(np.count_nonzero(generated > 0), 1),
        "floor_now": reference.floor(),
        "history": score_history(run),
    }


def print_run(result: dict) -> None:
    """One run's table of targets, its scores and its validation history."""
    edges = np.round(result["energy_edges_gev"], 1).tolist()
    print(f"{result['run']}: {result['events']} held-out showers, energy bins {edges} GeV")
    print("| quantity | bin | generated | reference | deviation | tolerance | within |")
    print("|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        print(
            f"| {r['quantity']} | {r['bin']} | {r['generated']:.4g} +- {r['generated_error']:.2g}"
            f" | {r['reference']:.4g} +- {r['reference_error']:.2g} | {format_deviation(r)} | "
            f"{_tolerance(r)} | {'yes' if r['within'] else 'no'} |"
        )
    floor = result["floor_now"]
    print(
        f"score of these showers {result['score_now']:.3f}, floor {floor['score']:.3f} +- "
        f"{floor['spread']:.3f}; all four quantities within tolerance in every bin: "
        f"{'yes' if result['all_within'] else 'no'}"
    )
    print(
        f"cells below the {result['threshold']:g} GeV threshold: "
        f"{100 * result['below_threshold']:.2f}% of the non-zero ones; score with every cell "
        f"kept {result['score_unthresholded']:.3f}"
    )
    if result["history"]:
        h = result["history"]
        print(
            f"validation during training: {h['validations']} scores, first "
            f"{h['first']['score']:.3f} (step {h['first']['step']}), last "
            f"{h['last']['score']:.3f} (step {h['last']['step']}), best {h['best']:.3f}, "
            f"floor {h['floor']:.3f}, training wall time {h['train_seconds']} s"
        )
    print()


def print_over_runs(results: list[dict]) -> None:
    """Each (quantity, bin) over the runs: mean and standard deviation of the deviation, the
    worst one, and in how many runs it is within tolerance."""
    print(f"over {len(results)} runs (deviation: mean +- standard deviation over runs, worst):")
    print("| quantity | bin | deviation | worst | tolerance | runs within |")
    print("|---|---|---|---|---|---|")
    for cell, first in enumerate(results[0]["rows"]):
        rows = [result["rows"][cell] for result in results]
        deviations = np.array([r["deviation"] for r in rows])
        worst = rows[int(np.argmax(np.abs(deviations)))]
        factor = 1.0 if first["kind"] == "absolute" else 100.0
        unit = " layers" if first["kind"] == "absolute" else "%"
        print(
            f"| {first['quantity']} | {first['bin']} | {factor * deviations.mean():+.2f} +- "
            f"{factor * deviations.std(ddof=1):.2f}{unit} | {format_deviation(worst)} | "
            f"{_tolerance(first)} | {sum(r['within'] for r in rows)}/{len(rows)} |"
        )
    meeting = sum(result["all_within"] for result in results)
    falls = [r["history"]["last"]["score"] < r["history"]["first"]["score"] for r in results]
    print(f"runs meeting every target: {meeting}/{len(results)}; selection score lower at the")
    print(f"last validation than at the first: {sum(falls)}/{len(results)}")


def _tolerance(row: dict) -> str:
    if row["kind"] == "absolute":
        return f"{row['tolerance']:g} layers"
    return f"{100 * row['tolerance']:g}%"


def _tolerance_pair(text: str) -> tuple[str, float]:
    name, _, value = text.partition("=")
    if name not in TOLERANCES or not value:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give QUANTITY=VALUE with QUANTITY one of {', '.join(TOLERANCES)}"
        )
    return name, float(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="gan3d run directories")
    parser.add_argument("--model", type=Path, help="generator file (default: each run's best)")
    parser.add_argument("--events", type=int, default=2000, help="held-out reference showers")
    parser.add_argument("--bins", type=int, default=4, help="equal-count energy bins")
    parser.add_argument("--seed", type=int, default=0, help="generator noise seed")
    parser.add_argument(
        "--tolerance",
        type=_tolerance_pair,
        action="append",
        default=[],
        help="QUANTITY=VALUE: another target (fraction, or layers for centre_z_layer)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    args.tolerance = dict(args.tolerance)
    results = [learning(path, args) for path in args.runs]
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
        return 0
    for result in results:
        print_run(result)
    if len(results) > 1:
        print_over_runs(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
