#!/usr/bin/env python
"""Benchmark of the regressor neuroevolution (targets of the GA issue; not part of the tests).

(a) Quality on the default synthetic set with the shipped configs (5,000 training events, full
    schedule): GA test MAPE per energy bin (target: under 10% in every bin), RMSprop and hybrid
    final test MAPE, seconds of training to reach 10% and 5% test MAPE for each.
(b) Speed: FLOP rate of the batched evaluation of a generation's lambda+1 candidates (conv and
    linear FLOPs counted) as a fraction of a dense 1024x1024 float32 matmul measured in the same
    process, interleaved so machine load hits both alike (target >= 80%); the time of a
    generation of an elite and its children at the shipped mutation rate (they share the
    elite's unchanged filters) against unrelated candidates, in the same rounds; the share of
    a generation's wall time not spent in evaluation (target <= 5%); generations/s,
    evaluations/s.

(c) Over seeds (``--seeds 0 1 2 3 4``): the GA's mean test MAPE, its worst energy bin per
    seed and its error on 3,125 fresh 2-10 GeV showers (scripts/check_low_energy.py: the
    test set's lowest bin holds about 14 events), and whether the hybrid reaches RMSprop's
    final test MAPE in no more training time than RMSprop itself takes to reach it (the
    speed issue's targets).

    python scripts/bench_regressor.py [--quick] [--out DIR] [--threads N] [--seeds K ...]

``--quick`` shortens the runs to 8 epochs (rate steps at epochs 4 and 6) and the timing loop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from check_low_energy import EVENTS, RANGE_GEV, THRESHOLD, score

from evogan.config import load_config
from evogan.engine import Streams
from evogan.engine.problem import GenerationContext
from evogan.plots.compare import (
    RunRecord,
    plot_energy_response,
    plot_relative_error,
    plot_test_loss,
    summary_table,
)
from evogan.regressor.data import load_and_check
from evogan.regressor.evolve import evolve_regressor
from evogan.regressor.network import evaluation_path
from evogan.regressor.problem import RegressorProblem
from evogan.regressor.report import seconds_to_targets, target_key
from evogan.regressor.rmsprop import train_regressor
from evogan.store import atomic_write, to_json

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {
    "ga": REPO / "configs" / "regressor_ga.yaml",
    "rmsprop": REPO / "configs" / "regressor_rmsprop.yaml",
    "hybrid": REPO / "configs" / "regressor_hybrid.yaml",
}
QUICK = ["ga.epochs=8", "ga.schedule_milestones=[4, 6]", "train.epochs=8"]


def _seconds(function, repeats: int) -> float:
    """Best of ``repeats`` timings of ``function()``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def evaluation_speed(rounds: int) -> dict:
    """Interleaved dense-matmul and batched-evaluation FLOP rates on real minibatches."""
    cfg = load_config(CONFIGS["ga"])
    layout, train, _ = load_and_check(cfg, cfg.ga.batch_size, announce=lambda line: None)
    problem = RegressorProblem(
        layout, train, batch_size=cfg.ga.batch_size, eval_block=cfg.ga.eval_block
    )
    streams = Streams.derive(cfg.seed)
    genomes = problem.initial_genomes(cfg.ga.children + 1, streams.init)
    shipped = GenerationContext(0, 0, cfg.ga.mutation_rate, cfg.ga.mutation_power)
    children = problem.mutate(genomes[0], cfg.ga.children, cfg.seed, shipped)
    family = torch.cat([genomes[:1], children])
    batches = list(problem.batches(0, streams.data))
    size = 1024
    a, b = torch.randn(size, size), torch.randn(size, size)
    dense_flops = 2 * size**3
    eval_flops = genomes.shape[0] * cfg.ga.batch_size * layout.flops_per_sample()
    dense, evaluation, shared = [], [], []
    for index in range(rounds):
        dense.append(dense_flops / _seconds(lambda: a @ b, 3) / 1e9)
        batch = batches[index % len(batches)]
        seconds = _seconds(lambda batch=batch: problem.evaluate(genomes, batch), 3)
        evaluation.append(eval_flops / seconds / 1e9)
        shared.append(_seconds(lambda batch=batch: problem.evaluate(family, batch), 3) / seconds)
    return {
        "path": evaluation_path(layout, genomes, problem.train.x),
        "threads": torch.get_num_threads(),
        "candidates": genomes.shape[0],
        "batch": cfg.ga.batch_size,
        "flops_per_generation": eval_flops,
        "dense_gflops_median": statistics.median(dense),
        "dense_gflops_best": max(dense),
        "eval_gflops_median": statistics.median(evaluation),
        "eval_gflops_best": max(evaluation),
        "fraction_median": statistics.median(e / d for e, d in zip(evaluation, dense, strict=True)),
        "fraction_best": max(evaluation) / max(dense),
        "family_rate": cfg.ga.mutation_rate,
        "family_time_ratio_median": statistics.median(shared),
        "family_time_ratio_range": (min(shared), max(shared)),
    }


