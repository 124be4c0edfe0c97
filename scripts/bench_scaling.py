"""Scaling on paper and in simulation: measured per-message costs, a model to 1,024 ranks, and
a check of the model against real evogan runs at a few ranks (docs/explanation/scaling.md).

1. per-message costs (real mpi4py under real ``mpirun``): ping-pong latency/bandwidth from 32 B
   to the 3DGAN generator's gradient size at 2 ranks, fitted to ``alpha + n * beta``; one
   ``Allreduce`` vs size at every rank count of ``--ranks``; a core's copy and float32-sum rate.
2. model (scripts/cost_model.py): island migration, sync all-reduce and ARAR step
   costs and parallel efficiency for P = 2..1024. Point-to-point messages (migration, the ARAR
   ring) use the ping-pong fit; sync's all-reduces use the fit of the measured ``Allreduce``
   times at every P, plus the wait for the slowest rank from the measured spread of the ranks'
   compute per step.
3. check: ``evogan evolve`` islands (as scripts/bench_islands.py, checkpoints off) and
   scripts/bench_gan_parallel.py (sync, arar) at every rank count; the model, given the
   compute time measured at that P, against the measured communication.

Every measurement is repeated ``--rounds`` times, rounds interleaved (round 1 at every P, then
round 2, ...) because the VM's speed drifts over minutes; medians and ranges are reported.

    python scripts/bench_scaling.py --out /tmp/bench_scaling             # ~7 min, 2 cores
    python scripts/bench_scaling.py --out /tmp/bench_scaling --quick     # ~1-2 min
    python scripts/bench_scaling.py --out DIR --from DIR/scaling.json    # re-analyse only

Writes ``DIR/scaling.json`` (all raw figures and the model) and ``DIR/scaling.png``. More
ranks than cores (4 and 8 on a 2-core VM) are oversubscribed: there the check tests the
communication term with the compute time measured at that P, not the machine's scaling.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_model import (  # noqa: E402
    Hockney,
    LocalCosts,
    allreduce_seconds,
    arar_step,
    fit_allreduce,
    fit_hockney,
    migration_generation,
    straggler_wait,
    sync_step,
)

from evogan.distributed.launcher import mpirun_prefix  # noqa: E402

MODEL_RANKS = [2**k for k in range(1, 11)]
FULL_SPEC = REPO / "configs/gan3d.yaml"
TINY_SPEC = REPO / "configs/gan3d_tiny.yaml"
INTERVAL = 10  # the shipped migration interval (bench_islands.BASE)
BUCKET_BYTES = 4 << 20  # trainer.bucket_mb default


# -- the MPI worker: per-message costs (imports mpi4py and numpy only) ----------------------
def _reps(seconds_one: float, target: float) -> int:
    return int(min(10000, max(3, target / max(seconds_one, 1e-9))))


def micro(path: Path, sizes: list[int], target: float, pingpong: bool) -> None:
    """Under mpirun: time ping-pong (ranks 0 and 1), Allreduce at every size, local copy/add."""
    import numpy as np
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank = world.rank
    record: dict[str, Any] = {"ranks": world.size, "sizes": sizes}
    if pingpong and world.size >= 2:
        one_way = []
        for size in sizes:
            buffer = np.zeros(size, np.uint8)

            def exchange(times: int, buffer: np.ndarray = buffer) -> float:
                start = time.perf_counter()
                for _ in range(times):
                    if rank == 0:
                        world.Send(buffer, dest=1, tag=7)
                        world.Recv(buffer, source=1, tag=7)
                    elif rank == 1:
                        world.Recv(buffer, source=0, tag=7)
                        world.Send(buffer, dest=0, tag=7)
                return time.perf_counter() - start

            world.Barrier()
            exchange(5)  # first messages also open the connection
            reps = world.bcast(_reps(exchange(1), target), root=0)
            elapsed = exchange(reps)
            one_way.append(elapsed / reps / 2)
        record["pingpong_s"] = world.bcast(one_way, root=0)
    reduce_s = []
    for size in sizes:
        values = np.ones(max(1, size // 4), np.float32)
        world.Barrier()
        for _ in range(2):
            world.Allreduce(MPI.IN_PLACE, values, op=MPI.SUM)
        start = time.perf_counter()
        world.Allreduce(MPI.IN_PLACE, values, op=MPI.SUM)
        reps = world.bcast(_reps(time.perf_counter() - start, target), root=0)
        world.Barrier()
        start = time.perf_counter()
        for _ in range(reps):
            world.Allreduce(MPI.IN_PLACE, values, op=MPI.SUM)
        reduce_s.append(world.allreduce((time.perf_counter() - start) / reps, op=MPI.MAX))
    record["allreduce_s"] = reduce_s
    if rank == 0:
        big = np.ones(max(sizes) // 4, np.float32)
        other = np.ones_like(big)
        for name, operation in (
            ("copy_s_per_byte", lambda: np.copyto(big, other)),
            ("add_s_per_byte", lambda: np.add(big, other, out=big)),
        ):
            operation()
            start = time.perf_counter()
            operation()
            reps = _reps(time.perf_counter() - start, target)
            start = time.perf_counter()
            for _ in range(reps):
                operation()
            record[name] = (time.perf_counter() - start) / reps / big.nbytes
        path.write_text(json.dumps(record) + "\n")


# -- the driver ------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    return dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )


def _check_call(command: list[str], what: str) -> None:
    result = subprocess.run(command, env=_env(), stdout=subprocess.DEVNULL)
    if result.returncode != 0:
        raise SystemExit(f"bench_scaling: {what} failed (exit {result.returncode}): {command}")


def network_sizes() -> dict[str, dict[str, int]]:
    """Gradient bytes of both networks and generator updates per step, tiny and full spec."""
    from evogan.gan3d.model.networks import build_models
    from evogan.gan3d.model.spec import load_spec

    sizes = {}
    for name, path in (("tiny", TINY_SPEC), ("full", FULL_SPEC)):
        spec = load_spec(path)
        generator, discriminator = build_models(spec)
        sizes[name] = {
            "generator_bytes": 4 * sum(p.numel() for p in generator.parameters()),
            "discriminator_bytes": 4 * sum(p.numel() for p in discriminator.parameters()),
            "generator_steps": spec.generator_steps,
        }
    return sizes


def message_sizes(largest: int, quick: bool) -> list[int]:
    """32 B up to ``largest`` bytes, x4 apart (x16 quick), ``largest`` itself included."""
    factor = 16 if quick else 4
    sizes, size = [], 32
    while size < largest:
        sizes.append(size)
        size *= factor
    return [*sizes, largest]


def pickle_overhead() -> int:
    """Bytes a pickled one-migrant message adds to the migrant's own lineage bytes."""
    import pickle

    from evogan.islands.codec import Migrant

    return len(pickle.dumps([Migrant(0.0, b"", None, (0, 0))], pickle.HIGHEST_PROTOCOL))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every raw figure: micro-benchmarks and (unless ``--no-check``) the real runs."""
    import mpi4py

    mpi4py.rc.initialize = False  # evogan.islands imports MPI: this launcher must not start it
    mpi4py.rc.finalize = False
    import bench_islands

    networks = network_sizes()
    sizes = message_sizes(networks["full"]["generator_bytes"], args.quick)
    target = 0.01 if args.quick else 0.05
    generations = 140 if args.quick else 420
    epochs = max(3, generations // (1000 // 128))
    island_overrides = {
        "ga.epochs": epochs,
        "ga.schedule_milestones": [epochs // 3, 2 * epochs // 3],
        "checkpoint.every": 0,
        "migration.every": INTERVAL,
    }
    steps = 4 if args.quick else 10
    raw: dict[str, Any] = {
        "argv": sys.argv,
        "cores": os.cpu_count(),
        "ranks": args.ranks,
        "networks": networks,
        "pickle_overhead_bytes": pickle_overhead(),
        "migration_interval": INTERVAL,
        "bucket_bytes": BUCKET_BYTES,
        "gan_steps": steps,
        "rounds": [],
    }
    started = time.perf_counter()
    for round_ in range(args.rounds):
        entry: dict[str, Any] = {"micro": {}, "islands": {}, "gan": {}}
        for ranks in args.ranks:
            path = args.out / f"micro_{ranks}_{round_}.json"
            command = [
                *mpirun_prefix(ranks),
                sys.executable,
                __file__,
                "--micro",
                str(path),
                "--sizes",
                ",".join(map(str, sizes)),
                "--target-s",
                str(target),
                *(["--pingpong"] if ranks == 2 else []),
            ]
            print(
                f"bench_scaling: round {round_ + 1}: per-message costs, {ranks} ranks", flush=True
            )
            _check_call(command, f"the {ranks}-rank micro-benchmark")
            entry["micro"][str(ranks)] = json.loads(path.read_text())
        if not args.no_check:
            for ranks in args.ranks:
                summary = bench_islands.run(
                    args.out, f"islands_{ranks}ranks_{round_}", ranks, island_overrides
                )
                entry["islands"][str(ranks)] = {
                    key: summary[key]
                    for key in (
                        "generations",
                        "island_seconds",
                        "island_seconds_share",
                        "island_cpu_seconds_share",
                        "bytes_per_migrant",
                        "migrations_sent",
                        "per_island",
                    )
                }
                path = args.out / f"gan_{ranks}_{round_}.json"
                command = [
                    *mpirun_prefix(ranks),
                    sys.executable,
                    str(REPO / "scripts/bench_gan_parallel.py"),
                    "--steps",
                    str(steps),
                    "--modes",
                    "sync,arar",
                    "--json",
                    str(path),
                ]
                print(f"bench_scaling: round {round_ + 1}: 3DGAN tiny, {ranks} ranks", flush=True)
                _check_call(command, f"the {ranks}-rank data-parallel benchmark")
                entry["gan"][str(ranks)] = json.loads(path.read_text())
        raw["rounds"].append(entry)
    raw["seconds"] = time.perf_counter() - started
    return raw


# -- analysis ----------------------------------------------------------------------------------
def spread(values: list[float]) -> dict[str, float]:
    """Median and range of per-round values."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _median(values: list[float]) -> float:
    return statistics.median(values)


