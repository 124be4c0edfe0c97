"""The Triton evaluation kernel equals the network; the GA's GPU setting is refused without a GPU.

The kernel runs here under Triton's interpreter (``TRITON_INTERPRET=1``, CPU tensors), which
executes the same program a GPU compiles; speed is measured on a GPU by
``scripts/bench_ga_gpu.py`` (docs/performance.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evogan.config.regressor import RegressorModelConfig
from evogan.regressor import gpu_eval
from evogan.regressor.network import (
    RegressorLayout,
    RegressorNet,
    batched_predict,
    evaluation_path,
)
from tests.conftest import REPO, evogan_here

TRITON, TORCH = "fused Triton kernel", "torch im2col + matmul"


CASES = {
    "shipped": ((1, 51, 25), {}, 5, 7),
    "two channels, no bias": (
        (2, 13, 11),
        {"filters": 3, "kernel": 3, "pool": 3, "bias": False},
        33,
        5,
    ),
}


def _interpreted(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with Triton's interpreter on (it must be set before
    triton is imported) and the C kernel out of the way."""
    pytest.importorskip("triton")
    setup = "from evogan.regressor import fused_eval; fused_eval.kernel = lambda: None\n"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", setup + code], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def compare(name: str) -> dict:
    """Kernel predictions against each network's own forward pass (run under the interpreter)."""
    input_shape, model, genomes, events = CASES[name]
    layout = _layout(input_shape, **model)
    generator = torch.Generator().manual_seed(genomes)
    weights = torch.randn(genomes, layout.size, generator=generator) * 0.3
    x = torch.rand(events + 3, *input_shape, generator=generator)
    index = torch.tensor([events + 2, 0, *range(2, events)])
    with torch.no_grad():
        expected = torch.stack([RegressorNet.from_genome(layout, w)(x[index]) for w in weights])
    got = batched_predict(layout, weights, x, index=index)
    return {
        "path": evaluation_path(layout, weights, x),
        "shapes": [list(got.shape), list(expected.shape)],
        "error": ((got - expected).abs().max() / expected.abs().max()).item(),
    }


def _layout(input_shape, **kwargs) -> RegressorLayout:
    return RegressorLayout.from_config(RegressorModelConfig(**kwargs), input_shape)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.slow
def test_kernel_predictions_equal_each_network(name: str) -> None:
    code = f"import json, tests.test_gpu_eval as t; print(json.dumps(t.compare({name!r})))"
    result = json.loads(_interpreted(code).stdout.splitlines()[-1])
    assert result["path"] == TRITON
    assert result["shapes"][0] == result["shapes"][1]
    assert result["error"] < 2e-6


@pytest.mark.slow
def test_max_pooling_and_gradients_take_the_torch_path() -> None:
    code = """
import torch
from evogan.regressor.network import RegressorLayout, evaluation_path
x = torch.rand(4, 1, 12, 10)
pooled_max = RegressorLayout((1, 12, 10), kernel=3, pooling="max")
print(evaluation_path(pooled_max, torch.randn(3, pooled_max.size), x))
avg = RegressorLayout((1, 12, 10), kernel=3)
print(evaluation_path(avg, torch.randn(3, avg.size), x))
print(evaluation_path(avg, torch.randn(3, avg.size, requires_grad=True), x))
"""
    assert _interpreted(code).stdout.splitlines()[-3:] == [TORCH, TRITON, TORCH]


@pytest.mark.slow
def test_bad_kernel_arguments_name_the_problem() -> None:
    code = """
import torch
from evogan.regressor import gpu_eval
weight, patches, tail = torch.zeros(8, 32), torch.zeros(2, 32, 6), torch.zeros(8, 6)
for args in ((weight, patches, tail, "fp16"), (weight, patches, torch.zeros(8, 5))):
    try:
        gpu_eval.fused_rows(*args)
    except ValueError as error:
        print(error)
"""
    assert _interpreted(code).stdout.splitlines()[-2:] == [
        "precision must be one of ieee, tf32, got 'fp16'",
        "shapes do not fit: weight (8, 32), patches (2, 32, 6), tail (8, 5) (inner dimension 32)",
    ]


def test_precision_follows_torchs_float32_matmul_setting() -> None:
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert gpu_eval.default_precision() == "ieee"
        torch.set_float32_matmul_precision("high")
        assert gpu_eval.default_precision() == "tf32"
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.slow
def test_ga_on_cuda_without_a_gpu_is_refused_before_data_or_a_run_directory(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    done = evogan_here(
        "evolve",
        "configs/regressor_ga.yaml",
        "--run-dir",
        str(run),
        "--set",
        "ga.device=cuda",
        "--set",
        "ga.epochs=1",
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "evogan: error: ga.device = 'cuda' but torch sees no CUDA GPU here; use ga.device: cpu"
    )
    assert not run.exists() and "data:" not in done.stdout  # refused before the data is read
