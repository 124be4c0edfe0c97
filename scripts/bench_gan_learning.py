"""Did a trained 3DGAN learn showers? The four physics numbers of the learning target, per
energy bin, on held-out reference showers, and the selection score over training.

    mpirun -n 2 evogan train configs/gan3d_small.yaml --run-dir populations/gan3d-small
    python scripts/bench_gan_learning.py populations/gan3d-small --events 2000

The reference is an independent synthetic sample (a seed the training set never used) of the
run's own energy range, so every event is held out. For each equal-count energy bin the
script compares the generated and reference means of: the sampling fraction (E_sum/E_primary,
target within 10%), the longitudinal centre of gravity (within 1 layer), the transverse width
(mean of the x and y energy-weighted widths, within 20%) and the hits above 3e-4 GeV (within
25%). It also scores the same showers with every cell kept (no cell threshold: how a
generator's showers were scored before the score thresholded every set) and reads the run's
validation records: the score at the first and the last validation, the best one, and the
floor, with the training wall time.
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
from evogan.gan3d.model.generate import generate_showers
from evogan.gan3d.model.model_file import find_generator, load_generator
from evogan.physics import Reference
from evogan.physics.targets import compare_targets, format_deviation
from evogan.store import RunDir


def held_out_reference(run: RunDir, events: int) -> tuple[np.ndarray, ...]:
    """An independent synthetic sample in the run's energy range (never seen in training), and
    the cell threshold the run read its data with."""
    config = load_config(run.file("config.yaml"))
    synthetic = config.data.synthetic
    parts = list(synthesize(events, tuple(synthetic.energy_range), synthetic.seed + 1_000_003))
    sample = tuple(np.concatenate([p[i] for p in parts]) for i in range(3))
    return (*sample, config.data.cell_threshold)


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="gan3d run directory")
    parser.add_argument("--model", type=Path, help="generator file (default: the run's best)")
    parser.add_argument("--events", type=int, default=2000, help="held-out reference showers")
    parser.add_argument("--bins", type=int, default=4, help="equal-count energy bins")
    parser.add_argument("--seed", type=int, default=0, help="generator noise seed")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    run = RunDir.open(args.run)
    spec, generator, _ = load_generator(find_generator(args.model or args.run))
    ecal, energy, theta, threshold = held_out_reference(run, args.events)
    rng = torch.Generator().manual_seed(args.seed)
    angle = theta if spec.conditioning.angle else None
    generated = generate_showers(spec, generator, energy, angle, rng)
    reference = Reference.from_showers(ecal, energy, cell_threshold=threshold, bins=args.bins)
    scored = reference.score(generated, energy)
    rows = compare_targets(scored.table, reference.table, reference.edges)
    # what the cell threshold changes: the same showers with every cell kept
    unthresholded = Reference.from_showers(ecal, energy, cell_threshold=0.0, bins=args.bins)
    dust = np.count_nonzero((generated > 0) & (generated < threshold))
    result = {
        "run": str(args.run),
        "events": args.events,
        "energy_edges_gev": reference.edges.tolist(),
        "rows": rows,
        "all_within": all(r["within"] for r in rows),
        "score_now": scored.score,
        "score_unthresholded": unthresholded.score(generated, energy).score,
        "below_threshold": dust / max(np.count_nonzero(generated > 0), 1),
        "floor_now": reference.floor(),
        "history": score_history(run),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{args.events} held-out showers, energy bins {np.round(reference.edges, 1).tolist()} GeV"
    )
    print("| quantity | bin | generated | reference | deviation | tolerance | within |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        absolute = r["kind"] == "absolute"
        tol = f"{r['tolerance']:g} layers" if absolute else f"{100 * r['tolerance']:g}%"
        print(
            f"| {r['quantity']} | {r['bin']} | {r['generated']:.4g} +- {r['generated_error']:.2g}"
            f" | {r['reference']:.4g} +- {r['reference_error']:.2g} | {format_deviation(r)} | "
            f"{tol} | {'yes' if r['within'] else 'no'} |"
        )
    floor = result["floor_now"]
    print(
        f"score of these showers {result['score_now']:.3f}, floor {floor['score']:.3f} +- "
        f"{floor['spread']:.3f}; all four quantities within tolerance in every bin: "
        f"{'yes' if result['all_within'] else 'no'}"
    )
    print(
        f"cells below the {threshold:g} GeV threshold: {100 * result['below_threshold']:.2f}% "
        f"of the non-zero ones; score with every cell kept {result['score_unthresholded']:.3f}"
    )
    if result["history"]:
        h = result["history"]
        print(
            f"validation during training: {h['validations']} scores, first "
            f"{h['first']['score']:.3f} (step {h['first']['step']}), last "
            f"{h['last']['score']:.3f} (step {h['last']['step']}), best {h['best']:.3f}, "
            f"floor {h['floor']:.3f}, training wall time {h['train_seconds']} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
