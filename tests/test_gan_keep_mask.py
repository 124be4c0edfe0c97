"""Dropout keep-masks on the CPU from the C kernel (evogan.gan3d.kernels.dropout_mask): the counter
hash that compiled dropout uses, on any number of threads, and torch's draw where no kernel can be
had."""

from __future__ import annotations

import ctypes

import pytest
import torch

from evogan import logs, native
from evogan.gan3d.kernels import dropout_mask
from evogan.gan3d.kernels.dropout_mask import keep_mask
from evogan.gan3d.model.blocks import MASK32, SeededDropout, counter_uniform, draw_key

needs_compiler = pytest.mark.skipif(native.compiler() is None, reason="no C compiler ($CC or cc)")
SHAPES = [(3, 5, 7), (2, 4, 13, 13, 7), (70_001,), (0, 3)]


@pytest.fixture
def fresh_kernel():
    """Forget the loaded kernel before and after, so environment changes take effect."""
    dropout_mask.kernel.cache_clear()
    yield
    dropout_mask.kernel.cache_clear()


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@needs_compiler
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("p", [0.2, 1 / 3, 0.5, 0.0, 0.999])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_mask_is_the_compiled_hash_on_any_thread_count(shape, p, threads, restore_threads) -> None:
    torch.set_num_threads(threads)
    shape = torch.Size(shape)
    for key in (0, 12345, MASK32):
        expected = counter_uniform(torch.tensor(key), shape, torch.device("cpu")) >= p
        assert torch.equal(keep_mask(key, shape, p), expected), key


@needs_compiler
def test_kernel_refuses_arguments_out_of_range() -> None:
    library = dropout_mask.kernel()
    keep = torch.empty(8, dtype=torch.bool)
    good = (keep.data_ptr(), 8, 1, 2**23)
    assert library.evogan_keep_mask(*good, 1) == 0
    assert library.evogan_keep_mask(*good, 0) == -1  # no thread
    assert library.evogan_keep_mask(keep.data_ptr(), 8, 2**32, 2**23, 1) == -1  # key > 32 bits
    assert library.evogan_keep_mask(keep.data_ptr(), 8, 1, 2**24 + 1, 1) == -1  # threshold
    assert library.evogan_keep_mask(ctypes.c_void_p(keep.data_ptr()), -1, 1, 2**23, 1) == -1


def _dropout(seed: int, p: float = 0.2) -> SeededDropout:
    module = SeededDropout(p)
    module.generator = torch.Generator().manual_seed(seed)
    return module


@needs_compiler
def test_eager_dropout_on_the_cpu_hashes_one_key_drawn_from_its_stream() -> None:
    x = torch.rand(4, 3, 9, 9, 5) + 0.5  # no zeros: a zero in the output means dropped
    module = _dropout(seed=3)
    stream = torch.Generator().manual_seed(3)
    for _ in range(2):  # each call draws a new key
        key = int(draw_key(stream))
        keep = counter_uniform(torch.tensor(key), x.shape, torch.device("cpu")) >= module.p
        torch.testing.assert_close(module(x), torch.where(keep, x / (1 - module.p), 0.0))
    assert torch.equal(module.generator.get_state(), stream.get_state())
    assert torch.equal(_dropout(seed=3)(x), _dropout(seed=3)(x))
    assert not torch.equal(_dropout(seed=3)(x), _dropout(seed=4)(x))
    module.eval()
    assert module(x) is x


@needs_compiler
def test_bf16_activations_keep_their_dtype_and_gradient_is_the_mask() -> None:
    x = (torch.rand(2, 3, 8, 8, 4) + 0.5).to(torch.bfloat16).requires_grad_()
    y = _dropout(seed=0, p=0.5)(x)
    assert y.dtype == torch.bfloat16
    y.sum().backward()
    assert torch.equal(x.grad, torch.where(y != 0, 2.0, 0.0).to(torch.bfloat16))


def test_without_a_compiler_torch_draws_from_the_key_and_the_stream_moves_on_alike(
    fresh_kernel, monkeypatch, caplog
) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(logs, "_said", set())
    x = torch.ones(200_000)
    module = _dropout(seed=1)
    y = module(x)
    (said,) = [r for r in caplog.records if getattr(r, "label", None) == "hint"]
    assert "3DGAN dropout masks on the CPU are drawn by torch" in said.getMessage()
    stream = torch.Generator().manual_seed(1)
    key = int(draw_key(stream))
    keep = torch.rand(x.shape, generator=torch.Generator().manual_seed(key)) >= module.p
    assert torch.equal(y, torch.where(keep, x / (1 - module.p), 0.0))
    assert torch.equal(module.generator.get_state(), stream.get_state())
    sigma = (0.2 * 0.8 / x.numel()) ** 0.5
    assert abs((y == 0).float().mean().item() - 0.2) < 5 * sigma
