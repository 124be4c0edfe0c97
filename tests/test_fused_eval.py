"""The fused C evaluation kernel equals the network, and the torch path takes over without it."""

from __future__ import annotations

import pytest
import torch

from evogan import native
from evogan.config.regressor import RegressorModelConfig
from evogan.regressor import fused_eval
from evogan.regressor.network import (
    RegressorLayout,
    RegressorNet,
    batched_predict,
    evaluation_path,
    unflatten,
)

needs_compiler = pytest.mark.skipif(native.compiler() is None, reason="no C compiler ($CC or cc)")
FUSED, TORCH = "fused C kernel", "torch im2col + matmul"


def _layout(input_shape=(1, 51, 25), **kwargs) -> RegressorLayout:
    return RegressorLayout.from_config(RegressorModelConfig(**kwargs), input_shape)


def _draw(layout: RegressorLayout, genomes: int, events: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(genomes, layout.size, generator=generator) * 0.2
    x = torch.rand(events, *layout.input_shape, generator=generator)
    return weights, x


def _each_network(layout: RegressorLayout, genomes: torch.Tensor, x: torch.Tensor):
    with torch.no_grad():
        return torch.stack([RegressorNet.from_genome(layout, g)(x) for g in genomes])


@pytest.fixture
def fresh_kernel():
    """Forget the loaded kernel before and after, so environment changes take effect."""
    fused_eval.kernel.cache_clear()
    yield
    fused_eval.kernel.cache_clear()


@needs_compiler
@pytest.mark.parametrize(
    ("input_shape", "options"),
    [
        ((1, 51, 25), {}),
        ((1, 51, 25), {"bias": False}),
        ((1, 51, 25), {"pool": 3, "kernel": 3, "filters": 4}),
        ((2, 19, 14), {"pool": 4, "kernel": 4, "filters": 5}),
    ],
)
@pytest.mark.parametrize(("genomes", "events"), [(1, 7), (9, 13), (3, 1)])
def test_kernel_matches_each_network(input_shape, options, genomes, events) -> None:
    layout = _layout(input_shape, **options)
    weights, x = _draw(layout, genomes, events)
    assert evaluation_path(layout, weights, x) == FUSED
    batched = batched_predict(layout, weights, x)
    assert batched.shape == (genomes, events)
    expected = _each_network(layout, weights, x)
    torch.testing.assert_close(batched, expected, rtol=1e-4, atol=1e-5)
    in_double = batched_predict(layout, weights.double(), x.double())  # the torch path
    torch.testing.assert_close(batched, in_double.float(), rtol=1e-4, atol=1e-5)


@needs_compiler
def test_threads_split_events_without_changing_results() -> None:
    layout = _layout()
    weights, x = _draw(layout, 9, 11, seed=3)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = batched_predict(layout, weights, x)
        torch.set_num_threads(2)
        assert torch.equal(batched_predict(layout, weights, x), single)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("native", ["1", "0"])
def test_a_genome_scores_the_same_bits_whatever_it_is_scored_with(
    native, fresh_kernel, monkeypatch
) -> None:
    """An island's ranks split the candidates into slices of any size: every slice must give
    the bits the whole batch gives (the kernel's block shapes used to round differently)."""
    monkeypatch.setenv("EVOGAN_NATIVE", native)
    layout = _layout()
    weights, x = _draw(layout, 13, 32, seed=5)
    x = x**8 * 3  # sparse, shower-like inputs: the case that exposed the rounding difference
    whole = batched_predict(layout, weights * 3, x, chunk=36 // 13)
    for low in range(13):
        for high in range(low + 1, 14):
            part = batched_predict(layout, weights[low:high] * 3, x, chunk=36 // (high - low))
            assert torch.equal(part, whole[low:high]), (low, high)


def test_torch_path_serves_what_the_kernel_does_not() -> None:
    layout = _layout()
    weights, x = _draw(layout, 2, 5)
    assert evaluation_path(_layout(pooling="max"), weights, x) == TORCH
    assert evaluation_path(layout, weights, x.double()) == TORCH
    assert evaluation_path(layout, weights.requires_grad_(), x) == TORCH  # never detach silently


@needs_compiler
def test_kernel_serves_gradient_free_evaluation_of_trainable_weights() -> None:
    layout = _layout()
    weights, x = _draw(layout, 2, 5)
    weights.requires_grad_()
    with torch.no_grad():
        assert evaluation_path(layout, weights, x) == FUSED
        torch.testing.assert_close(
            batched_predict(layout, weights, x),
            _each_network(layout, weights, x),
            rtol=1e-4,
            atol=1e-5,
        )


def test_without_a_compiler_one_warning_and_the_torch_path(fresh_kernel, monkeypatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    layout = _layout()
    weights, x = _draw(layout, 3, 6)
    with pytest.warns(RuntimeWarning, match="no C compiler found"):
        assert evaluation_path(layout, weights, x) == TORCH
    assert fused_eval.kernel() is None  # cached: no second warning, no second try
    expected = _each_network(layout, weights, x)
    torch.testing.assert_close(batched_predict(layout, weights, x), expected, rtol=1e-4, atol=1e-5)


def test_failed_build_warns_and_leaves_no_file(fresh_kernel, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CC", "false")
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path))
    with pytest.warns(RuntimeWarning, match="cannot build the fused evaluation kernel"):
        assert fused_eval.kernel() is None
    assert list((tmp_path / "kernels").iterdir()) == []


def test_native_switch_off_is_silent(fresh_kernel, monkeypatch, recwarn) -> None:
    monkeypatch.setenv("EVOGAN_NATIVE", "0")
    assert fused_eval.kernel() is None
    assert evaluation_path(_layout(), *_draw(_layout(), 1, 1)) == TORCH
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@needs_compiler
def test_build_lands_in_the_cache_dir_under_a_keyed_name(
    fresh_kernel, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path))
    assert fused_eval.kernel() is not None
    built = sorted(p.name for p in (tmp_path / "kernels").iterdir())
    assert len(built) == 1 and built[0].startswith("fused_eval-") and built[0].endswith(".so")


@needs_compiler
def test_fused_rows_rejects_unpadded_or_mismatched_tables() -> None:
    layout = _layout()
    positions, _, taps = fused_eval.offsets(
        layout.input_shape, layout.kernel, layout.pool, layout.pooled_shape
    )
    assert positions.shape[0] % fused_eval.POSITION_BLOCK == 0
    x = torch.rand(2, *layout.input_shape)
    weight, bias = torch.zeros(taps.shape[0], 16), torch.zeros(16)
    tail = torch.zeros(positions.shape[0], 16)
    with pytest.raises(ValueError, match="must be padded"):
        fused_eval.fused_rows(x, weight[:, :12], bias[:12], tail[:, :12], positions, taps)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        fused_eval.fused_rows(x, weight, bias, tail[:-12], positions, taps)
    with pytest.raises(ValueError, match="float32 CPU"):
        fused_eval.fused_rows(x.double(), weight, bias, tail, positions, taps)
    with pytest.raises(ValueError, match="reach beyond an event"):
        fused_eval.fused_rows(x[:, :, :40], weight, bias, tail, positions, taps)
    sums = fused_eval.fused_rows(x, weight, bias, tail, positions, taps)
    assert torch.equal(sums, torch.zeros(2, 16))


def test_input_of_another_shape_is_refused_before_any_kernel_runs() -> None:
    layout = _layout()
    weights, x = _draw(layout, 2, 3)
    with pytest.raises(ValueError, match=r"x must be \(B, 1, 51, 25\)"):
        batched_predict(layout, weights, x[:, :, :-1])


@needs_compiler
def test_kernel_sums_equal_torch_path_sums_per_filter() -> None:
    """The two paths agree filter by filter, not only after the sum over filters."""
    from evogan.regressor.network import _fused_predict, _torch_predict

    layout = _layout()
    weights, x = _draw(layout, 9, 5, seed=7)
    views = unflatten(layout, weights)
    rows = torch.tensor([4, 0, 2, 4])
    with torch.no_grad():
        fused = _fused_predict(layout, views, x, None)
        reference = _torch_predict(layout, views, x, chunk=4)
        picked = _fused_predict(layout, views, x, rows)  # events read in place by index
    torch.testing.assert_close(fused, reference, rtol=1e-4, atol=1e-5)
    assert torch.equal(picked, fused[:, rows])
    with pytest.raises(ValueError, match="event index reaches outside the 5 events"):
        _fused_predict(layout, views, x, torch.tensor([5]))
