"""The fused C evaluation kernel equals the network, and the torch path takes over without it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import torch

from evogan import logs, native
from evogan.config.regressor import RegressorModelConfig
from evogan.regressor import fused_eval
from evogan.regressor.network import (
    RegressorLayout,
    RegressorNet,
    batched_features,
    batched_predict,
    evaluation_path,
    pooled_features,
    unflatten,
)

needs_compiler = pytest.mark.skipif(native.compiler() is None, reason="no C compiler ($CC or cc)")
FUSED, TORCH = "fused C kernel", "torch im2col + matmul"
LAYOUTS = [  # (input shape, model options): 2 x 2 pooling (sums in registers) and other
    ((1, 51, 25), {}),  # pooling (sums in memory), rows that fill vectors and rows padded
    ((1, 51, 25), {"bias": False}),
    ((1, 51, 25), {"pool": 3, "kernel": 3, "filters": 4}),
    ((2, 19, 14), {"pool": 4, "kernel": 4, "filters": 5}),
    ((1, 9, 45), {}),  # a CaloChallenge dataset-2 image: 9 radial bins x 45 layers
]


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
@pytest.mark.parametrize(("input_shape", "options"), LAYOUTS)
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


def test_without_a_compiler_one_hint_and_the_torch_path(fresh_kernel, monkeypatch, caplog) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(logs, "_said", set())
    layout = _layout()
    weights, x = _draw(layout, 3, 6)
    assert evaluation_path(layout, weights, x) == TORCH
    assert fused_eval.kernel() is None  # cached: no second hint, no second try
    (said,) = [r for r in caplog.records if getattr(r, "label", None) == "hint"]
    assert said.getMessage().startswith("no C compiler found (CC='/nonexistent/cc')")
    expected = _each_network(layout, weights, x)
    torch.testing.assert_close(batched_predict(layout, weights, x), expected, rtol=1e-4, atol=1e-5)


def test_failed_build_warns_and_leaves_no_file(fresh_kernel, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CC", "false")
    monkeypatch.setenv("EVOGAN_KERNEL_DIR", str(tmp_path / "kernels"))
    with pytest.warns(RuntimeWarning, match="cannot build the fused evaluation kernel"):
        assert fused_eval.kernel() is None
    assert list((tmp_path / "kernels").iterdir()) == []


def test_native_switch_off_is_silent(fresh_kernel, monkeypatch, recwarn, caplog) -> None:
    monkeypatch.setenv("EVOGAN_NATIVE", "0")
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(logs, "_said", set())
    assert fused_eval.kernel() is None
    assert evaluation_path(_layout(), *_draw(_layout(), 1, 1)) == TORCH
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    assert not caplog.records


@needs_compiler
@pytest.mark.parametrize("kernel_dir", [None, "elsewhere"])
def test_build_lands_in_the_kernel_dir_under_a_keyed_name(
    fresh_kernel, monkeypatch, tmp_path, kernel_dir
) -> None:
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path / "cache"))
    if kernel_dir is None:  # the default: kernels/ in the data cache
        monkeypatch.delenv("EVOGAN_KERNEL_DIR", raising=False)
        folder = tmp_path / "cache" / "kernels"
    else:
        monkeypatch.setenv("EVOGAN_KERNEL_DIR", str(tmp_path / kernel_dir))
        folder = tmp_path / kernel_dir
    assert fused_eval.kernel() is not None
    built = sorted(p.name for p in folder.iterdir())
    assert len(built) == 1 and built[0].startswith("fused_eval-") and built[0].endswith(".so")
    assert not (tmp_path / "cache").exists() or kernel_dir is None


@needs_compiler
def test_fused_sums_rejects_unpadded_or_mismatched_tables() -> None:
    layout = _layout()
    positions, cells, taps = fused_eval.offsets(
        layout.input_shape, layout.kernel, layout.pool, layout.pooled_shape
    )
    assert positions.shape[0] % fused_eval.POSITION_BLOCK == 0
    x = torch.rand(2, *layout.input_shape)
    weight, bias = torch.zeros(taps.shape[0], 16), torch.zeros(16)
    pooled = layout.pooled_shape[0] * layout.pooled_shape[1]
    tail, vector = torch.zeros(3, pooled, 8), torch.tensor([0, 1, 1], dtype=torch.int32)
    tables = (positions, cells, taps)

    def call(x=x, weight=weight, bias=bias, tail=tail, vector=vector, cells=cells):
        return fused_eval.fused_sums(x, weight, bias, positions, cells, taps, tail, vector)

    with pytest.raises(ValueError, match="must be padded"):
        call(weight=weight[:, :12], bias=bias[:12])
    with pytest.raises(ValueError, match="inconsistent shapes"):
        call(tail=tail[:, :, :4])
    with pytest.raises(ValueError, match="inconsistent shapes"):
        call(cells=cells[:-12])
    with pytest.raises(ValueError, match="float32 CPU"):
        call(x=x.double())
    with pytest.raises(ValueError, match="reach beyond an event"):
        call(x=x[:, :, :40])
    with pytest.raises(ValueError, match="pooling cells must lie in"):
        call(cells=cells + 1)
    with pytest.raises(ValueError, match="tail vectors must be ascending and below 2"):
        call(vector=torch.tensor([1, 0, 1], dtype=torch.int32))
    with pytest.raises(ValueError, match="tail vectors must be ascending and below 2"):
        call(vector=torch.tensor([0, 1, 2], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"cell_out must be contiguous float32 \(2, 16, "):
        fused_eval.fused_sums(
            x, weight, bias, *tables, tail, vector, cell_out=torch.zeros(2, pooled, 16)
        )
    assert all(t.dtype == torch.int32 for t in tables)
    assert torch.equal(call(), torch.zeros(2, 3, 8))


@needs_compiler
@pytest.mark.parametrize(("input_shape", "options"), LAYOUTS)
@pytest.mark.parametrize("genomes", [1, 3])
def test_kernel_features_match_each_network(input_shape, options, genomes) -> None:
    """The pooled features a readout is fitted on: every candidate's, as its own network
    computes them, with the same bits alone as next to other candidates."""
    layout = _layout(input_shape, **options)
    weights, x = _draw(layout, genomes, 6, seed=3)
    with torch.no_grad():
        expected = torch.stack([pooled_features(layout, genome, x) for genome in weights])
    features = batched_features(layout, weights, x)
    assert evaluation_path(layout, weights, x) == FUSED
    assert features.shape == (genomes, 6, layout.features)
    torch.testing.assert_close(features, expected, rtol=1e-5, atol=1e-6)
    assert torch.equal(batched_features(layout, weights[-1:], x)[0], features[-1])


@needs_compiler
@pytest.mark.parametrize("options", [{}, {"pool": 3, "kernel": 3, "filters": 5}])
def test_children_sharing_their_elites_filters_score_as_alone(options) -> None:
    """A child scored after its elite reuses the elite's filters it did not change; its
    prediction is the network's and has the bits it has when scored alone or in any slice
    (2 x 2 pooling sums a cell in registers, other pooling in memory)."""
    from evogan.engine.operators import point_mutation

    layout = _layout(**options)
    weights, x = _draw(layout, 1, 24, seed=11)
    x = x**8 * 3
    for rate in (0.002, 0.01, 0.1):
        children = point_mutation(weights[0], 8, rate, 0.1, 7, None)
        candidates = torch.cat([weights, children])
        whole = batched_predict(layout, candidates, x)
        expected = _each_network(layout, candidates, x)
        torch.testing.assert_close(whole, expected, rtol=1e-4, atol=1e-5)
        for k in range(9):
            assert torch.equal(batched_predict(layout, candidates[k : k + 1], x), whole[k : k + 1])
        assert torch.equal(batched_predict(layout, candidates[3:], x), whole[3:])
        assert torch.equal(batched_predict(layout, candidates.flip(0), x), whole.flip(0))


def _has_avx512() -> bool:
    try:
        return " avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@needs_compiler
@pytest.mark.skipif(not _has_avx512(), reason="the CPU has no AVX-512: one build only")
def test_avx512_blocks_give_the_avx2_bits(fresh_kernel, monkeypatch, tmp_path) -> None:
    """Nodes of one allocation may differ in AVX-512: an island's migrants and a resumed run
    must score the same there. The wide register blocks change no lane's arithmetic."""
    from evogan.engine.operators import point_mutation

    layout = _layout()
    weights, x = _draw(layout, 6, 40, seed=2)
    x = x**8 * 3
    candidates = torch.cat([weights, point_mutation(weights[0], 8, 0.01, 0.1, 7, None)])
    monkeypatch.setenv("EVOGAN_KERNEL_DIR", str(tmp_path / "kernels"))
    results = []
    for extra in ([], ["-mno-avx512f"]):
        monkeypatch.setenv("CC", shlex.join([*native.compiler(), *extra]))
        fused_eval.kernel.cache_clear()
        results.append(
            (batched_predict(layout, candidates, x), batched_features(layout, weights, x))
        )
    assert len(list((tmp_path / "kernels").iterdir())) == 2  # two builds, not one reused
    (wide, wide_features), (narrow, narrow_features) = results
    assert torch.equal(wide, narrow)
    assert torch.equal(wide_features, narrow_features)


