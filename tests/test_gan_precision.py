"""How the 3DGAN forward passes run: bf16 autocast against float32, channels-last against the
default layout, and torch.compile's fallback (evogan.gan3d.model.precision).

Bounds, measured on the tiny spec with toy showers at batch 8 over seeds 0-5, from identical
weights (gradients of both networks before either optimiser steps, then one RMSprop step each).
bf16 keeps 8 bits of mantissa, a rounding of 3.9e-3 per value, through forward and backward:

- loss terms, relative difference: worst 1.05e-2, bound 3e-2;
- gradients, relative L2 difference: worst 1.8e-2 (D and G alike), bound 5e-2;
- update direction, cosine similarity: worst 0.975 (G), bound 0.95;
- weights after the step, relative L2 difference: worst 2.3e-2 (G), bound 5e-2.

channels-last changes only the order of float32 sums: loss terms agree to 2.6e-5 (bound
2e-4) and gradients to 4.6e-5 (bound 5e-4). Its weights after the step agree to 2.0e-3 in
relative L2 (bound 1e-2), not to float rounding: RMSprop's first step moves every weight by
lr / sqrt(1 - alpha) whatever its gradient's size, so a gradient within rounding of zero can
change its sign and move its weight by twice that (6.3e-3, seen in both comparisons).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from mpi4py import MPI

from evogan import logs
from evogan.config import load_config
from evogan.errors import EvoganError
from evogan.gan3d.model import precision as precision_module
from evogan.gan3d.model.losses import gan_loss
from evogan.gan3d.model.networks import build_models
from evogan.gan3d.model.precision import ForwardOptions, compile_problem, cpu_has_amx_bf16
from evogan.gan3d.model.spec import LossWeights
from evogan.gan3d.training.setup import forward_options
from evogan.gan3d.training.step import GanStep
from evogan.gan3d.training.trainer import GanTrainer, train_gan3d
from evogan.store import load_weights
from tests.gan_fixtures import TINY, tiny_spec, toy_showers

SEEDS = (0, 2)


def one_step(options: ForwardOptions, seed: int) -> dict:
    """Losses and gradients of both networks at the initial weights, then one update each."""
    spec = tiny_spec()
    generator, discriminator = build_models(spec, torch.Generator().manual_seed(seed))
    step = GanStep(
        spec, generator, discriminator, torch.Generator().manual_seed(seed + 1), forward=options
    )
    ecal, energy, theta = (torch.from_numpy(a) for a in toy_showers(8, seed))
    nets = {"G": generator, "D": discriminator}
    before = {k: _flat(m) for k, m in nets.items()}
    losses = step.discriminator_grads(ecal, energy, theta)
    losses.update(step.generator_grads(8, energy, theta))
    grads = {k: torch.cat([p.grad.reshape(-1) for p in m.parameters()]) for k, m in nets.items()}
    step.d_optimizer.step()
    step.g_optimizer.step()
    after = {k: _flat(m) for k, m in nets.items()}
    return {"losses": losses, "grads": grads, "before": before, "after": after, "step": step}


def _flat(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in module.parameters()])


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def _compare(options: ForwardOptions, seed: int) -> dict[str, float]:
    """Worst relative differences of ``options`` against float32 defaults."""
    ref, run = one_step(ForwardOptions(), seed), one_step(options, seed)
    worst = {"loss": 0.0, "grad": 0.0, "cosine": 1.0, "weights": 0.0}
    for key, value in ref["losses"].items():
        error = abs(run["losses"][key] - value) / max(abs(value), 1e-3)
        worst["loss"] = max(worst["loss"], error)
    for net in ("G", "D"):
        worst["grad"] = max(worst["grad"], _relative(run["grads"][net], ref["grads"][net]))
        update = run["after"][net] - run["before"][net]
        expected = ref["after"][net] - ref["before"][net]
        cosine = float(torch.nn.functional.cosine_similarity(update, expected, dim=0))
        worst["cosine"] = min(worst["cosine"], cosine)
        worst["weights"] = max(worst["weights"], _relative(run["after"][net], ref["after"][net]))
    return worst


@pytest.mark.parametrize("seed", SEEDS)
def test_bf16_autocast_step_agrees_with_float32_within_bf16_rounding(seed: int) -> None:
    worst = _compare(ForwardOptions(precision="bf16"), seed)
    assert worst["loss"] < 3e-2, worst
    assert worst["grad"] < 5e-2, worst
    assert worst["cosine"] > 0.95, worst
    assert worst["weights"] < 5e-2, worst
    assert worst["grad"] > 1e-4, worst  # autocast really ran in bf16


@pytest.mark.parametrize("seed", SEEDS)
def test_channels_last_step_agrees_with_the_default_layout(seed: int) -> None:
    worst = _compare(ForwardOptions(channels_last=True), seed)
    assert worst["loss"] < 2e-4, worst
    assert worst["grad"] < 5e-4, worst
    assert worst["weights"] < 1e-2, worst
    step = one_step(ForwardOptions(channels_last=True), seed)["step"]
    convs = [m for m in step.generator.modules() if isinstance(m, torch.nn.Conv3d)]
    assert convs and all(
        c.weight.is_contiguous(memory_format=torch.channels_last_3d) for c in convs
    )


def test_default_options_change_nothing() -> None:
    first, second = one_step(ForwardOptions(), 1), one_step(ForwardOptions(), 1)
    assert first["losses"] == second["losses"]
    assert all(torch.equal(first["after"][k], second["after"][k]) for k in ("G", "D"))


def test_loss_terms_are_float32_when_heads_come_out_in_bf16() -> None:
    outputs = {
        "real_fake": torch.zeros(4, dtype=torch.bfloat16),
        "energy": torch.full((4,), 0.5, dtype=torch.bfloat16),
    }
    targets = {"energy": torch.full((4,), 0.5)}
    total, parts = gan_loss(outputs, torch.ones(4), targets, LossWeights())
    assert total.dtype == torch.float32
    assert all(value.dtype == torch.float32 for value in parts.values())


def test_compile_falls_back_to_eager_with_one_line_when_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("no C++ compiler found\nmore detail")

    monkeypatch.setattr(torch, "compile", broken)
    monkeypatch.setattr(precision_module, "cpu_has_amx_bf16", lambda: False)
    assert compile_problem() == "RuntimeError: no C++ compiler found"
    settings = load_config(TINY, ["trainer.compile=true"]).trainer
    options, hints = forward_options(settings, "cpu", MPI.COMM_SELF)
    assert options == ForwardOptions(compile=False)
    assert hints == [
        "trainer.compile = true but torch.compile does not work here (RuntimeError: no C++ "
        "compiler found); G and D run eagerly"
    ]


def test_amx_flag_is_read_from_the_cpu_flags_line(tmp_path: Path) -> None:
    elsewhere = tmp_path / "amx-named-outside-flags"
    elsewhere.write_text("model name\t: Xeon amx_bf16\nflags\t\t: fpu sse2 amx_tile amx_int8\n")
    amx = tmp_path / "amx"
    amx.write_text("model name\t: Xeon\nflags\t\t: fpu sse2 amx_bf16 amx_tile amx_int8\n")
    assert not cpu_has_amx_bf16(elsewhere)
    assert cpu_has_amx_bf16(amx)
    assert not cpu_has_amx_bf16(tmp_path / "unreadable")


AMX_HINT = (
    "this CPU has AMX bf16 tiles: trainer.precision: bf16 trains 1.7-2.7x faster, to the same "
    "validation score within seed noise (docs/explanation/parallel.md)"
)


@pytest.mark.parametrize(("precision", "said"), [("float32", True), ("bf16", False)])
def test_float32_on_an_amx_cpu_hints_bf16(
    monkeypatch: pytest.MonkeyPatch, precision: str, said: bool
) -> None:
    monkeypatch.setattr(precision_module, "cpu_has_amx_bf16", lambda: True)
    settings = load_config(TINY, [f"trainer.precision={precision}"]).trainer
    _, hints = forward_options(settings, "cpu", MPI.COMM_SELF)
    assert hints == ([AMX_HINT] if said else [])


def test_a_training_hints_once_per_process_and_never_before_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The AMX query answers yes here whatever this CPU has: a refused opening says no hint,
    and two trainings in one process (a search's members) say it once, through logging."""
    monkeypatch.setattr(precision_module, "cpu_has_amx_bf16", lambda: True)
    monkeypatch.setattr(logs, "_said", set())
    config = load_config(TINY)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("someone else's run\n")
    with pytest.raises(EvoganError, match="already exists and is not empty"):
        GanTrainer.open(config, taken, world=MPI.COMM_SELF)
    assert [r for r in caplog.records if getattr(r, "label", None) == "hint"] == []
    for member in range(2):
        with GanTrainer.open(config, tmp_path / f"member-{member}", world=MPI.COMM_SELF) as trainer:
            trainer.train(0)
    said = [r for r in caplog.records if "AMX" in r.getMessage()]
    assert [(r.name, r.levelname, r.label, r.getMessage()) for r in said] == [
        ("evogan", "WARNING", "hint", AMX_HINT)
    ]


@pytest.mark.slow
def test_a_bf16_channels_last_training_runs_and_records_its_options(tmp_path: Path) -> None:
    overrides = ["trainer.precision=bf16", "trainer.channels_last=true"]
    overrides += ["trainer.epochs=1", "trainer.steps_per_epoch=2"]
    config = load_config(TINY, overrides)
    run = train_gan3d(config, tmp_path / "run", world=MPI.COMM_SELF, signals=False)
    manifest = json.loads(run.file("manifest.json").read_text())
    assert (manifest["precision"], manifest["channels_last"], manifest["compile"]) == (
        "bf16",
        True,
        False,
    )
    weights, _ = load_weights(run.file("last_model.h5"))
    assert all(torch.isfinite(t).all() for t in weights.values())
    summary = json.loads(run.file("summary.json").read_text())
    assert all(v == v for v in summary["final"].values())  # no NaN loss
