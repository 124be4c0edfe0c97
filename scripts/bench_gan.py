"""3DGAN single-process benchmark: training samples/s against the FLOP bound, inference ms/shower.

    python scripts/bench_gan.py                       # variable-angle spec, batch 8
    python scripts/bench_gan.py --spec configs/gan3d_fixed25.yaml --batch 16 --json out.json
    python scripts/bench_gan.py --device cuda --batch 128 --steps 10 --inference-batch 512
    python scripts/bench_gan.py --precision bf16 --channels-last      # trainer.precision etc.
    python scripts/bench_gan.py --spec configs/gan3d_tiny.yaml --compare  # table of variants
    python scripts/bench_gan.py --device cuda --batch 128 --compare float32 bf16+compiled+fft
    python scripts/bench_gan.py --spec configs/gan3d_tiny.yaml --profile  # kernels by time

FLOPs per training sample are counted from the spec's layer shapes (conv and dense layers,
2 FLOPs per multiply-accumulate; batch norm, activations and pooling are not counted):

- discriminator update: G forward, D forward on the real and the generated half, D backward
  of both halves (weight gradients everywhere, input gradients below the first layer);
- each of ``generator_steps`` generator updates: G forward, D forward, D backward to its input
  (D weights frozen), G backward (weight gradients, input gradients below the dense layer).

The FLOP-bound rate is a dense float32 matmul rate measured in the same run (before and after
the training steps, the faster of the two) divided by those FLOPs; ``efficiency`` = measured
samples/s / FLOP-bound samples/s. Inference is the eval-mode generator at the given batch size
(anchor: 1 ms/shower on a 28-core Xeon, seed 003).

On a GPU, cuDNN runs float32 convolutions in TF32 by default while a float32 matmul does not,
so the run measures both matmul rates and bounds against the faster (TF32) one; cuDNN
autotuning is on, as in the trainer. Timings synchronise the device.

``--precision``, ``--channels-last``, ``--compile`` and ``--convolution`` run the step and the
generator as the trainer's options of the same names do (:mod:`evogan.gan3d.model.precision`;
inference under bf16 autocast returns bf16-rounded showers). ``--compare`` times float32, bf16,
channels-last and both (and each compiled too, with ``--compile``) one after another, training
and inference only (no FLOP bound), as a quick table; compilation happens in the warm-up steps,
not the timed ones. ``--compare VARIANT ...`` times the variants named, each a ``+``-joined set of
``float32``/``bf16``, ``channels-last``, ``compiled``, ``fft``, ``direct-upsampling`` (the
upsample -> convolution blocks as separate layers, the phase form of
:mod:`evogan.gan3d.kernels.convolution` off) and ``einsum-mixing`` (the FFT form's channel mixing
through ``einsum``, not the Triton kernels of :mod:`evogan.gan3d.kernels.spectral_mixing`) and
``recompute-spectra`` (the FFT form's weight gradients transform the block's input again instead
of taking the spectrum its forward pass kept), for before/after rows in one run.
The FLOPs stay those of the spec's direct convolutions, so with the phase or FFT forms the
efficiency is direct-equivalent work per second and can exceed 1.

Functions are small and importable, so other sections (``--parallel``: the communication
share of the data-parallel trainer) can reuse :func:`step_flops`, :func:`matmul_rate` and
:func:`train_rate`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import torch

from evogan.gan3d.kernels import convolution, spectral_mixing
from evogan.gan3d.kernels.convolution import ConvBlock
from evogan.gan3d.model.generate import generate_showers
from evogan.gan3d.model.networks import build_models, sample, to_gev
from evogan.gan3d.model.precision import ForwardOptions
from evogan.gan3d.model.spec import (
    GanSpec,
    Layer,
    discriminator_layers,
    generator_layers,
    load_spec,
)
from evogan.gan3d.training.step import GanStep

REPO = Path(__file__).resolve().parents[1]


def _flops(layers: list[Layer]) -> tuple[int, int]:
    """(forward FLOPs, FLOPs of the first weighted layer) per sample."""
    weighted = [layer for layer in layers if layer.macs > 0]
    return sum(2 * layer.macs for layer in weighted), 2 * weighted[0].macs


def step_flops(spec: GanSpec) -> dict[str, float]:
    """Conv + dense FLOPs per real sample of one ``train_step`` (see the module docstring)."""
    g_fwd, g_first = _flops(generator_layers(spec))
    d_fwd, d_first = _flops(discriminator_layers(spec))
    d_update = g_fwd + 2 * d_fwd + 2 * (d_fwd + (d_fwd - d_first))
    g_update = g_fwd + d_fwd + d_fwd + g_fwd + (g_fwd - g_first)
    return {
        "generator_forward": float(g_fwd),
        "discriminator_forward": float(d_fwd),
        "discriminator_update": float(d_update),
        "generator_update": float(g_update),
        "train_step": float(d_update + spec.generator_steps * g_update),
    }


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_rate(n: int = 2048, repeats: int = 5, device: str | torch.device = "cpu") -> float:
    """Dense float32 matmul FLOP/s on this device and thread count (best of ``repeats``)."""
    device = torch.device(device)
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    a @ b
    _synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        _synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / best


def tf32_matmul_rate(n: int, device: torch.device) -> float:
    """The matmul rate with TF32 allowed, the precision cuDNN gives float32 convolutions."""
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return matmul_rate(n, device=device)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed


def _batch(spec: GanSpec, n: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    ecal = torch.rand(n, *spec.output_shape, generator=gen) * 1e-2
    energy = 10.0 + 190.0 * torch.rand(n, generator=gen)
    theta = 1.2 + 0.7 * torch.rand(n, generator=gen)
    return ecal, energy, theta


def _models(spec: GanSpec, phase: bool = True) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Both networks from seed 0; ``phase=False`` runs upsampling blocks as separate layers."""
    networks = build_models(spec, torch.Generator().manual_seed(0))
    for block in (m for net in networks for m in net.modules() if isinstance(m, ConvBlock)):
        block.phase = block.phase and phase
    return networks