def link_costs(raw: dict[str, Any]) -> tuple[Hockney, LocalCosts, dict[str, Any]]:
    """Per-round Hockney fits of the 2-rank ping-pong, and their medians."""
    fits, residuals, copies, adds = [], [], [], []
    for entry in raw["rounds"]:
        two = entry["micro"].get("2")
        if two is None or "pingpong_s" not in two:
            raise SystemExit("bench_scaling: the data has no 2-rank ping-pong; --ranks must hold 2")
        fit, residual = fit_hockney(two["sizes"], two["pingpong_s"])
        fits.append(fit)
        residuals.append(residual)
        copies.append(two["copy_s_per_byte"])
        adds.append(two["add_s_per_byte"])
    link = Hockney(_median([f.alpha for f in fits]), _median([f.beta for f in fits]))
    local = LocalCosts(_median(copies), _median(adds))
    report = {
        "alpha_s": spread([f.alpha for f in fits]),
        "beta_s_per_byte": spread([f.beta for f in fits]),
        "bandwidth_GB_s": spread([1e-9 / f.beta if f.beta else math.inf for f in fits]),
        "max_relative_residual": spread(residuals),
        "copy_s_per_byte": spread(copies),
        "add_s_per_byte": spread(adds),
    }
    return link, local, report


def collective_costs(raw: dict[str, Any], local: LocalCosts) -> tuple[Hockney, dict[str, Any]]:
    """Per-round fits of every measured ``Allreduce`` (all P, all sizes) to the algorithmic
    form of :func:`fit_allreduce`, and their medians."""
    fits, residuals = [], []
    for entry in raw["rounds"]:
        points = [
            (int(ranks), size, seconds)
            for ranks, micro in entry["micro"].items()
            for size, seconds in zip(micro["sizes"], micro["allreduce_s"], strict=True)
        ]
        fit, residual = fit_allreduce(points, local)
        fits.append(fit)
        residuals.append(residual)
    collective = Hockney(_median([f.alpha for f in fits]), _median([f.beta for f in fits]))
    report = {
        "alpha_s": spread([f.alpha for f in fits]),
        "bandwidth_GB_s": spread([1e-9 / f.beta if f.beta else math.inf for f in fits]),
        "max_relative_residual": spread(residuals),
    }
    return collective, report


