"""The Triton channel-mixing kernels of the FFT convolution equal ``einsum``
(evogan.gan3d.kernels.spectral_mixing), alone and inside a convolution's forward and backward pass.

The kernels run here under Triton's interpreter (``TRITON_INTERPRET=1``, CPU tensors), which
executes the same program a GPU compiles; speed is measured on a GPU by
``scripts/bench_gan.py`` (docs/performance.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from evogan.gan3d.kernels import spectral_mixing
from evogan.gan3d.kernels.convolution import fft_correlate
from tests.conftest import REPO

# (rows, in channels, out channels, frequencies): channels that are not powers of two and more
# frequencies than a program's block, one channel and more rows than a program's, 16 channels.
# Kept small: the interpreter runs every program's rows and output channels one by one.
CASES = [(3, 5, 3, (7, 6, 4)), (9, 1, 2, (5, 3, 2)), (2, 16, 3, (4, 4, 3))]


def _spectra(generator: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.complex(
        torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)
    )


def _tiled(fn, *args) -> tuple[torch.Tensor, ...]:
    """``fn(*args)`` through the Triton kernels, then through einsum."""
    spectral_mixing.allow_forms("tiled")
    kernels = fn(*args)
    spectral_mixing.allow_forms("einsum")
    reference = fn(*args)
    spectral_mixing.allow_forms()
    return kernels, reference


def _error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).detach().abs().max() / want.detach().abs().max())


def compare() -> dict:
    """Largest relative error of each product through the kernels, and of a convolution's output
    and gradients through them, against einsum (run under the interpreter)."""
    errors: dict[str, float] = {}
    generator = torch.Generator().manual_seed(7)
    assert spectral_mixing._use_kernels(torch.zeros(1, dtype=torch.complex64))
    signal = torch.randn(2, 3, 7, 6, 5, generator=generator, requires_grad=True)
    weight = torch.randn(2, 3, 3, 4, 3, generator=generator, requires_grad=True)
    grad = torch.randn(2, 2, 6, 5, 5, generator=generator)

    def convolution() -> tuple[torch.Tensor, ...]:
        out, _ = fft_correlate(signal, weight, None, [0, 1, 2, 0, 1, 1], True)
        return (out, *torch.autograd.grad(out, (signal, weight), grad))

    for rows, q, p, frequencies in CASES:
        x = _spectra(generator, rows, q, *frequencies)
        kernel = _spectra(generator, p, q, *frequencies)
        upstream = _spectra(generator, rows, p, *frequencies)
        name = f"{rows}x{q}->{p}"
        for conjugate in (False, True):
            got, want = _tiled(spectral_mixing.mix_channels, x, kernel, conjugate, False)
            errors[f"{name} conjugate={conjugate}"] = _error(got, want)
            got, want = _tiled(spectral_mixing.mix_channels, upstream, kernel, conjugate, True)
            errors[f"{name} transposed conjugate={conjugate}"] = _error(got, want)
        got, want = _tiled(spectral_mixing.correlate_over_batch, x, upstream)
        errors[f"{name} over the batch"] = _error(got, want)
    for label, got, want in zip(
        ("output", "input grad", "weight grad"), *_tiled(convolution), strict=True
    ):
        errors[f"convolution {label}"] = _error(got, want)
    return errors


@pytest.mark.slow
def test_kernels_equal_einsum() -> None:
    pytest.importorskip("triton")
    code = "import json, tests.test_gan_spectral_mixing as t; print(json.dumps(t.compare()))"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    errors = json.loads(done.stdout.splitlines()[-1])
    assert len(errors) == 5 * len(CASES) + 3
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-5, f"{worst}: {errors[worst]:.2e}"


def test_without_triton_or_a_gpu_the_products_run_through_einsum() -> None:
    spectra = torch.zeros(2, 3, 4, 4, 3, dtype=torch.complex64)
    if os.environ.get("TRITON_INTERPRET") != "1":
        assert not spectral_mixing._use_kernels(spectra)  # CPU tensors, no interpreter
    spectral_mixing.allow_forms("einsum")
    try:
        assert not spectral_mixing._use_kernels(spectra.to("meta"))
    finally:
        spectral_mixing.allow_forms()


def test_an_unknown_form_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"unknown form\(s\) \['cublas'\]; choose from einsum"):
        spectral_mixing.allow_forms("cublas")


def test_a_kernel_that_fails_here_leaves_the_work_to_einsum() -> None:
    """Where Triton cannot compile or run a kernel on the GPU at hand, the product warns once
    and runs through einsum instead of stopping the training."""

    def broken() -> torch.Tensor:
        raise RuntimeError("out of resources: shared memory\nrequired: 300000")

    forms = {"einsum": lambda: torch.ones(2), "tiled": broken}
    key = ("test", "broken kernel")
    with pytest.warns(
        UserWarning, match=r"tiled Triton kernel .* \(RuntimeError: out of resources"
    ):
        chosen = spectral_mixing._fastest(key, forms, torch.device("cpu"))
    try:
        assert torch.equal(chosen(), torch.ones(2))
        assert [c["form"] for c in spectral_mixing.chosen_forms() if c["product"] == list(key)] == [
            "einsum"
        ]
    finally:
        spectral_mixing.allow_forms()  # forgets the test's choice
