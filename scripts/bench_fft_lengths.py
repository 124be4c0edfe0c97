#!/usr/bin/env python
"""Which transform lengths the 3DGAN's FFT form should pad to: prime sets against each other.

The FFT form (``trainer.convolution: fft``) pads each block's input to the smallest length per
axis whose prime factors are in ``convolution.FFT_PRIMES``. Fewer primes mean friendlier but
longer transforms, no padding beyond the input means short ones of awkward lengths. Two views:

- per block of the spec's FFT form: ``rfftn`` + ``irfftn`` of a batch at each set's lengths
  (best of 5 after one warm-up; ``exact`` is the unpadded length, whatever its factors);
- eager float32 + fft training steps with ``FFT_PRIMES`` set to each set, in rounds A B C C B A
  (best of 3 steps after 3 warm-up steps each).

    python scripts/bench_fft_lengths.py --device cuda [--batch 128] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from bench_gan import _synchronize, train_rate

from evogan.gan3d.kernels import convolution
from evogan.gan3d.model.precision import ForwardOptions
from evogan.gan3d.model.spec import GanSpec, load_spec

REPO = Path(__file__).resolve().parents[1]
SETS = {"2,3,5,7": (2, 3, 5, 7), "2,3,5": (2, 3, 5), "2,3": (2, 3)}
FFT = ForwardOptions(convolution="fft")


def block_inputs(spec: GanSpec, device: str) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(channels and cells, padded cells) of every FFT-form convolution one training step runs."""
    seen = set()
    shape_of = convolution._fft_shape

    def record(x: torch.Tensor, pads: list[int]) -> list[int]:
        seen.add((tuple(x.shape[1:]), tuple(convolution.padded_cells(x, pads))))
        return shape_of(x, pads)

    convolution._fft_shape = record
    try:
        train_rate(spec, 2, 1, warmup=0, device=device, forward=FFT)
    finally:
        convolution._fft_shape = shape_of
    return sorted(seen)


def transform_ms(lengths: list[int], channels: int, batch: int, device: str) -> float:
    """Milliseconds of one forward and one inverse real transform at these lengths."""
    x = torch.randn(batch, channels, *lengths, device=device)
    best = float("inf")
    for repeat in range(6):
        _synchronize(x.device)
        start = time.perf_counter()
        torch.fft.irfftn(torch.fft.rfftn(x, dim=(2, 3, 4)), s=lengths, dim=(2, 3, 4))
        _synchronize(x.device)
        if repeat:
            best = min(best, time.perf_counter() - start)
    return 1e3 * best


def transforms(spec: GanSpec, batch: int, device: str) -> list[dict]:
    rows = []
    for (channels, *cells), padded in block_inputs(spec, device):
        options = {
            name: [convolution.fft_size(n, primes) for n in padded] for name, primes in SETS.items()
        }
        options["exact"] = list(padded)
        row = {"input": [channels, *cells], "padded": list(padded)}
        for name, lengths in options.items():
            row[name] = {"lengths": lengths, "ms": transform_ms(lengths, channels, batch, device)}
        rows.append(row)
        print(
            f"{channels:3d} x {'x'.join(map(str, cells)):>10s}: "
            + ", ".join(
                f"{name} {'x'.join(map(str, row[name]['lengths']))} {row[name]['ms']:.2f} ms"
                for name in options
            ),
            flush=True,
        )
    return rows


def steps(spec: GanSpec, batch: int, device: str) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {name: [] for name in SETS}
    shipped = convolution.FFT_PRIMES
    for name in [*SETS, *reversed(SETS)]:
        convolution.FFT_PRIMES = SETS[name]
        try:
            rates[name].append(train_rate(spec, batch, 3, warmup=3, device=device, forward=FFT))
        finally:
            convolution.FFT_PRIMES = shipped
        print(
            f"eager float32 + fft step, primes {name}: {rates[name][-1]:.1f} samples/s", flush=True
        )
    return rates


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "configs" / "gan3d.yaml")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if torch.device(args.device).type == "cuda":
        torch.backends.cudnn.benchmark = True
    spec = load_spec(args.spec)
    result = {
        "device": torch.cuda.get_device_name(args.device) if "cuda" in args.device else "cpu",
        "batch": args.batch,
        "transforms": transforms(spec, args.batch, args.device),
        "steps_samples_per_s": steps(spec, args.batch, args.device),
    }
    totals = {
        name: sum(row[name]["ms"] for row in result["transforms"]) for name in [*SETS, "exact"]
    }
    result["transform_totals_ms"] = totals
    print("all blocks' transforms once: " + ", ".join(f"{n} {t:.2f} ms" for n, t in totals.items()))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
