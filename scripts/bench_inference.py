"""CPU cost of a generated shower near the CPU's limit: core-ms per shower of each spec's
generator, as ``evogan generate`` runs it (its inference form,
:func:`evogan.gan3d.model.inference.inference_generator`) and as the plain eval-mode module
ran it before, against the same run's dense matrix-product rate (docs/performance.md,
"Generation on a CPU").

    python scripts/bench_inference.py --out bench_inference.json          # about 5 min, 2 cores
    python scripts/bench_inference.py --quick --out /tmp/quick.json       # under a minute

For every spec x precision (float32; bf16 where the CPU has bf16 instructions: ``amx_bf16``
or ``avx512_bf16``) x thread count (1 and every core this process may use) x form (``plain``:
the module under autocast as before; ``inference``: the form), one timed call generates one
batch of numbered events (:func:`~evogan.gan3d.model.generate.generate_events`: draws, network,
cell transform, copy to numpy), at every ``--batch`` for the inference form and at
``--plain-batch`` for the plain module. Rounds are interleaved (the whole grid once per round,
after one untimed warm-up call per cell); each round also times ``--matmul`` x ``--matmul``
products of that precision on that many threads, the same way. Figures are medians with
[min, max] over the rounds.

- core-ms/shower = wall seconds x threads / showers x 1000; cpu-ms/shower is the process's CPU
  time instead (the same on an idle machine, less inflated by other processes on a busy one);
- GFLOP/shower = 2 x the multiply-adds of the dense layer and of every block's convolution in
  the form it runs: the phase form (the upsampling fused into the convolution: O x s1 s2 s3
  phase channels over the small grid, every output cell conv3d computes) where the block
  uses it, else the direct convolution over its output cells. The spec as written (the
  convolution over the upsampled grid) is given beside it. Elementwise work is not counted;
- fraction = (GFLOP/shower / seconds per shower) / the matrix-product rate at the same
  precision and threads.

Writes the rows, the best batch of each cell and the machine (CPU model, flags, torch) as JSON
with ``--out`` and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evogan.gan3d.kernels.convolution import phase_plan, phase_taps  # noqa: E402
from evogan.gan3d.model.generate import event_conditions, generate_events  # noqa: E402
from evogan.gan3d.model.inference import inference_generator  # noqa: E402
from evogan.gan3d.model.networks import Generator, sample_events, to_gev  # noqa: E402
from evogan.gan3d.model.precision import ForwardOptions  # noqa: E402
from evogan.gan3d.model.spec import GanSpec, generator_layers, load_spec  # noqa: E402

SPECS = ["configs/gan3d.yaml", "configs/gan3d_small.yaml", "configs/gan3d_cc2_small.yaml"]
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")


def cpu_record() -> dict:
    """The CPU model, the flags that decide the kernels, the cores and torch's build."""
    model, flags = platform.processor(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model in ("", platform.processor()):
                model = value.strip()
            if key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {
        "cpu": model,
        "flags": [f for f in CPU_FLAGS if f in flags],
        "cores": len(os.sched_getaffinity(0)),
        "torch": torch.__version__,
        "mkldnn": torch.backends.mkldnn.is_available(),
    }


def bf16_support(machine: dict) -> str | None:
    """The CPU instructions bf16 runs on here (``amx_bf16`` or ``avx512_bf16``), or None."""
    if not machine["mkldnn"]:
        return None
    return next((f for f in ("amx_bf16", "avx512_bf16") if f in machine["flags"]), None)


def flops_per_shower(spec: GanSpec) -> tuple[float, float]:
    """(GFLOP as run, GFLOP as the spec writes it) per shower (module docstring)."""
    generator = Generator(spec)
    layers = generator_layers(spec)
    written = 2 * sum(layer.macs for layer in layers)
    run = 2 * layers[0].macs
    grids = [tuple(spec.dense_seed[1:])] + [tuple(layer.out_shape[1:]) for layer in layers[1:]]
    for block, grid, layer in zip(generator.blocks, grids, layers[1:], strict=False):
        if not block.phase:
            run += 2 * layer.macs
            continue
        conv = block[block.head - 1]
        kernel = tuple(conv.kernel_size)
        padding, _, _ = phase_plan(grid, block.factors, kernel, block.pads)
        taps = phase_taps(block.factors, kernel)
        cells = math.prod(
            n + a + b - j + 1 for n, (a, b), j in zip(grid, padding, taps, strict=True)
        )
        macs = conv.out_channels * math.prod(block.factors) * conv.in_channels * math.prod(taps)
        run += 2 * macs * cells
    return run / 1e9, written / 1e9


def plain_events(spec, generator, energy, theta, seed, events, precision) -> np.ndarray:
    """``generate_events`` as it ran before the inference form: the module itself in eval
    mode, under autocast for bf16."""
    numbers = torch.from_numpy(events)
    with torch.no_grad(), ForwardOptions(precision).autocast(torch.device("cpu")):
        angle = None if theta is None else torch.from_numpy(theta)
        showers = sample_events(spec, generator, torch.from_numpy(energy), angle, seed, numbers)
    return to_gev(spec, showers.float()).numpy()


class Cell:
    """One timed configuration: a spec, precision, thread count, form and batch."""

    def __init__(self, spec_name, spec, generator, precision, threads, form, batch) -> None:
        self.key = {"spec": spec_name, "precision": precision, "threads": threads}
        self.key.update(form=form, batch=batch)
        self.threads = threads
        numbers = np.arange(batch, dtype=np.int64)
        theta_range = (1.0, 2.1) if spec.conditioning.angle else None
        energy, theta = event_conditions(1, numbers, (10.0, 200.0), theta_range)
        if form == "plain":
            net = generator.eval()
            self.run = lambda: plain_events(spec, net, energy, theta, 2, numbers, precision)
        else:
            built = inference_generator(spec, generator, precision)
            self.run = lambda: generate_events(spec, built, energy, theta, 2, numbers, precision)
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def time(self) -> None:
        torch.set_num_threads(self.threads)
        wall, cpu = time.perf_counter(), time.process_time()
        self.run()
        self.cpu.append(time.process_time() - cpu)
        self.wall.append(time.perf_counter() - wall)


def matmul_timer(precision: str, threads: int, size: int) -> Callable[[], float]:
    """A call that times one ``size``^3 product at ``precision`` on ``threads`` threads and
    returns its GFLOP/s."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen).to(dtype)
    b = torch.randn(size, size, generator=gen).to(dtype)

    def timed() -> float:
        torch.set_num_threads(threads)
        start = time.perf_counter()
        torch.mm(a, b)
        return 2 * size**3 / (time.perf_counter() - start) / 1e9

    timed()
    return timed


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def build_cells(args, machine: dict) -> tuple[list[Cell], dict, list[str]]:
    """Every timed cell, each spec's GFLOP per shower, and the precisions measured."""
    support = bf16_support(machine)
    precisions = ["float32"] + (["bf16"] if support and not args.no_bf16 else [])
    cells, flops = [], {}
    for path in args.spec:
        spec = load_spec(path)
        name = str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
        flops[name] = flops_per_shower(spec)
        generator = Generator(spec, torch.Generator().manual_seed(0))
        for precision in precisions:
            for threads in args.threads:
                cells.append(
                    Cell(name, spec, generator, precision, threads, "plain", args.plain_batch)
                )
                for batch in args.batch:
                    cells.append(
                        Cell(name, spec, generator, precision, threads, "inference", batch)
                    )
    return cells, flops, precisions


def measure(args, machine: dict) -> dict:
    """The interleaved rounds; the record the JSON holds."""
    threads = torch.get_num_threads()
    try:
        return _measure(args, machine)
    finally:
        torch.set_num_threads(threads)


def _measure(args, machine: dict) -> dict:
    cells, flops, precisions = build_cells(args, machine)
    timers = {(p, t): matmul_timer(p, t, args.matmul) for p in precisions for t in args.threads}
    rates: dict[tuple[str, int], list[float]] = {key: [] for key in timers}
    for cell in cells:
        cell.time()  # warm-up: oneDNN primitives, kernel build, first-touch memory
        cell.wall.clear()
        cell.cpu.clear()
    for _ in range(args.rounds):
        for key, timer in timers.items():
            rates[key].append(max(timer() for _ in range(args.matmul_repeats)))
        for cell in cells:
            cell.time()
    rows = []
    for cell in cells:
        k = cell.key
        showers, rate = k["batch"], statistics.median(rates[(k["precision"], k["threads"])])
        core_ms = [1e3 * w * k["threads"] / showers for w in cell.wall]
        run_gflop, written_gflop = flops[k["spec"]]
        achieved = run_gflop / (statistics.median(cell.wall) / showers)
        rows.append(
            {
                **k,
                "core_ms_per_shower": spread(core_ms),
                "cpu_ms_per_shower": spread([1e3 * c / showers for c in cell.cpu]),
                "gflop_per_shower": run_gflop,
                "gflop_per_shower_as_written": written_gflop,
                "gflop_per_s": achieved,
                "matmul_gflop_per_s": rate,
                "fraction_of_matmul": achieved / rate,
            }
        )
    matmul = [
        {"precision": p, "threads": t, "size": args.matmul, "gflop_per_s": spread(v)}
        for (p, t), v in rates.items()
    ]
    return {"rows": rows, "matmul": matmul, "best": best_rows(rows), "bf16": bf16_support(machine)}


def best_rows(rows: list[dict]) -> list[dict]:
    """Per spec, precision and threads: the plain module and the inference form at its best
    batch (lowest median core-ms), with the gain."""
    groups: dict[tuple, dict] = {}
    for row in rows:
        key = (row["spec"], row["precision"], row["threads"])
        slot = groups.setdefault(key, {})
        held = slot.get(row["form"])
        if (
            held is None
            or row["core_ms_per_shower"]["median"] < held["core_ms_per_shower"]["median"]
        ):
            slot[row["form"]] = row
    best = []
    for (spec, precision, threads), forms in groups.items():
        plain, form = forms["plain"], forms["inference"]
        best.append(
            {
                "spec": spec,
                "precision": precision,
                "threads": threads,
                "batch": form["batch"],
                "core_ms_per_shower": form["core_ms_per_shower"],
                "fraction_of_matmul": form["fraction_of_matmul"],
                "plain_core_ms_per_shower": plain["core_ms_per_shower"],
                "plain_batch": plain["batch"],
                "gain": plain["core_ms_per_shower"]["median"]
                / form["core_ms_per_shower"]["median"],
            }
        )
    return best


def show(record: dict) -> None:
    ms = "{0[median]:.2f} [{0[min]:.2f}, {0[max]:.2f}]".format
    print(f"CPU: {record['machine']['cpu']} ({', '.join(record['machine']['flags'])}), "
          f"{record['machine']['cores']} cores; bf16 on {record['bf16'] or 'none'}")  # fmt: skip
    for m in record["matmul"]:
        print(f"matmul {m['size']}^3 {m['precision']:>7} {m['threads']} thread(s): "
              f"{ms(m['gflop_per_s'])} GFLOP/s")  # fmt: skip
    head = f"{'spec':<30} {'prec':>7} {'thr':>3} {'form':>9} {'batch':>5}"
    print(f"\n{head} {'core-ms/shower':>24} {'cpu-ms':>8} {'GFLOP/s':>8} {'of matmul':>9}")
    for r in record["rows"]:
        print(f"{r['spec']:<30} {r['precision']:>7} {r['threads']:>3} {r['form']:>9} "
              f"{r['batch']:>5} {ms(r['core_ms_per_shower']):>24} "
              f"{r['cpu_ms_per_shower']['median']:>8.2f} {r['gflop_per_s']:>8.1f} "
              f"{r['fraction_of_matmul']:>9.3f}")  # fmt: skip
    print(f"\n{'spec':<30} {'prec':>7} {'thr':>3} {'batch':>5} {'core-ms/shower':>24} "
          f"{'of matmul':>9} {'plain core-ms':>14} {'gain':>6}")  # fmt: skip
    for b in record["best"]:
        print(f"{b['spec']:<30} {b['precision']:>7} {b['threads']:>3} {b['batch']:>5} "
              f"{ms(b['core_ms_per_shower']):>24} {b['fraction_of_matmul']:>9.3f} "
              f"{b['plain_core_ms_per_shower']['median']:>14.2f} {b['gain']:>6.2f}")  # fmt: skip


def parse(argv: list[str] | None) -> argparse.Namespace:
    cores = len(os.sched_getaffinity(0))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, nargs="+", default=[REPO / s for s in SPECS])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--plain-batch", type=int, default=32, help="the plain module's batch")
    parser.add_argument("--threads", type=int, nargs="+", default=sorted({1, cores}))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--matmul", type=int, default=2048, help="size of the timed product")
    parser.add_argument("--matmul-repeats", type=int, default=3, help="best of, per round")
    parser.add_argument("--no-bf16", action="store_true", help="float32 only")
    parser.add_argument("--quick", action="store_true", help="tiny spec, batches 1 and 4, one "
                        "thread, one round: checks that it runs")  # fmt: skip
    parser.add_argument("--out", type=Path, help="write the record here (JSON)")
    args = parser.parse_args(argv)
    if args.quick:
        if "--spec" not in (sys.argv if argv is None else argv):
            args.spec = [REPO / "configs" / "gan3d_tiny.yaml"]
        args.batch, args.plain_batch, args.threads = [1, 4], 4, [1]
        args.rounds, args.matmul, args.matmul_repeats = 1, 512, 1
    args.spec = [p.resolve() for p in args.spec]
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    machine = cpu_record()
    started = datetime.now(UTC)
    record = measure(args, machine)
    record.update(
        machine=machine,
        date=started.strftime("%Y-%m-%d %H:%M UTC"),
        seconds=(datetime.now(UTC) - started).total_seconds(),
        argv=sys.argv[1:] if argv is None else argv,
    )
    show(record)
    if args.out is not None:
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return record


if __name__ == "__main__":
    main()