def pingpong_check(raw: dict[str, Any], link: Hockney) -> list[dict[str, Any]]:
    """Measured one-way time per size (median over rounds) against the fitted line."""
    micros = [entry["micro"]["2"] for entry in raw["rounds"]]
    rows = []
    for index, size in enumerate(micros[0]["sizes"]):
        measured = [m["pingpong_s"][index] for m in micros]
        fit = link.seconds(size)
        rows.append(
            {
                "bytes": size,
                "measured_s": spread(measured),
                "fit_s": fit,
                "ratio": _median(measured) / fit,
            }
        )
    return rows


def allreduce_check(
    raw: dict[str, Any], link: Hockney, local: LocalCosts, collective: Hockney
) -> list[dict]:
    """Measured Allreduce (median over rounds) against each algorithm's prediction from the
    ping-pong line, and against the all-reduce fit (``fitted``)."""
    rows = []
    for ranks in raw["ranks"]:
        micros = [entry["micro"][str(ranks)] for entry in raw["rounds"]]
        for index, size in enumerate(micros[0]["sizes"]):
            measured = [m["allreduce_s"][index] for m in micros]
            row: dict[str, Any] = {"ranks": ranks, "bytes": size, "measured_s": spread(measured)}
            for algorithm in ("auto", "recursive_doubling", "ring", "rabenseifner"):
                predicted = allreduce_seconds(size, ranks, link, local, algorithm)
                row[f"{algorithm}_s"] = predicted
                row[f"{algorithm}_ratio"] = _median(measured) / predicted
            fitted = allreduce_seconds(size, ranks, collective, local, "rabenseifner")
            row["fitted_s"] = fitted
            row["fitted_ratio"] = _median(measured) / fitted
            rows.append(row)
    return rows


