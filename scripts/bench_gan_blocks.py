"""3DGAN block by block: forward + backward milliseconds of each spec block per convolution form.

    python scripts/bench_gan_blocks.py --device cuda --batch 64
    python scripts/bench_gan_blocks.py --spec configs/gan3d_small.yaml --batch 4 --threads 2

Each generator and discriminator block (``[upsample] -> [pad] -> Conv3d -> activation ->
[BN] -> [dropout]``) runs on a random input of its real shape, in training mode, forward and
backward to its input and weights, as:

- ``layers``: the block's layers one after another (upsampling materialised), float32;
- ``phase``: the phase form of an upsampling block (:mod:`evogan.gan3d.kernels.convolution`),
  float32;
- ``bf16-cl``: the block's default form under bf16 autocast with channels-last tensors;
- ``fft``: the block's convolution as float32 FFTs, for every block whatever its kernel size
  (the trainer's ``convolution: fft`` uses them from ``FFT_MIN_TAPS`` taps).

Each figure is the median of ``--repeats`` timed runs after warm-up runs (cuDNN autotuning on
a GPU). This is where the ``FFT_MIN_TAPS`` threshold comes from.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import time
from pathlib import Path

import torch
from bench_gan import _synchronize

from evogan.gan3d.kernels.convolution import FFT_MIN_TAPS, ConvBlock
from evogan.gan3d.model.networks import build_models, sample
from evogan.gan3d.model.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
FORMS = ("layers", "phase", "bf16-cl", "fft")


def block_inputs(spec, device: torch.device) -> list[tuple[str, ConvBlock, tuple[int, ...]]]:
    """(name, block, input shape without the batch) of every spec block, from one forward."""
    generator, discriminator = (m.to(device) for m in build_models(spec))
    found: list[tuple[str, ConvBlock, tuple[int, ...]]] = []
    hooks = []
    for net_name, net in (("G", generator), ("D", discriminator)):
        blocks = [m for m in net.modules() if isinstance(m, ConvBlock)]
        for index, block in enumerate(blocks, start=1):
            name = f"{net_name}{index}"
            hooks.append(
                block.register_forward_pre_hook(
                    lambda _m, args, name=name, block=block: found.append(
                        (name, block, tuple(args[0].shape[1:]))
                    )
                )
            )
    energy = torch.full((2,), 100.0, device=device)
    theta = torch.full((2,), 1.5, device=device)
    rng = torch.Generator(device).manual_seed(0)
    with torch.no_grad():
        image = sample(spec, generator, energy, theta, rng)
        discriminator(image, energy / spec.conditioning.energy_scale)
    for hook in hooks:
        hook.remove()
    return found


def time_block(
    block: ConvBlock, shape: tuple[int, ...], batch: int, form: str, repeats: int, device
) -> float | None:
    """Median ms of forward + backward of ``block`` in ``form`` (None: the form does not apply)."""
    phase = block.phase
    if form == "phase" and not phase:
        return None
    block.phase = phase and form == "phase"
    block.convolution = "fft" if form == "fft" else "direct"
    x = torch.randn(batch, *shape, device=device, requires_grad=True)
    autocast = contextlib.nullcontext()
    if form == "bf16-cl":
        block.to(memory_format=torch.channels_last_3d)
        x = x.detach().contiguous(memory_format=torch.channels_last_3d).requires_grad_()
        autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    block.fft_min_taps = 1
    try:
        times = []
        for i in range(repeats + 2):
            _synchronize(device)
            start = time.perf_counter()
            with autocast:
                y = block(x)
            y.float().sum().backward()
            _synchronize(device)
            if i >= 2:
                times.append(time.perf_counter() - start)
        return 1e3 * statistics.median(times)
    finally:
        block.phase, block.fft_min_taps = phase, FFT_MIN_TAPS
        block.to(memory_format=torch.contiguous_format)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "configs" / "gan3d.yaml")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    spec = load_spec(args.spec)
    print(f"{spec.name}, batch {args.batch}, {args.device}: ms per forward + backward")
    header = " ".join(f"{f:>9s}" for f in FORMS)
    print(f"{'block':6s} {'input':22s} {'kernel':10s} {'taps':>5s} {header}")
    rows = []
    for name, block, shape in block_inputs(spec, device):
        conv = block[block.head - 1]
        row = {"block": name, "input": shape, "kernel": conv.kernel_size}
        for form in FORMS:
            row[form] = time_block(block, shape, args.batch, form, args.repeats, device)
        rows.append(row)
        cells = " ".join(f"{row[f]:9.2f}" if row[f] is not None else f"{'-':>9s}" for f in FORMS)
        kernel = "x".join(map(str, conv.kernel_size))
        print(
            f"{name:6s} {shape!s:22s} {kernel:10s} {math.prod(conv.kernel_size):5d} {cells}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main()
