"""Synthetic shower throughput on ONE core (target: 500 showers/s, 2-500 GeV).

    python scripts/bench_synth.py --events 2000             # generation alone, generation + write
    python scripts/bench_synth.py --physics 300             # sampling fraction / depth vs reference
    python scripts/bench_synth.py --physics 300 --detector calochallenge-2   # checks per detector
    python scripts/bench_synth.py --codecs 512              # HDF5 compression: write/read/size

Threads are pinned to one before numpy/torch load, so the figure is per core.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from evogan.data.synthetic import generate_showers, synthesize, write_synthetic  # noqa: E402
from evogan.data.writer import ShowerWriter  # noqa: E402
from evogan.detectors import detector_for  # noqa: E402
from evogan.physics import observables as obs  # noqa: E402
from evogan.physics.synthetic_checks import check_showers  # noqa: E402

TARGET = 500.0
REFERENCE_SF = {
    2: 0.0220,
    10: 0.0220,
    50: 0.0209,
    100: 0.0202,
    200: 0.0193,
    400: 0.0184,
    500: 0.0181,
}
REFERENCE_T = {2: 4.7, 10: 6.3, 100: 8.6, 200: 9.3, 500: 10.2}


def throughput(events: int, seed: int) -> None:
    """Wall and CPU time: on a shared machine CPU time is the per-core figure."""
    print(
        f"{'mode':<22}{'events':>8}{'wall s':>8}{'cpu s':>8}{'showers/s':>11}"
        f"{'(cpu)':>7}{'x target':>10}"
    )
    rows = []
    wall, cpu = time.perf_counter(), time.process_time()
    for _chunk in synthesize(events, (2.0, 500.0), seed):
        pass
    rows.append(("generate", time.perf_counter() - wall, time.process_time() - cpu))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synth.h5"
        wall, cpu = time.perf_counter(), time.process_time()
        write_synthetic(path, events, (2.0, 500.0), seed)
        rows.append(("generate + write h5", time.perf_counter() - wall, time.process_time() - cpu))
        size_mb = path.stat().st_size / 1e6
    for name, wall, cpu in rows:
        print(
            f"{name:<22}{events:>8}{wall:>8.2f}{cpu:>8.2f}{events / wall:>11.0f}"
            f"{events / cpu:>7.0f}{events / cpu / TARGET:>10.2f}"
        )
    print(f"file size {size_mb:.1f} MB ({size_mb * 1e3 / events:.1f} kB/event)")


def physics(per_energy: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    centres = detector_for("clic-ecal").materials.layer_centres_x0()
    print(
        f"{'E GeV':>6}{'SF':>9}{'ref':>8}{'ratio':>7}{'T X0':>7}{'ref':>6}"
        f"{'sigma/E':>9}{'.11/vE':>8}{'empty':>8}{'hits':>7}"
    )
    for energy, ref in REFERENCE_SF.items():
        ecal = generate_showers(np.full(per_energy, float(energy)), rng)
        sf = obs.sampling_fraction(ecal, np.full(per_energy, float(energy)))
        depth = np.nanmean(obs.shower_max_depth_x0(ecal, centres))
        ref_t = f"{REFERENCE_T[energy]:6.1f}" if energy in REFERENCE_T else " " * 6
        print(
            f"{energy:>6}{sf.mean():>9.5f}{ref:>8.4f}{sf.mean() / ref:>7.3f}{depth:>7.2f}{ref_t}"
            f"{sf.std() / sf.mean():>9.4f}{0.11 / np.sqrt(energy):>8.4f}"
            f"{obs.empty_cell_fraction(ecal).mean():>8.4f}{obs.hit_count(ecal).mean():>7.0f}"
        )


DETECTOR_ENERGIES = (1, 2, 5, 10, 50, 100, 500, 1000)


def detector_physics(per_energy: int, seed: int, name: str) -> None:
    """The checks of docs/explanation/physics.md section 7 for ``name``: sampling fraction over the
    nominal one, shower maximum against GFLASH, containment within 1 and 2 Moliere radii."""
    detector = detector_for(name)
    rng = np.random.default_rng(seed)
    nominal = detector.materials.sampling_fraction
    print(f"{detector.describe()}, nominal sampling fraction {nominal:g}")
    print(f"{'E GeV':>6}{'SF':>9}{'/nominal':>9}{'T X0':>7}{'GFLASH':>8}{'<1 RM':>7}{'<2 RM':>7}")
    for energy in DETECTOR_ENERGIES:
        showers = generate_showers(np.full(per_energy, float(energy)), rng, detector=detector)
        c = check_showers(showers, float(energy), detector)
        print(
            f"{energy:>6}{c.sampling_fraction:>9.5f}{c.nominal_ratio:>9.3f}{c.t_max_x0:>7.2f}"
            f"{c.t_gflash_x0:>8.2f}{c.containment_1rm:>7.3f}{c.containment_2rm:>7.3f}"
        )


def codecs(events: int, seed: int) -> None:
    """CPU time per event of writing and reading back ``ECAL`` with each HDF5 filter."""
    chunks = list(synthesize(events, (2.0, 500.0), seed))
    print(f"{'codec':<18}{'write ms/ev':>12}{'read ms/ev':>11}{'kB/ev':>8}")
    options = [
        ("gzip-1", "gzip", 1, False),
        ("gzip-1 + shuffle", "gzip", 1, True),
        ("gzip-4", "gzip", 4, False),
        ("lzf", "lzf", None, False),
        ("lzf + shuffle", "lzf", None, True),
        ("none", None, None, False),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, compression, level, shuffle in options:
            path = Path(tmp) / "codec.h5"
            start = time.process_time()
            with ShowerWriter(
                path,
                detector_for("clic-ecal").grid_shape,
                compression=compression,
                compression_opts=level,
                shuffle=shuffle,
            ) as writer:
                for ecal, energy, theta in chunks:
                    writer.append(ecal, energy, theta)
            written = time.process_time() - start
            start = time.process_time()
            with h5py.File(path) as f:
                for i in range(0, events, 64):
                    f["ECAL"][i : i + 64]
            read = time.process_time() - start
            print(
                f"{name:<18}{written / events * 1e3:>12.2f}{read / events * 1e3:>11.2f}"
                f"{path.stat().st_size / events / 1e3:>8.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="showers for the throughput test")
    parser.add_argument("--physics", type=int, metavar="N", help="N showers per reference energy")
    parser.add_argument("--codecs", type=int, metavar="N", help="compare compressions on N events")
    parser.add_argument(
        "--detector", help="with --physics: the checks for this detector instead (no throughput)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.detector:
        detector_physics(args.physics or 300, args.seed, args.detector)
        return
    throughput(args.events, args.seed)
    if args.physics:
        physics(args.physics, args.seed)
    if args.codecs:
        codecs(args.codecs, args.seed)


if __name__ == "__main__":
    main()