def migration_check(raw: dict[str, Any], link: Hockney, local: LocalCosts) -> dict[str, Any]:
    """Calibrate the Python cost per migration at 2 ranks; predict the share at every P."""
    overhead = raw["pickle_overhead_bytes"]
    interval = raw["migration_interval"]

    def figures(summary: dict[str, Any]) -> tuple[float, float, int]:
        generation = max(r["train_seconds"] / r["generations"] for r in summary["per_island"])
        sent = summary["bytes_per_migrant"]["sent"] or 0.0
        return generation, summary["island_seconds_share"], round(sent) + overhead

    base = [figures(entry["islands"]["2"]) for entry in raw["rounds"]]
    migrant_bytes = int(_median([b for _, _, b in base]))
    software = _median(
        [
            max(
                0.0,
                (
                    share * gen
                    - migration_generation(gen, interval, migrant_bytes, 2, link, local, 0.0).comm
                )
                * interval,
            )
            for gen, share, _ in base
        ]
    )
    rows = []
    for ranks in raw["ranks"]:
        measured, predicted, generation_s = [], [], []
        for entry in raw["rounds"]:
            generation, share, _ = figures(entry["islands"][str(ranks)])
            cost = migration_generation(
                generation, interval, migrant_bytes, ranks, link, local, software
            )
            measured.append(share)
            predicted.append(cost.share)
            generation_s.append(generation)
        rows.append(
            {
                "ranks": ranks,
                "generation_s": spread(generation_s),
                "measured_share": spread(measured),
                "predicted_share": spread(predicted),
                "ratio": _median(measured) / _median(predicted),
                "measured_efficiency": 1 / (1 + _median(measured)),
                "predicted_efficiency": 1 / (1 + _median(predicted)),
            }
        )
    return {
        "migrant_message_bytes": migrant_bytes,
        "software_s_per_migration": software,
        "generation_s_2ranks": _median([g for g, _, _ in base]),
        "interval": interval,
        "rows": rows,
    }


@dataclass(frozen=True)
class Costs:
    """What the 3DGAN model is given: the ping-pong line (ring messages), the all-reduce fit
    (sync), a core's local rates, sync's bucket size and ARAR's Python work per update."""

    link: Hockney
    collective: Hockney
    local: LocalCosts
    bucket_bytes: int
    arar_software_s: float = 0.0


