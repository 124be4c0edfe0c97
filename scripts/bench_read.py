"""Streaming read rate of ShowerDataset.iter_chunks against a plain bulk h5py read.

    python scripts/bench_read.py                       # 3000 synthetic events, gzip-1 (writer)
    python scripts/bench_read.py --contiguous          # also an uncompressed contiguous copy
    python scripts/bench_read.py --file EleEscan_1.h5  # any shower file
    python scripts/bench_read.py --calochallenge 100000  # a dataset-2-size CaloChallenge file

Target: streaming reaches at least 0.8 of the bulk rate ``f["ECAL"][:]`` (``f["showers"][:]``
for a CaloChallenge file) on the same file in the same run, although it also converts to GeV,
applies the cell threshold, checks every cell for NaN/inf and (CaloChallenge) turns each row
of voxels into the (radial, angular, layer) grid. ``read`` is ``ShowerDataset.read()``, the
whole file into one array as the bulk read does. The runs alternate round by round; the
median and range of ``--repeats`` rounds are printed, and the ratio of the medians is judged;
on a shared machine the CPU-time ratio (one thread does all the work in both) is the steadier
one.

``--calochallenge N`` writes N showers of dataset-2 geometry (6,480 voxels) through evogan's
writer (gzip-1, 10 rows a chunk) into a temporary file that is removed afterwards; the cells
are smooth exponential profiles in radius and depth with multiplicative gamma noise, zero
below 1 keV (the file compresses 1.3x: gzip works about as hard as on real showers).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

from evogan.data.reader import ShowerDataset, open_file  # noqa: E402

TARGET = 0.8


def rounds(repeats: int, runs: dict[str, Callable[[], int]]) -> dict[str, np.ndarray]:
    """(wall, cpu) seconds per round and run, shape (repeats, 2); runs alternate within each
    round so load drifts hit all alike."""
    times = {name: np.zeros((repeats, 2)) for name in runs}
    for i in range(repeats):
        for name, run in runs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            times[name][i] = time.perf_counter() - wall, time.process_time() - cpu
    return times


def bench(path: Path, chunk_events: int, repeats: int) -> float:
    """Print the rates of both reads and return the ratio of the median wall times."""
    source = open_file(path)
    data = ShowerDataset.from_files([source], chunk_events=chunk_events)
    events = len(data)

    def bulk() -> int:
        with h5py.File(path, "r") as f:
            return len(f[source.layout.ecal_key][:])

    def stream() -> int:
        return sum(len(chunk) for chunk in data.iter_chunks())

    def whole() -> int:
        return len(data.read())

    assert bulk() == stream() == whole() == events
    times = rounds(repeats, {"bulk h5py": bulk, "iter_chunks": stream, "read": whole})
    mb = events * 4 * int(np.prod(source.shape)) / 1e6
    with h5py.File(path, "r") as f:
        ecal = f[source.layout.ecal_key]
        storage = f"chunks {ecal.chunks}, {ecal.compression or 'uncompressed'}"
    print(f"\n{path.name}: {events} events, {mb:.0f} MB of float32 cells, {storage}")
    print(f"{'read':<14}{'median wall s (range)':>24}{'cpu s':>8}{'showers/s':>11}{'MB/s':>8}")
    for name, t in times.items():
        wall, cpu = np.median(t, axis=0)
        spread = f"{wall:.3f} ({t[:, 0].min():.3f}-{t[:, 0].max():.3f})"
        print(f"{name:<14}{spread:>24}{cpu:>8.3f}{events / wall:>11.0f}{mb / wall:>8.0f}")
    bulk_t = times["bulk h5py"]
    for name in ("iter_chunks", "read"):
        wall_ratio, cpu_ratio = np.median(bulk_t, axis=0) / np.median(times[name], axis=0)
        per_round = bulk_t[:, 0] / times[name][:, 0]
        verdict = "meets" if max(wall_ratio, cpu_ratio) >= TARGET else "MISSES"
        print(
            f"{name} / bulk rate: {wall_ratio:.2f} (wall, rounds {per_round.min():.2f}-"
            f"{per_round.max():.2f}), {cpu_ratio:.2f} (cpu); {verdict} the {TARGET} target "
            f"(chunk_events={chunk_events}, {repeats} rounds)"
        )
    return float(np.median(bulk_t[:, 0]) / np.median(times["iter_chunks"][:, 0]))


def calochallenge_file(path: Path, events: int, seed: int = 1) -> Path:
    """``events`` dataset-2 showers (1 GeV-1 TeV, log-uniform) written by evogan's writer."""
    from evogan.data.writer import ShowerWriter
    from evogan.detectors import detector_for

    detector = detector_for("calochallenge-2")
    radial, angular, layers = detector.grid_shape
    rng = np.random.default_rng(seed)
    r = np.arange(radial)[:, None, None] + 0.5
    depth = np.arange(layers)[None, None, :] + 0.5
    profile = np.exp(-r / 1.5) * depth**2 * np.exp(-depth / 4.0)  # (radial, 1, layers)
    profile = np.broadcast_to(profile, detector.grid_shape) / profile.sum() / angular
    with ShowerWriter(path, detector.grid_shape, detector=detector) as writer:
        for start in range(0, events, 1000):
            n = min(1000, events - start)
            energy = np.exp(rng.uniform(np.log(1.0), np.log(1000.0), n))
            noise = rng.gamma(2.0, 0.5, (n, *detector.grid_shape))
            cells = 0.03 * energy[:, None, None, None] * profile * noise
            cells[cells < 1e-6] = 0.0  # 1 keV
            writer.append(cells.astype(np.float32), energy)
    return path


def contiguous_copy(path: Path, out: Path) -> Path:
    """The same file with ECAL stored contiguously, uncompressed (the other extreme)."""
    with h5py.File(path, "r") as src, h5py.File(out, "w") as dst:
        for key, value in src.attrs.items():
            dst.attrs[key] = value
        for key in src:
            dst.create_dataset(key, data=src[key][:])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, help="existing shower file (default: synthetic)")
    parser.add_argument("--events", type=int, default=3000, help="synthetic events to write")
    parser.add_argument(
        "--calochallenge",
        type=int,
        metavar="N",
        help="bench a CaloChallenge file of N dataset-2 showers (written to a temporary file)",
    )
    parser.add_argument("--chunk-events", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--contiguous",
        action="store_true",
        help="also bench an uncompressed, contiguous copy of the file",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        path = args.file
        if args.calochallenge is not None:
            path = calochallenge_file(Path(tmp) / "calochallenge2.h5", args.calochallenge)
        elif path is None:
            from evogan.data.synthetic import write_synthetic

            path = write_synthetic(Path(tmp) / "bench_read.h5", args.events, (2.0, 500.0), 1)
        bench(path, args.chunk_events, args.repeats)
        if args.contiguous:
            bench(
                contiguous_copy(path, Path(tmp) / "contiguous.h5"), args.chunk_events, args.repeats
            )


if __name__ == "__main__":
    main()