def _warm_step(
    spec: GanSpec,
    batch: int,
    device: torch.device,
    forward: ForwardOptions | None,
    warmup: int,
    phase: bool = True,
) -> tuple[GanStep, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A training step with its batch on ``device``, after ``warmup`` untimed steps."""
    generator, discriminator = _models(spec, phase)
    rng = torch.Generator(device).manual_seed(1)  # on the device, as in the trainer
    step = GanStep(spec, generator, discriminator, rng, device=device, forward=forward)
    ecal, energy, theta = (t.to(device) for t in _batch(spec, batch))
    for _ in range(warmup):
        step.train_step(ecal, energy, theta)
    _synchronize(device)
    return step, ecal, energy, theta


def train_rate(
    spec: GanSpec,
    batch: int,
    steps: int,
    warmup: int = 1,
    device: str | torch.device = "cpu",
    forward: ForwardOptions | None = None,
    phase: bool = True,
) -> float:
    """Training samples/s of ``GanStep.train_step`` (best step after ``warmup`` steps), with
    the batch already on ``device``."""
    device = torch.device(device)
    step, ecal, energy, theta = _warm_step(spec, batch, device, forward, warmup, phase)
    best = float("inf")
    for _ in range(steps):
        start = time.perf_counter()
        step.train_step(ecal, energy, theta)
        _synchronize(device)
        best = min(best, time.perf_counter() - start)
    return batch / best


def inference_ms(
    spec: GanSpec,
    batch: int,
    repeats: int = 3,
    device: str | torch.device = "cpu",
    forward: ForwardOptions | None = None,
    phase: bool = True,
    to_host: bool = True,
) -> float:
    """Milliseconds per generated shower (eval mode, no grad, cells in GeV): in host memory as
    ``generate_showers`` returns them, or left on ``device`` (``to_host=False``)."""
    device = torch.device(device)
    forward = forward or ForwardOptions()
    generator, _ = _models(spec, phase)
    network = forward.prepare(generator.to(device))
    if forward.precision != "float32":
        network = Autocast(generator, forward, device)
    _, energy, theta = _batch(spec, batch)
    rng = torch.Generator(device).manual_seed(2)

    def generate() -> None:
        if to_host:
            generate_showers(spec, network, energy.numpy(), theta.numpy(), rng, batch)
            return
        with torch.no_grad():
            to_gev(spec, sample(spec, network.eval(), energy.to(device), theta.to(device), rng))
        _synchronize(device)

    generate()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        generate()
        best = min(best, time.perf_counter() - start)
    return 1e3 * best / batch


class Autocast(torch.nn.Module):
    """A generator run under the forward options' autocast, returning float32 showers."""

    def __init__(
        self, generator: torch.nn.Module, forward: ForwardOptions, device: torch.device
    ) -> None:
        super().__init__()
        self.generator, self.options, self.device = generator, forward, device

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        with self.options.autocast(self.device):
            return self.generator(latent).float()


def _kernel_table(run: Callable[[], None], device: torch.device, rows: int) -> str:
    """torch.profiler's table of what ``run()`` spends, by device time: where the time goes."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as profiler:
        run()
        _synchronize(device)
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return profiler.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=70)


def profile_step(
    spec: GanSpec, batch: int, device: str, forward: ForwardOptions, rows: int = 15
) -> str:
    """The kernels of two training steps (after warm-up) by device time."""
    device = torch.device(device)
    warmup = _warmup(device.type == "cuda", forward)
    step, ecal, energy, theta = _warm_step(spec, batch, device, forward, warmup)

    def two_steps() -> None:
        for _ in range(2):
            step.train_step(ecal, energy, theta)

    return _kernel_table(two_steps, device, rows)


def profile_inference(
    spec: GanSpec, batch: int, device: str, forward: ForwardOptions, rows: int = 15
) -> str:
    """The kernels of one eval-mode generator pass at ``batch`` (after a warm-up pass), showers
    left on the device."""
    device = torch.device(device)
    network = forward.prepare(_models(spec)[0].to(device)).eval()
    _, energy, theta = (t.to(device) for t in _batch(spec, batch))
    rng = torch.Generator(device).manual_seed(2)

    def generate() -> None:
        with torch.no_grad(), forward.autocast(device):
            sample(spec, network, energy, theta, rng)

    generate()
    return _kernel_table(generate, device, rows)


def _warmup(on_gpu: bool, forward: ForwardOptions) -> int:
    """Untimed steps: cuDNN autotuning on a GPU, compilation (two step kinds) when compiled."""
    return max(3 if on_gpu else 1, 2 if forward.compile else 1)


def single_process(
    spec: GanSpec,
    batch: int,
    steps: int,
    inference_batch: int,
    device: str = "cpu",
    forward: ForwardOptions | None = None,
) -> dict:
    """The single-process section: FLOPs, matmul rate, training rate, efficiency, inference."""
    forward = forward or ForwardOptions()
    on_gpu = torch.device(device).type == "cuda"
    size = 8192 if on_gpu else 2048
    flops = step_flops(spec)
    before = matmul_rate(size, device=device)
    warmup = _warmup(on_gpu, forward)
    if on_gpu:
        torch.cuda.reset_peak_memory_stats(device)
    samples = train_rate(spec, batch, steps, warmup=warmup, device=device, forward=forward)
    extra = {}
    if on_gpu:  # the training's peak, before the matmul rates allocate their own operands
        extra["train_peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    rate = max(before, matmul_rate(size, device=device))  # the faster: a conservative bound
    if on_gpu:
        extra |= {"gpu": torch.cuda.get_device_name(device), "matmul_fp32_gflops": rate / 1e9}
        rate = max(rate, tf32_matmul_rate(size, torch.device(device)))
    bound = rate / flops["train_step"]
    return {
        "spec": spec.name,
        "device": device,
        "forward": asdict(forward),
        **extra,
        "threads": torch.get_num_threads(),
        "batch": batch,
        "flops_per_sample": flops,
        "matmul_gflops": rate / 1e9,
        "train_samples_per_s": samples,
        "flop_bound_samples_per_s": bound,
        "efficiency": samples / bound,
        "achieved_gflops": samples * flops["train_step"] / 1e9,
        "inference_ms_per_shower": inference_ms(
            spec, inference_batch, device=device, forward=forward
        ),
        "inference_ms_per_shower_on_device": inference_ms(
            spec, inference_batch, device=device, forward=forward, to_host=False
        ),
        "inference_gflops_per_shower": flops["generator_forward"] / 1e9,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "configs" / "gan3d.yaml")
    parser.add_argument("--batch", type=int, default=8, help="training batch (default 8)")
    parser.add_argument("--steps", type=int, default=2, help="timed training steps (best kept)")
    parser.add_argument("--inference-batch", type=int, default=32)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    parser.add_argument("--precision", choices=("float32", "bf16"), default="float32")
    parser.add_argument("--channels-last", action="store_true", help="channels_last_3d layout")
    parser.add_argument("--compile", action="store_true", help="torch.compile G and D forward")
    parser.add_argument("--convolution", choices=("direct", "fft"), default="direct")
    parser.add_argument(
        "--compare",
        nargs="*",
        metavar="VARIANT",
        help="time forward variants side by side (see above; none named: the four layouts)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print the kernels of two steps, then of one generator pass, by time",
    )
    return parser


VARIANT_WORDS = (
    "float32",
    "bf16",
    "channels-last",
    "compiled",
    "fft",
    "direct-upsampling",
    "einsum-mixing",
    "recompute-spectra",
)


def parse_variant(text: str) -> tuple[ForwardOptions, bool, bool, bool]:
    """``bf16+channels-last+compiled+fft`` -> (forward options, phase form on, Triton channel
    mixing on, input spectra kept for the backward pass)."""
    words = text.split("+")
    unknown = [w for w in words if w not in VARIANT_WORDS]
    if unknown or not words:
        raise SystemExit(
            f"--compare: unknown variant word(s) {unknown} in {text!r}; join any of "
            f"{', '.join(VARIANT_WORDS)} with '+'"
        )
    forward = ForwardOptions(
        "bf16" if "bf16" in words else "float32",
        "channels-last" in words,
        "compiled" in words,
        "fft" if "fft" in words else "direct",
    )
    return (
        forward,
        "direct-upsampling" not in words,
        "einsum-mixing" not in words,
        "recompute-spectra" not in words,
    )


def variant_name(
    forward: ForwardOptions, phase: bool = True, kernels: bool = True, kept: bool = True
) -> str:
    words = [forward.precision]
    words += ["channels-last"] if forward.channels_last else []
    words += ["compiled"] if forward.compile else []
    words += ["fft"] if forward.convolution == "fft" else []
    words += [] if phase else ["direct-upsampling"]
    words += [] if kernels else ["einsum-mixing"]
    words += [] if kept else ["recompute-spectra"]
    return "+".join(words)


def variants(compiled: bool) -> list[ForwardOptions]:
    """float32, bf16, channels-last and bf16 + channels-last; also compiled with ``compiled``."""
    plain = [
        ForwardOptions(precision, layout)
        for layout in (False, True)
        for precision in ("float32", "bf16")
    ]
    return plain + [replace(o, compile=True) for o in plain if compiled]


def compare(spec: GanSpec, args: argparse.Namespace) -> list[dict]:
    """Training samples/s and inference ms/shower of every variant, one after another."""
    on_gpu = args.device.startswith("cuda")
    chosen = [parse_variant(v) for v in args.compare] or [
        (o, True, True, True) for o in variants(args.compile)
    ]
    rows = []
    for forward, phase, kernels, kept in chosen:
        spectral_mixing.allow_forms(*([] if kernels else ["einsum"]))  # also forgets choices
        convolution.keep_spectra = kept
        warmup = _warmup(on_gpu, forward)
        rate = train_rate(spec, args.batch, args.steps, warmup, args.device, forward, phase)
        options = {"device": args.device, "forward": forward, "phase": phase}
        ms = inference_ms(spec, args.inference_batch, **options)
        on_device = inference_ms(spec, args.inference_batch, **options, to_host=False)
        name = variant_name(forward, phase, kernels, kept)
        rows.append(
            {
                "variant": name,
                "train_samples_per_s": rate,
                "inference_ms": ms,
                "inference_ms_on_device": on_device,
                "channel_mixing": spectral_mixing.chosen_forms(),
            }
        )
        print(
            f"{name:44s} {rate:10.2f} samples/s {ms:10.4f} ms/shower "
            f"({on_device:.4f} on the device)",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    spec = load_spec(args.spec)
    if args.device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no GPU here; use --device cpu")
        torch.backends.cudnn.benchmark = True
    where = args.device if args.device != "cpu" else f"{torch.get_num_threads()} thread(s)"
    print(f"benchmarking {spec.name} on {where}...", flush=True)
    if args.compare is not None:
        result = {"compare": compare(spec, args), "batch": args.batch, "device": args.device}
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        return result
    forward = ForwardOptions(args.precision, args.channels_last, args.compile, args.convolution)
    single = single_process(
        spec, args.batch, args.steps, args.inference_batch, args.device, forward
    )
    result = {"single_process": single}
    print(
        f"train: {single['train_samples_per_s']:.3f} samples/s at batch {args.batch} "
        f"({single['flops_per_sample']['train_step'] / 1e9:.1f} GFLOP/sample, "
        f"{single['achieved_gflops']:.1f} GFLOP/s achieved, matmul {single['matmul_gflops']:.1f} "
        f"GFLOP/s): efficiency {single['efficiency']:.2f} of the FLOP bound"
    )
    print(
        f"inference: {single['inference_ms_per_shower']:.1f} ms/shower "
        f"({single['inference_ms_per_shower_on_device']:.2f} without the copy to the host; "
        f"{single['inference_gflops_per_shower']:.2f} GFLOP/shower)"
    )
    if "train_peak_gib" in single:
        print(f"training peak GPU memory allocated: {single['train_peak_gib']:.2f} GiB")
    if args.profile:
        print(profile_step(spec, args.batch, args.device, forward))
        print(profile_inference(spec, args.inference_batch, args.device, forward))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