def gan_check(raw: dict[str, Any], costs: Costs) -> dict[str, Any]:
    """Predicted communication per step (with the compute and its spread across ranks measured
    at that P) vs measured. ARAR's Python work per update is calibrated at 2 ranks (as
    migration's), so its 2-rank ratio is 1 by construction. ``pingpong_comm_s`` is the model
    with neither: the ping-pong line for everything, no straggler wait."""
    net = raw["networks"]["tiny"]
    bare = replace(costs, collective=costs.link, arar_software_s=0.0)
    runs = {
        (ranks, mode): [
            next(r for r in entry["gan"][str(ranks)]["runs"] if r["mode"] == mode)
            for entry in raw["rounds"]
        ]
        for ranks in raw["ranks"]
        for mode in ("sync", "arar")
    }

    def compute_of(run: dict[str, Any]) -> float:
        return (run["step_ms"] - run["comm_ms_per_step"]) / 1e3

    software = _median(
        [
            max(
                0.0,
                run["comm_ms_per_step"] / 1e3 - _gan_cost("arar", compute_of(run), net, 2, bare),
            )
            / net["generator_steps"]
            for run in runs[(2, "arar")]
        ]
    )
    costs = replace(costs, arar_software_s=software)
    rows = []
    for (ranks, mode), found in runs.items():
        compute = [compute_of(run) for run in found]
        spreads = [run["compute_spread_ms"] / 1e3 for run in found]
        measured = [run["comm_ms_per_step"] / 1e3 for run in found]
        predicted = [
            _gan_cost(mode, c, net, ranks, costs, spread_s)
            for c, spread_s in zip(compute, spreads, strict=True)
        ]
        barriers = 1 + net["generator_steps"]
        wait = [straggler_wait(s, ranks, barriers) if mode == "sync" else 0.0 for s in spreads]
        compute_s = _median(compute)
        rows.append(
            {
                "mode": mode,
                "ranks": ranks,
                "compute_s": spread(compute),
                "compute_spread_s": spread(spreads),
                "measured_comm_s": spread(measured),
                "predicted_comm_s": spread(predicted),
                "predicted_wait_s": spread(wait),
                "pingpong_comm_s": spread([_gan_cost(mode, c, net, ranks, bare) for c in compute]),
                "ratio": _median(measured) / _median(predicted),
                "measured_efficiency": compute_s / (compute_s + _median(measured)),
                "predicted_efficiency": compute_s / (compute_s + _median(predicted)),
            }
        )
    return {"arar_software_s_per_update": software, "rows": rows}


def _gan_cost(
    mode: str,
    compute_s: float,
    net: dict[str, int],
    ranks: int,
    costs: Costs,
    spread_s: float = 0.0,
    agreement: bool = False,
    outer: float = 0.0,
) -> float:
    """Communication seconds per step. bench_gan_parallel times the exchanges only: no stop
    round unless ``agreement``. Sync waits for stragglers by ``spread_s``."""
    link, local = costs.link, costs.local
    if mode == "sync":
        return sync_step(
            compute_s,
            net["generator_bytes"],
            net["discriminator_bytes"],
            net["generator_steps"],
            ranks,
            costs.collective,
            local,
            costs.bucket_bytes,
            agreement=agreement,
            algorithm="rabenseifner",
            compute_spread_s=spread_s,
        ).comm
    comm = arar_step(
        compute_s,
        net["generator_bytes"],
        net["generator_steps"],
        ranks,
        link,
        local,
        outer,
        costs.arar_software_s,
    ).comm
    if not agreement and ranks > 1:
        comm -= allreduce_seconds(24, ranks, link, local, "recursive_doubling")
    return comm


