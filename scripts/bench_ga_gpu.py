#!/usr/bin/env python
"""Batched GA evaluation on a GPU: lambda up to 4,096 children per generation (speed issue, item 5).

For each children count, all lambda+1 candidates of a generation are scored on a real training
minibatch of the shipped regressor (``configs/regressor_ga.yaml``: 2,049 weights, batch 128) by
the Triton kernel path of :func:`evogan.regressor.network.batched_predict`. Its counted FLOP
rate (convolution and linear layer, as in ``bench_regressor.py``) is divided by a dense float32
matmul rate (8192^3, TF32 off) measured in the same run, interleaved round by round; the
target is >= 0.5. Timings use CUDA events around the call (operand preparation included),
medians over ``--repeats`` calls per round, then the median and range over rounds.

The ``GA`` row times the call the GA makes, ``RegressorProblem.evaluate`` with ``ga.device:
cuda`` at torch's default precision: candidates copied from host memory, fitness copied back.
Each of the kernel's product precisions is also timed and checked against a float64 evaluation
of the same candidates (max relative error of the predictions, scaled by the largest
prediction).

    python scripts/bench_ga_gpu.py                              # children 64 256 1024 4096
    python scripts/bench_ga_gpu.py --children 8 64 --rounds 5 --json out.json
    python scripts/bench_ga_gpu.py --children 1024 4096 --tiles  # the kernel's tile choice
    python scripts/bench_ga_gpu.py --children 4096 --tiles ieee   # float32 products' tiles only
    python scripts/bench_ga_gpu.py --tile ieee 128 64 32 8        # another tile
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from evogan.config import load_config
from evogan.engine import Streams
from evogan.regressor import gpu_eval
from evogan.regressor.data import load_and_check
from evogan.regressor.network import (
    RegressorLayout,
    batched_predict,
    evaluation_path,
    initial_weights,
    unflatten,
)
from evogan.regressor.patches import gpu_filter_sums
from evogan.regressor.problem import RegressorProblem

REPO = Path(__file__).resolve().parents[1]
GA = "GA"  # the row of RegressorProblem.evaluate: host candidates in, fitness back on the host


def _milliseconds(function, repeats: int) -> float:
    """Median of ``repeats`` CUDA-event timings of ``function()``, after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def matmul_tflops(size: int = 8192, repeats: int = 10) -> float:
    """Dense float32 matmul rate with TF32 off (the device's float32 rate)."""
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        a = torch.randn(size, size, device="cuda")
        b = torch.randn(size, size, device="cuda")
        return 2 * size**3 / _milliseconds(lambda: a @ b, repeats) / 1e9
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed


def _candidates(layout: RegressorLayout, count: int, seed: int) -> torch.Tensor:
    """Initial weights plus a point mutation's worth of spread, so candidates differ."""
    generator = torch.Generator().manual_seed(seed)
    weights = initial_weights(layout, count, generator)
    return (weights + 0.05 * torch.randn(count, layout.size, generator=generator)).cuda()


def accuracy(layout: RegressorLayout, genomes: torch.Tensor, x: torch.Tensor) -> dict[str, float]:
    """Max relative error of each precision's predictions against a float64 evaluation."""
    reference = batched_predict(layout, genomes.double(), x.double())
    scale = reference.abs().max().item()
    views = unflatten(layout, genomes)
    count = genomes.shape[0]
    errors = {}
    for precision in gpu_eval.PRECISIONS:
        sums = gpu_filter_sums(layout, views, x, precision)
        prediction = sums.reshape(count, layout.filters, -1).sum(1)
        prediction += views["linear.bias"].reshape(count, 1)
        errors[precision] = ((prediction.double() - reference).abs().max() / scale).item()
    return errors


TILES = [  # (rows, positions, events, warps) compared by --tiles
    (64, 64, 16, 4),
    (128, 64, 16, 4),
    (128, 64, 16, 8),
    (64, 128, 16, 4),
    (128, 32, 32, 4),
    (256, 64, 8, 8),
    (128, 128, 16, 8),
    (64, 64, 32, 4),
    (128, 64, 32, 8),
    (256, 32, 16, 8),
    (64, 32, 32, 2),
    (128, 32, 16, 4),
    (256, 64, 16, 8),
    (128, 128, 32, 8),
    (64, 128, 32, 4),
    (32, 64, 32, 2),
]