def quality_runs(out: Path, overrides: list[str]) -> dict[str, RunRecord]:
    """Every shipped config trained once into ``out/runs``, the figures into ``out/figures``."""
    for method, path in CONFIGS.items():
        cfg = load_config(path, overrides)
        run_dir = out / "runs" / method
        print(f"--- {method}: {path.name} {' '.join(overrides)} -> {run_dir}", flush=True)
        if method == "rmsprop":
            train_regressor(cfg, run_dir, announce=print)
        else:
            evolve_regressor(cfg, run_dir, announce=print)
    records = {method: RunRecord.load(out / "runs" / method) for method in CONFIGS}
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    listed = list(records.values())
    plot_test_loss(listed, figures / "test_loss.png")
    plot_energy_response(listed, figures / "energy_response.png")
    plot_relative_error(listed, figures / "relative_error.png")
    atomic_write(figures / "summary.md", "# Regressor benchmark\n\n" + summary_table(listed))
    return records


def seconds_to_reach(record: RunRecord, mape_value: float) -> float | None:
    """Training seconds at the first epoch whose test MAPE is at most ``mape_value``."""
    return seconds_to_targets(record.epochs, [mape_value])[target_key(mape_value)]


def seed_report(by_seed: dict[int, dict[str, RunRecord]], out: Path) -> list[str]:
    """The GA's test MAPE, worst bin and 2-10 GeV error per seed with their mean, and the
    hybrid's time to RMSprop's final test MAPE against RMSprop's own."""
    lines = ["", f"=== (c) over {len(by_seed)} seeds ==="]
    ga_mapes, hybrid_in_time, low_under = [], 0, 0
    for seed, records in by_seed.items():
        ga = records["ga"].summary
        worst = max(b["relative_error"] for b in ga["energy_response"])
        low = score(out / f"seed-{seed}" / "runs" / "ga", *RANGE_GEV, EVENTS)
        low_under += low["relative_error"] < THRESHOLD
        target = records["rmsprop"].epochs[-1]["test_mape"]
        rms_time = seconds_to_reach(records["rmsprop"], target)
        hybrid_time = seconds_to_reach(records["hybrid"], target)
        hybrid_in_time += hybrid_time is not None and hybrid_time <= rms_time
        ga_mapes.append(ga["test_mape"])
        lines.append(
            f"seed {seed}: GA test MAPE {_pct(ga['test_mape'])}, worst bin {_pct(worst)}, "
            f"2-10 GeV {_pct(low['relative_error'])} +- {_pct(low['standard_error'])} | "
            f"RMSprop final {_pct(target)} reached at {_secs(rms_time)}, hybrid at "
            f"{_secs(hybrid_time)}"
        )
    spread = statistics.stdev(ga_mapes) if len(ga_mapes) > 1 else 0.0
    lines += [
        f"GA mean test MAPE {_pct(statistics.mean(ga_mapes))} +- {_pct(spread)} (s.d.)",
        f"GA under 10% on fresh 2-10 GeV showers: {low_under} of {len(by_seed)} seeds",
        f"hybrid reaches RMSprop's final MAPE no later than RMSprop: {hybrid_in_time} of "
        f"{len(by_seed)} seeds",
    ]
    return lines


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def _secs(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.1f} s"