def curves(
    raw: dict[str, Any],
    costs: Costs,
    migration: dict[str, Any] | None,
    gan: dict[str, Any] | None,
    full_step_s: float | None,
    relative: dict[str, float],
) -> dict[str, list[float]]:
    """Predicted efficiency at P = 2..1024 (stop rounds included, as in a real run). The
    straggler wait uses the ranks' compute spread relative to the compute, pooled over the
    rank counts measured with a core per rank (``relative``, from :func:`relative_spread`;
    the 51x51x25 curves assume the tiny spec's relative spread)."""
    link, local = costs.link, costs.local
    out: dict[str, list[float]] = {"ranks": MODEL_RANKS}
    if migration is not None:
        for topology in ("ring", "full"):
            out[f"migration_{topology}"] = [
                migration_generation(
                    migration["generation_s_2ranks"],
                    migration["interval"],
                    migration["migrant_message_bytes"],
                    p,
                    link,
                    local,
                    migration["software_s_per_migration"],
                    topology,
                ).efficiency
                for p in MODEL_RANKS
            ]
    workloads = []
    if gan is not None:
        costs = replace(costs, arar_software_s=gan["arar_software_s_per_update"])
        two = {row["mode"]: row for row in gan["rows"] if row["ranks"] == 2}
        workloads += [("tiny", mode, two[mode]["compute_s"]["median"]) for mode in relative]
    if full_step_s is not None:
        workloads += [("full", mode, full_step_s) for mode in ("sync", "arar")]
    for spec, mode, compute_s in workloads:
        net = raw["networks"][spec]
        spread_s = relative[mode] * compute_s
        out[f"{mode}_{spec}"] = [
            compute_s / (compute_s + _gan_cost(mode, compute_s, net, p, costs, spread_s, True, 1.0))
            for p in MODEL_RANKS
        ]
    return out


def relative_spread(rows: list[dict[str, Any]], mode: str, cores: int | None) -> float:
    """The ranks' compute spread over the compute, pooled over the rank counts that had a core
    per rank (oversubscription adds the scheduler's noise), weighted by the degrees of freedom
    of each per-step spread (P - 1): a 2-rank spread alone rests on one difference per step."""
    rows = [row for row in rows if row["mode"] == mode]
    fair = [row for row in rows if row["ranks"] <= (cores or 0)] or [
        row for row in rows if row["ranks"] == 2
    ]
    weights = [row["ranks"] - 1 for row in fair]
    squares = [
        (row["compute_spread_s"]["median"] / row["compute_s"]["median"]) ** 2 for row in fair
    ]
    return math.sqrt(sum(w * q for w, q in zip(weights, squares, strict=True)) / sum(weights))


def analyse(raw: dict[str, Any], full_step_s: float | None) -> dict[str, Any]:
    link, local, link_report = link_costs(raw)
    collective, collective_report = collective_costs(raw, local)
    costs = Costs(link, collective, local, raw["bucket_bytes"])
    checked = all(entry["islands"] and entry["gan"] for entry in raw["rounds"])
    migration = migration_check(raw, link, local) if checked else None
    gan = gan_check(raw, costs) if checked else None
    relative = {
        mode: relative_spread(gan["rows"], mode, raw["cores"]) if gan else 0.0
        for mode in ("sync", "arar")
    }
    return {
        "link": link_report,
        "collective": collective_report,
        "pingpong": pingpong_check(raw, link),
        "allreduce": allreduce_check(raw, link, local, collective),
        "migration": migration,
        "gan": gan,
        "full_step_s": full_step_s,
        "relative_spread": relative,
        "model": curves(raw, costs, migration, gan, full_step_s, relative),
    }


# -- output ------------------------------------------------------------------------------------
def _range(s: dict[str, float], scale: float = 1.0, fmt: str = ".3g") -> str:
    return f"{scale * s['median']:{fmt}} ({scale * s['min']:{fmt}}-{scale * s['max']:{fmt}})"