def compare_tiles(
    layout: RegressorLayout,
    genomes: dict,
    batches: list,
    flops: float,
    rounds: int,
    precisions: list[str],
) -> list[str]:
    """Fraction of the float32 matmul rate of each kernel tile and precision, interleaved;
    per children count and precision, the fastest first."""
    shipped, lines = dict(gpu_eval.TILES), []
    try:
        for n, candidates in genomes.items():
            views, fractions = unflatten(layout, candidates), {}
            for round_ in range(rounds):
                dense = matmul_tflops()
                x = batches[round_ % len(batches)]
                for tile, precision in ((t, p) for t in TILES for p in precisions):
                    gpu_eval.TILES[precision] = tile
                    ms = _milliseconds(
                        lambda p=precision, x=x, v=views: gpu_filter_sums(layout, v, x, p), 10
                    )
                    fraction = (n + 1) * flops / ms / 1e9 / dense
                    fractions.setdefault((tile, precision), []).append(fraction)
            ranked = sorted(fractions.items(), key=lambda kv: (kv[0][1], -statistics.median(kv[1])))
            for (tile, precision), values in ranked:
                mark = " (shipped)" if tile == shipped[precision] else ""
                lines.append(
                    f"{n:8d} tile {tile} {precision:5}: "
                    f"{' '.join(f'{v:.3f}' for v in values)}{mark}"
                )
    finally:
        gpu_eval.TILES.update(shipped)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, nargs="+", default=[64, 256, 1024, 4096])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per round")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--tiles",
        nargs="*",
        choices=gpu_eval.PRECISIONS,
        metavar="PRECISION",
        help="compare the kernel's tiles in these precisions instead (default both; 2 rounds)",
    )
    parser.add_argument(
        "--tile",
        nargs=5,
        action="append",
        default=[],
        metavar=("PRECISION", "ROWS", "POSITIONS", "EVENTS", "WARPS"),
        help="run with this tile instead of the shipped one (repeatable)",
    )
    args = parser.parse_args(argv)
    for precision, *numbers in args.tile:
        if precision not in gpu_eval.PRECISIONS or not all(n.isdigit() for n in numbers):
            parser.error(
                f"--tile takes a precision ({', '.join(gpu_eval.PRECISIONS)}) and four whole "
                f"numbers, got {' '.join([precision, *numbers])}"
            )
        gpu_eval.TILES[precision] = tuple(int(n) for n in numbers)
    if not torch.cuda.is_available():
        print("bench_ga_gpu: torch sees no CUDA GPU here; run it on a GPU machine", file=sys.stderr)
        return 2
    if not gpu_eval.available(torch.zeros(1, device="cuda")):
        print("bench_ga_gpu: Triton is not installed; pip install triton", file=sys.stderr)
        return 2
    cfg = load_config(REPO / "configs" / "regressor_ga.yaml")
    layout, train, _ = load_and_check(cfg, cfg.ga.batch_size, announce=lambda line: None)
    problem = RegressorProblem(layout, train, batch_size=cfg.ga.batch_size, device="cuda")
    minibatches = list(problem.batches(0, Streams.derive(cfg.seed).data))[:8]
    batches = [x.cuda() for x, _ in minibatches]
    flops_per_candidate = cfg.ga.batch_size * layout.flops_per_sample()
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}; network {layout.size} "
        f"weights, batch {cfg.ga.batch_size}",
        flush=True,
    )
    genomes = {n: _candidates(layout, n + 1, seed=n) for n in args.children}
    if args.tiles is not None:
        precisions = args.tiles or list(gpu_eval.PRECISIONS)
        lines = compare_tiles(layout, genomes, batches, flops_per_candidate, 2, precisions)
        print("\n".join(lines))
        return 0
    path = {n: evaluation_path(layout, g, batches[0]) for n, g in genomes.items()}
    errors = {n: accuracy(layout, g[:65], batches[0]) for n, g in genomes.items()}
    dense, rates = [], {(n, p): [] for n in args.children for p in (*gpu_eval.PRECISIONS, GA)}
    for round_ in range(args.rounds):
        dense.append(matmul_tflops())
        for n, candidates in genomes.items():
            x, minibatch = batches[round_ % len(batches)], minibatches[round_ % len(batches)]
            views = unflatten(layout, candidates)
            for precision in gpu_eval.PRECISIONS:
                ms = _milliseconds(
                    lambda v=views, x=x, p=precision: gpu_filter_sums(layout, v, x, p),
                    args.repeats,
                )
                rates[n, precision].append((n + 1) * flops_per_candidate / ms / 1e9)
            host = candidates.cpu()
            ms = _milliseconds(
                lambda h=host, b=minibatch: problem.evaluate(h, b),
                args.repeats,
            )
            rates[n, GA].append((n + 1) * flops_per_candidate / ms / 1e9)
    fp32 = statistics.median(dense)
    lines = [
        f"dense float32 matmul (8192^3, TF32 off): {fp32:.1f} TFLOP/s median "
        f"[{min(dense):.1f}, {max(dense):.1f}] over {args.rounds} rounds",
        f"{'children':>8} {'path':20} {'precision':9} {'TFLOP/s':>22} {'/ fp32 matmul':>13} "
        f"{'max rel. error':>14}",
    ]
    for n in args.children:
        for precision in (*gpu_eval.PRECISIONS, GA):
            values = rates[n, precision]
            median = statistics.median(values)
            error = f"{errors[n][precision]:14.1e}" if precision in errors[n] else ""
            lines.append(
                f"{n:8d} {path[n]:20} {precision:9} {median:8.2f} [{min(values):5.2f}, "
                f"{max(values):5.2f}] {median / fp32:13.2f} {error}"
            )
    print("\n".join(lines))
    if args.json:
        result = {
            "gpu": torch.cuda.get_device_name(),
            "dense_fp32_tflops": dense,
            "rates_tflops": {f"{n}/{p}": v for (n, p), v in rates.items()},
            "max_relative_error": errors,
            "path": path,
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
