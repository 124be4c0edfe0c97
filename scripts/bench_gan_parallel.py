"""Data-parallel 3DGAN benchmark: share of step time spent exchanging gradients, samples/s.

Run it under mpirun; every mode runs the same number of timed steps on in-memory random
showers (no file I/O), after warm-up steps:

    mpirun -n 2 python scripts/bench_gan_parallel.py                       # tiny spec
    mpirun -n 2 python scripts/bench_gan_parallel.py --spec configs/gan3d.yaml --batch 8
    python scripts/bench_gan_parallel.py --modes sync                      # 1-rank baseline

Modes: ``sync`` (blocking MPI all-reduce of both networks' gradients), ``sync-overlap`` (MPI
``Iallreduce`` per bucket started during backward: ``trainer.overlap``), ``sync-gloo`` (a gloo
group, overlapped the same way), ``arar`` (SAGIPS ring of generator gradients, discriminators
local), ``rma`` (the ring through RMA windows). Communication time is the wall clock inside the
exchanges, so in ``sync`` it includes waiting for the slowest rank (in the overlapped modes:
only what the backward pass did not hide);
``compute_spread_ms`` is how much the ranks' compute per step (step minus exchanges) differs
at the same step (standard deviation across ranks, pooled over steps): what makes them wait.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from mpi4py import MPI

from evogan.config.trainer import TrainerConfig
from evogan.distributed import guard, split_layout, world_comm
from evogan.gan3d.model.spec import GanSpec, load_spec
from evogan.gan3d.training.modes import build_parallel_step
from evogan.gan3d.training.setup import RankSetup, share_cores

REPO = Path(__file__).resolve().parents[1]
MODES = {
    "sync": {"mode": "sync", "backend": "mpi"},
    "sync-overlap": {"mode": "sync", "backend": "mpi", "overlap": True},
    "sync-gloo": {"mode": "sync", "backend": "gloo"},
    "arar": {"mode": "arar"},
    "rma": {"mode": "arar", "rma": True},
}


def random_batch(spec: GanSpec, batch: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
    """Sparse positive showers with energies and angles in the data set's ranges."""
    shape = (batch, *spec.output_shape)
    ecal = rng.gamma(0.3, 0.02, size=shape) * (rng.random(shape) < 0.2)
    energy = rng.uniform(10, 200, batch)
    theta = rng.uniform(1.05, 2.1, batch)
    return tuple(torch.from_numpy(a.astype(np.float32)) for a in (ecal, energy, theta))


def bench_mode(
    world: MPI.Comm, spec: GanSpec, name: str, batch: int, steps: int, warmup: int
) -> dict | None:
    """Time ``steps`` training steps in one mode; the figures of all ranks (rank 0 only)."""
    trainer = TrainerConfig(**MODES[name])
    layout = split_layout(world)
    backend = "mpi" if trainer.backend == "auto" else trainer.backend
    parallel = build_parallel_step(spec, trainer, layout, seed=0, rank=RankSetup(backend=backend))
    real, energy, theta = random_batch(spec, batch, np.random.default_rng(world.rank))
    for _ in range(warmup):
        parallel.train_step(real, energy, theta, outer=False)
    world.Barrier()
    comm = work = 0.0
    compute = []
    start = time.perf_counter()
    for index in range(steps):
        figures = parallel.train_step(real, energy, theta, outer=index == steps - 1)
        comm += figures["comm_s"]
        work += figures["step_s"]
        compute.append(figures["step_s"] - figures["comm_s"])
    world.Barrier()
    wall = time.perf_counter() - start
    stats = parallel.close()
    layout.free()
    g_values = sum(p.numel() for p in parallel.step.generator.parameters())
    d_values = sum(p.numel() for p in parallel.step.discriminator.parameters())
    exchanged = g_values * spec.generator_steps + (d_values if trainer.mode == "sync" else 0)
    mine = {
        "comm_s": comm,
        "step_s": work,
        "compute_s": compute,
        "received": stats["generator"]["received"],
    }
    ranks = world.gather(mine, root=0)
    if world.rank != 0:
        return None
    shares = [r["comm_s"] / r["step_s"] for r in ranks]
    per_step = np.array([r["compute_s"] for r in ranks])  # ranks x steps
    spread = float(np.sqrt(per_step.var(axis=0, ddof=1).mean())) if len(ranks) > 1 else 0.0
    return {
        "mode": name,
        "ranks": world.size,
        "batch_per_rank": batch,
        "steps": steps,
        "samples_per_s": world.size * steps * batch / wall,
        "step_ms": 1e3 * float(np.mean([r["step_s"] for r in ranks])) / steps,
        "comm_ms_per_step": 1e3 * float(np.mean([r["comm_s"] for r in ranks])) / steps,
        "compute_spread_ms": 1e3 * spread,
        "comm_share": float(np.mean(shares)),
        "comm_share_max": float(np.max(shares)),
        "mbytes_sent_per_step": 4 * exchanged / 2**20,
        "ring_received": [r["received"] for r in ranks],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "configs/gan3d_tiny.yaml")
    parser.add_argument("--batch", type=int, default=8, help="showers per rank and step")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--modes", default="sync,arar,rma")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    world = world_comm()
    share_cores(world)
    spec = load_spec(args.spec)
    results = []
    for name in args.modes.split(","):
        if name == "rma" and world.size == 1:
            continue
        result = bench_mode(world, spec, name, args.batch, args.steps, args.warmup)
        if result is not None:
            results.append(result)
            print(
                f"{name:12s} {world.size} rank(s) x batch {args.batch}: "
                f"{result['samples_per_s']:7.2f} samples/s, step {result['step_ms']:8.1f} ms, "
                f"comm {result['comm_ms_per_step']:7.2f} ms/step = "
                f"{100 * result['comm_share']:5.2f}% (max {100 * result['comm_share_max']:.2f}%)"
                f", {result['mbytes_sent_per_step']:.2f} MB/step",
                flush=True,
            )
    if world.rank == 0 and args.json is not None:
        record = {"spec": spec.name, "torch_threads": torch.get_num_threads(), "runs": results}
        args.json.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    with guard():
        main()