def print_tables(raw: dict[str, Any], result: dict[str, Any]) -> None:
    link = result["link"]
    rounds = len(raw["rounds"])
    print(f"\nper-message costs, 2 ranks, median (range) of {rounds} round(s)")
    print(f"  alpha (latency)         {_range(link['alpha_s'], 1e6)} us")
    print(f"  1/beta (bandwidth)      {_range(link['bandwidth_GB_s'])} GB/s")
    print(f"  fit's largest residual  {_range(link['max_relative_residual'], 100, '.0f')} %")
    for name in ("copy", "add"):
        rates = {k: 1e-9 / v for k, v in link[f"{name}_s_per_byte"].items()}
        rates["min"], rates["max"] = rates["max"], rates["min"]
        print(f"  local {name:17s} {_range(rates)} GB/s (one core, float32)")
    print("\nping-pong, one way (median over rounds) vs the fit alpha + n beta")
    print("bytes | measured us | fit us | measured/fit")
    for row in result["pingpong"]:
        print(
            f"{row['bytes']:9d} | {_range(row['measured_s'], 1e6)} | {1e6 * row['fit_s']:.3g}"
            f" | {row['ratio']:.2f}"
        )
    cores = raw["cores"] or 0
    collective = result["collective"]
    print(
        f"\nAllreduce fit (all P, all sizes): alpha {_range(collective['alpha_s'], 1e6)} us, "
        f"1/beta {_range(collective['bandwidth_GB_s'])} GB/s, largest residual "
        f"{_range(collective['max_relative_residual'], 100, '.0f')} %"
    )
    print("Allreduce, measured / model (ping-pong line: auto = cheapest algorithm; the fit)")
    print("ranks | bytes | measured us | auto | rec. doubling | ring | rabenseifner | fitted")
    for row in result["allreduce"]:
        print(
            f"{row['ranks']:5d} | {row['bytes']:9d} | {_range(row['measured_s'], 1e6)} | "
            f"{row['auto_ratio']:.2f} | {row['recursive_doubling_ratio']:.2f} | "
            f"{row['ring_ratio']:.2f} | {row['rabenseifner_ratio']:.2f} | "
            f"{row['fitted_ratio']:.2f}"
        )
    if result["migration"] is not None:
        m = result["migration"]
        print(
            f"\nisland migration (ring, every {m['interval']} generations, "
            f"{m['migrant_message_bytes']} B/message); Python cost per migration calibrated "
            f"at 2 ranks: {1e3 * m['software_s_per_migration']:.2f} ms"
        )
        print("ranks | generation ms | measured share % | predicted share % | measured/predicted")
        for row in m["rows"]:
            flag = " (oversubscribed)" if row["ranks"] > cores else ""
            print(
                f"{row['ranks']:5d}{flag} | {_range(row['generation_s'], 1e3)} | "
                f"{_range(row['measured_share'], 100)} | {_range(row['predicted_share'], 100)}"
                f" | {row['ratio']:.2f}"
            )
    if result["gan"] is not None:
        print(
            "\n3DGAN tiny spec, communication per step (model given the compute and its spread "
            "across ranks at that P; wait: the straggler term; ping-pong: the model with neither "
            "it nor the all-reduce fit nor ARAR's calibrated Python cost per update, "
            f"{1e3 * result['gan']['arar_software_s_per_update']:.3f} ms)"
        )
        print(
            "mode | ranks | compute ms | spread ms | measured comm ms | predicted comm ms | "
            "of which wait | ping-pong model | ratio | eff m/p"
        )
        for row in result["gan"]["rows"]:
            flag = " (oversubscribed)" if row["ranks"] > cores else ""
            print(
                f"{row['mode']} | {row['ranks']}{flag} | {_range(row['compute_s'], 1e3)} | "
                f"{_range(row['compute_spread_s'], 1e3)} | "
                f"{_range(row['measured_comm_s'], 1e3)} | {_range(row['predicted_comm_s'], 1e3)}"
                f" | {_range(row['predicted_wait_s'], 1e3)} | "
                f"{_range(row['pingpong_comm_s'], 1e3)} | {row['ratio']:.2f} | "
                f"{100 * row['measured_efficiency']:.1f}% / "
                f"{100 * row['predicted_efficiency']:.1f}%"
            )
    model = result["model"]
    names = [k for k in model if k != "ranks"]
    if not names:
        print("\nno compute time to model against: run the check or give --full-step-s")
        return
    if result["gan"] is None:
        print("\nno 3DGAN runs to measure the ranks' spread: the curves have no straggler term")
    else:
        fair = ", ".join(f"{m} {100 * v:.1f}%" for m, v in result["relative_spread"].items())
        print(
            "\nthe curves' straggler term: the ranks' compute spread over the compute, pooled "
            f"over the rank counts with a core per rank: {fair}"
        )
    print("\npredicted parallel efficiency (%), P = " + ", ".join(map(str, model["ranks"])))
    for name in names:
        print(f"  {name:16s} " + " ".join(f"{100 * v:5.1f}" for v in model[name]))


