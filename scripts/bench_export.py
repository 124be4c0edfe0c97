"""CPU cost of a generated shower: the torch generator as ``evogan generate`` runs it against
ONNX Runtime on the graph ``evogan export --format onnx`` writes, in float32, as core-ms per
shower (wall time x threads / showers; the process's CPU time per shower beside it).

    python scripts/bench_export.py                                  # configs/gan3d.yaml
    python scripts/bench_export.py --spec configs/gan3d.yaml configs/gan3d_small.yaml \\
        configs/gan3d_cc2_small.yaml --batch 1 16 128 --threads 1 --repeats 5 --out b.json
    python scripts/bench_export.py --spec configs/gan3d_tiny.yaml --batch 2 --repeats 1  # check

Each spec's generator is built at its random initialisation (the cost does not depend on the
weights' values) and exported with :func:`evogan.gan3d.model.onnx_file.export_onnx`; ONNX
Runtime's output is first checked against torch's on the same inputs. Both sides include their
random draws: torch runs :func:`evogan.gan3d.model.generate.generate_showers` (draws, generator
in eval mode, cell transform), ONNX Runtime draws the standard normal inputs with numpy and
runs the file's graph (which also converts units and lays out the detector file's array). The
threads are torch's intra-op threads and ONNX Runtime's ``intra_op_num_threads`` (sequential
execution, one inter-op thread). Each time is the best of ``--repeats`` after one warm-up call.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from evogan.gan3d.model.generate import generate_showers
from evogan.gan3d.model.networks import Generator
from evogan.gan3d.model.onnx_file import export_onnx
from evogan.gan3d.model.shower_graph import ShowerGraph, file_form, graph_inputs
from evogan.gan3d.model.spec import GanSpec, load_spec

REPO = Path(__file__).resolve().parents[1]
RTOL, ATOL = 1e-4, 1e-5  # tests/test_export.py's tolerance (ATOL x the largest cell)


def best_seconds(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    """The fastest of ``repeats`` calls of ``run`` after one warm-up call: wall seconds, and
    the process's CPU seconds (less inflated than wall time where other processes share the
    cores) of the call with the least."""
    run()
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeats):
        start, used = time.perf_counter(), time.process_time()
        run()
        cpu = min(cpu, time.process_time() - used)
        wall = min(wall, time.perf_counter() - start)
    return wall, cpu


def feed(spec: GanSpec, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The graph's inputs for ``n`` showers: standard normal draws, 10-200 GeV (in the file's
    unit) and 60-120 degrees."""
    unit = np.float32(1.0 / file_form(spec).to_gev)
    inputs = {}
    for entry in graph_inputs(spec):
        if entry.name == "energy":
            inputs["energy"] = rng.uniform(10.0, 200.0, n).astype(np.float32) * unit
        elif entry.name == "theta":
            inputs["theta"] = rng.uniform(np.pi / 3, 2 * np.pi / 3, n).astype(np.float32)
        else:
            shape = [n if size == "N" else size for size in entry.shape]
            inputs[entry.name] = rng.standard_normal(shape, dtype=np.float32)
    return inputs


def session(path: Path, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def agreement(spec: GanSpec, generator: Generator, runner) -> float:
    """Largest |ONNX Runtime - torch| over a batch of 4, relative to the largest cell; refuses
    a difference beyond the tests' tolerance."""
    inputs = feed(spec, 4, np.random.default_rng(1))
    with torch.no_grad():
        expected = ShowerGraph(spec, generator)(*map(torch.from_numpy, inputs.values())).numpy()
    got = runner.run(["showers"], inputs)[0]
    scale = float(np.abs(expected).max()) or 1.0
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL * scale)
    return float(np.abs(got - expected).max()) / scale


def engine_seconds(
    spec: GanSpec, generator: Generator, runner, batch: int, repeats: int
) -> list[tuple[str, tuple[float, float]]]:
    """Seconds per batch of ``batch`` showers (wall, CPU): torch as ``evogan generate`` runs
    it (its inference form), and ONNX Runtime, each with its random draws."""
    rng = np.random.default_rng(2)
    energy = rng.uniform(10.0, 200.0, batch).astype(np.float32)
    theta = rng.uniform(np.pi / 3, 2 * np.pi / 3, batch).astype(np.float32)
    angle = theta if spec.conditioning.angle else None
    noise = torch.Generator().manual_seed(3)

    def with_torch() -> None:
        generate_showers(spec, generator, energy, angle, noise, batch)

    def with_onnxruntime() -> None:
        runner.run(["showers"], feed(spec, batch, rng))

    return [
        ("torch", best_seconds(with_torch, repeats)),
        ("onnxruntime", best_seconds(with_onnxruntime, repeats)),
    ]


def bench_spec(path: Path, batches: list[int], threads: int, repeats: int) -> list[dict]:
    """Rows of core-ms per shower for torch and ONNX Runtime at every batch size."""
    spec = load_spec(path)
    generator = Generator(spec, torch.Generator().manual_seed(0)).eval()
    with tempfile.TemporaryDirectory() as folder:
        onnx_file = export_onnx(spec, generator, Path(folder) / "g.onnx", {"model": "bench"})
        runner = session(onnx_file, threads)
        difference = agreement(spec, generator, runner)
        rows = []
        name = str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
        for batch in batches:
            for engine, (seconds, cpu) in engine_seconds(spec, generator, runner, batch, repeats):
                rows.append(
                    {
                        "spec": name,
                        "detector": spec.detector,
                        "engine": engine,
                        "precision": "float32",
                        "batch": batch,
                        "threads": threads,
                        "core_ms_per_shower": 1e3 * seconds * threads / batch,
                        "cpu_ms_per_shower": 1e3 * cpu / batch,
                        "onnx_max_difference": difference,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, nargs="+", default=[REPO / "configs" / "gan3d.yaml"])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--threads", type=int, default=1, help="threads of both engines")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls (best kept)")
    parser.add_argument("--out", type=Path, help="also write the rows here (JSON)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [
        row
        for spec in args.spec
        for row in bench_spec(spec.resolve(), args.batch, args.threads, args.repeats)
    ]
    head = f"{'spec':<34} {'engine':<12} {'batch':>5} {'threads':>7}"
    print(f"{head} {'core-ms/shower':>15} {'cpu-ms/shower':>14}")
    for row in rows:
        print(
            f"{row['spec']:<34} {row['engine']:<12} {row['batch']:>5} {row['threads']:>7} "
            f"{row['core_ms_per_shower']:>15.3f} {row['cpu_ms_per_shower']:>14.3f}"
        )
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