def report(speed: dict, records: dict[str, RunRecord]) -> list[str]:
    summaries = {method: record.summary for method, record in records.items()}
    lines = ["", "=== (a) quality (test set) ==="]
    for method, s in summaries.items():
        lines.append(
            f"{method:8s} test MAPE {_pct(s['test_mape'])} | to 10%: "
            f"{_secs(s['seconds_to_mape_10'])} | to 5%: {_secs(s['seconds_to_mape_5'])} | "
            f"train {s['train_seconds']:.1f} s | {s['generations']} generations/steps"
        )
    ga_bins = summaries["ga"]["energy_response"]
    worst = max(b["relative_error"] for b in ga_bins)
    lines.append("GA relative error per energy bin:")
    for b in ga_bins:
        lines.append(
            f"  {b['low']:6.1f}-{b['high']:6.1f} GeV  n={b['count']:4d}  "
            f"true {b['true_mean']:6.1f}  pred {b['pred_mean']:6.1f}  "
            f"error {_pct(b['relative_error'])} +- {_pct(b['relative_error_std'])}"
        )
    verdict = "met" if worst < 0.10 else "MISSED"
    lines.append(f"GA worst bin {_pct(worst)} (target < 10%: {verdict})")
    rms, ga = summaries["rmsprop"]["test_mape"], summaries["ga"]["test_mape"]
    lines.append(f"RMSprop final MAPE lower than GA: {'yes' if rms < ga else 'no'}")
    ga_summary = summaries["ga"]
    low, high = speed["family_time_ratio_range"]
    overhead = 1 - ga_summary["eval_share"]
    loop_overhead = 1 - ga_summary["eval_share_of_loop"]
    lines += [
        "",
        "=== (b) speed ===",
        f"evaluation path: {speed['path']} (EVOGAN_NATIVE=0 forces the torch path)",
        f"threads {speed['threads']}, {speed['candidates']} candidates x {speed['batch']} events "
        f"= {speed['flops_per_generation'] / 1e9:.3f} GFLOP per generation",
        f"dense matmul 1024^3: {speed['dense_gflops_median']:.1f} GFLOP/s median, "
        f"{speed['dense_gflops_best']:.1f} best",
        f"batched evaluation: {speed['eval_gflops_median']:.1f} GFLOP/s median, "
        f"{speed['eval_gflops_best']:.1f} best",
        f"evaluation / dense: {100 * speed['fraction_median']:.0f}% median of paired rounds, "
        f"{100 * speed['fraction_best']:.0f}% best/best (target >= 80%)",
        f"an elite and its children at rate {speed['family_rate']:g} take "
        f"{speed['family_time_ratio_median']:.2f} [{low:.2f}, {high:.2f}] of the time of "
        "unrelated candidates (median [min, max] of paired rounds; shared filters)",
        f"GA run: {ga_summary['generations_per_s']:.1f} generations/s, "
        f"{ga_summary['evaluations_per_s']:.0f} evaluations/s",
        f"outside evaluation: {100 * loop_overhead:.1f}% of the generation loop's wall time "
        f"(batches, mutation, selection, bookkeeping, checkpoints; target <= 5%), "
        f"{100 * overhead:.1f}% of the generation steps alone",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 epochs, fewer timing rounds")
    parser.add_argument("--out", type=Path, default=Path("/tmp/evogan-bench-regressor"))
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="train every config once per seed"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.out.exists() and any(args.out.iterdir()):
        print(f"bench: --out {args.out} is not empty; pass a new directory", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    speed = evaluation_speed(rounds=6 if args.quick else 20)
    overrides = QUICK if args.quick else []
    by_seed = {
        seed: quality_runs(args.out / f"seed-{seed}", [*overrides, f"seed={seed}"])
        for seed in args.seeds
    }
    lines = report(speed, by_seed[args.seeds[0]])
    if len(args.seeds) > 1:
        lines += seed_report(by_seed, args.out)
    summaries = {
        seed: {m: r.summary for m, r in records.items()} for seed, records in by_seed.items()
    }
    lines.append(f"bench wall time {time.perf_counter() - started:.0f} s; outputs in {args.out}")
    print("\n".join(lines))
    results = {"speed": speed, "summaries": summaries, "quick": args.quick}
    atomic_write(args.out / "bench.json", to_json(results, indent=2) + "\n")
    atomic_write(args.out / "report.txt", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