LABELS = {
    "migration_ring": ("island migration, ring (shipped)", "C0", "-"),
    "migration_full": ("island migration, full topology", "C0", ":"),
    "sync_tiny": ("sync all-reduce, tiny spec", "C1", "-"),
    "arar_tiny": ("ARAR, tiny spec", "C2", "-"),
    "sync_full": ("sync all-reduce, 51x51x25 spec", "C1", "--"),
    "arar_full": ("ARAR, 51x51x25 spec", "C2", "--"),
}


def plot(path: Path, result: dict[str, Any]) -> None:
    """Predicted efficiency vs P, the measured points overlaid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = result["model"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for key, values in model.items():
        if key == "ranks":
            continue
        label, color, style = LABELS[key]
        ax.plot(model["ranks"], [100 * v for v in values], style, color=color, label=label)
    measured = []
    if result["migration"] is not None:
        measured.append(("migration measured", "C0", "o", result["migration"]["rows"]))
    if result["gan"] is not None:
        for mode, color in (("sync", "C1"), ("arar", "C2")):
            rows = [r for r in result["gan"]["rows"] if r["mode"] == mode]
            measured.append((f"{mode} measured (tiny)", color, "s", rows))
    for label, color, marker, rows in measured:
        ax.plot(
            [r["ranks"] for r in rows],
            [100 * r["measured_efficiency"] for r in rows],
            marker,
            color=color,
            label=label,
            linestyle="none",
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(MODEL_RANKS, [str(p) for p in MODEL_RANKS])
    ax.set_xlabel("ranks P (one rank per core)")
    ax.set_ylabel("parallel efficiency = compute / (compute + communication) [%]")
    ax.axvspan(64, 1024, color="0.93", zorder=0)
    ax.set_title("Predicted from measured per-message costs; points measured here")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="directory for JSON, figure and run logs")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3; quick 1)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes, steps, generations")
    parser.add_argument("--ranks", help="rank counts, comma-separated (default 2,4,8; quick 2,4)")
    parser.add_argument("--no-check", action="store_true", help="per-message costs only")
    parser.add_argument(
        "--full-step-s",
        type=float,
        help="compute seconds per step of the 51x51x25 spec, for its sync/arar curves",
    )
    parser.add_argument("--from", dest="source", type=Path, help="re-analyse this scaling.json")
    parser.add_argument("--micro", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", help=argparse.SUPPRESS)
    parser.add_argument("--target-s", type=float, default=0.05, help=argparse.SUPPRESS)
    parser.add_argument("--pingpong", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.micro is not None:
        return args
    if "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ:
        parser.error("run it without mpirun: it launches its own mpirun for every rank count")
    if args.out is None:
        parser.error("--out DIR is required")
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.full_step_s is not None and args.full_step_s <= 0:
        parser.error(f"--full-step-s must be positive seconds, got {args.full_step_s}")
    text = args.ranks or ("2,4" if args.quick else "2,4,8")
    try:
        args.ranks = sorted({int(r) for r in text.split(",")})
    except ValueError:
        parser.error(f"--ranks must be comma-separated integers, got {text!r}")
    if args.ranks[0] < 2 or 2 not in args.ranks:
        parser.error(f"--ranks must include 2 and hold only counts >= 2, got {text!r}")
    if args.source is not None and not args.source.is_file():
        parser.error(f"--from {args.source}: no such file")
    return args


def main() -> None:
    args = parse_args()
    if args.micro is not None:
        micro(args.micro, [int(s) for s in args.sizes.split(",")], args.target_s, args.pingpong)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    raw = json.loads(args.source.read_text())["raw"] if args.source else measure(args)
    result = analyse(raw, args.full_step_s)
    (args.out / "scaling.json").write_text(
        json.dumps({"raw": raw, "result": result}, indent=1) + "\n"
    )
    plot(args.out / "scaling.png", result)
    print_tables(raw, result)
    print(f"\nbench_scaling: {args.out / 'scaling.json'}, {args.out / 'scaling.png'}")


if __name__ == "__main__":
    main()