def test_input_of_another_shape_is_refused_before_any_kernel_runs() -> None:
    layout = _layout()
    weights, x = _draw(layout, 2, 3)
    with pytest.raises(ValueError, match=r"x must be \(B, 1, 51, 25\)"):
        batched_predict(layout, weights, x[:, :, :-1])


@needs_compiler
def test_kernel_sums_equal_torch_path_sums_per_filter() -> None:
    """The two paths agree filter by filter, not only after the sum over filters."""
    from evogan.regressor.patches import torch_filter_sums

    layout = _layout()
    weights, x = _draw(layout, 9, 5, seed=7)
    views = unflatten(layout, weights)
    rows = torch.tensor([4, 0, 2, 4])
    with torch.no_grad():
        fused = fused_eval.filter_sums(views, x, layout.pool, None)
        reference = torch_filter_sums(layout, views, x, chunk=4)
        picked = fused_eval.filter_sums(
            views, x, layout.pool, rows
        )  # events read in place by index
    torch.testing.assert_close(fused, reference, rtol=1e-4, atol=1e-5)
    assert torch.equal(picked, fused[:, rows])
    with pytest.raises(ValueError, match="event index reaches outside the 5 events"):
        fused_eval.filter_sums(views, x, layout.pool, torch.tensor([5]))


@pytest.mark.parametrize("native", ["1", "0"])
def test_no_candidates_or_no_events_give_empty_predictions(
    native, fresh_kernel, monkeypatch
) -> None:
    """An island rank whose share of a re-evaluated pair is empty scores nothing, on any path."""
    monkeypatch.setenv("EVOGAN_NATIVE", native)
    layout = _layout()
    weights, x = _draw(layout, 2, 5)
    assert batched_predict(layout, weights[:0], x).shape == (0, 5)
    assert batched_predict(layout, weights, x[:0]).shape == (2, 0)
