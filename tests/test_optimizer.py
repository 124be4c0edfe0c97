"""evogan's RMSprop and Adam give their torch.optim namesakes' bits, RMSprop keeps torch's
state layout, and neither starts the compiler stack."""

from __future__ import annotations

import copy

import pytest
import torch

from evogan.optimizer import Adam, RMSprop
from tests.conftest import imported_by


def _params(seed: int) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(3, 4, 5), (7,), (2, 2)]
    return [torch.nn.Parameter(torch.randn(s, generator=generator)) for s in shapes]


def _grads(params: list[torch.nn.Parameter], step: int) -> None:
    generator = torch.Generator().manual_seed(100 + step)
    for index, param in enumerate(params):
        # the last parameter gets no gradient on odd steps: it must be left alone then
        if index == len(params) - 1 and step % 2:
            param.grad = None
        else:
            param.grad = torch.randn(param.shape, generator=generator) * 10.0 ** (index - 1)


@pytest.mark.parametrize(("lr", "alpha", "eps"), [(1e-3, 0.99, 1e-8), (2e-2, 0.9, 1e-6)])
def test_steps_equal_torch_bit_for_bit_with_a_changed_learning_rate(lr, alpha, eps) -> None:
    ours, theirs = _params(0), _params(0)
    mine = RMSprop(ours, lr=lr, alpha=alpha, eps=eps)
    reference = torch.optim.RMSprop(theirs, lr=lr, alpha=alpha, eps=eps)
    for step in range(6):
        if step == 3:  # a learning-rate decay sets the groups' lr, as the 3DGAN trainer does
            for optimizer in (mine, reference):
                optimizer.param_groups[0]["lr"] = lr / 4
        for params, optimizer in ((ours, mine), (theirs, reference)):
            _grads(params, step)
            optimizer.step()
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a, b), step
    ours_state, theirs_state = mine.state_dict(), reference.state_dict()
    assert ours_state["state"].keys() == theirs_state["state"].keys() == {0, 1, 2}
    for index, slots in theirs_state["state"].items():
        assert ours_state["state"][index].keys() == slots.keys()
        for key, value in slots.items():
            assert torch.equal(ours_state["state"][index][key], value), (index, key)
    (group,) = ours_state["param_groups"]
    assert group["params"] == [0, 1, 2] and group["lr"] == lr / 4


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize(
    ("lr", "betas", "eps"), [(1e-3, (0.9, 0.999), 1e-8), (3e-2, (0.5, 0.9), 1e-6)]
)
def test_adam_steps_equal_torch_bit_for_bit(lr, betas, eps, foreach) -> None:
    """Against torch's per-tensor loop (its CPU default) and its multi-tensor path."""
    ours, theirs = _params(4), _params(4)
    mine = Adam(ours, lr=lr, betas=betas, eps=eps)
    reference = torch.optim.Adam(theirs, lr=lr, betas=betas, eps=eps, foreach=foreach)
    for step in range(6):
        for params, optimizer in ((ours, mine), (theirs, reference)):
            _grads(params, step)
            optimizer.step()
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a, b), step
    for index, param in enumerate(theirs):
        for key, value in reference.state[param].items():
            assert torch.equal(mine.state[ours[index]][key], value), (index, key)


def test_a_restored_state_continues_exactly_and_torchs_state_loads() -> None:
    params = _params(1)
    optimizer = RMSprop(params, lr=1e-2)
    for step in range(3):
        _grads(params, step)
        optimizer.step()
    saved = copy.deepcopy(optimizer.state_dict())
    copies = [p.detach().clone().requires_grad_() for p in params]
    restored = RMSprop(copies, lr=5.0)
    restored.load_state_dict(saved)
    assert restored.param_groups[0]["lr"] == 1e-2
    for step in range(3, 6):
        for group, opt in ((params, optimizer), (copies, restored)):
            _grads(group, step)
            opt.step()
    assert all(torch.equal(a, b) for a, b in zip(params, copies, strict=True))
    # the saved tensors stay the caller's: stepping the restored optimiser did not move them
    assert saved["state"][0]["step"].item() == 3.0

    theirs = _params(2)
    reference = torch.optim.RMSprop(theirs, lr=1e-2)
    _grads(theirs, 0)
    reference.step()
    ours = [p.detach().clone().requires_grad_() for p in theirs]
    loaded = RMSprop(ours, lr=1e-2)
    loaded.load_state_dict(reference.state_dict())
    for group, opt in ((theirs, reference), (ours, loaded)):
        _grads(group, 2)
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(theirs, ours, strict=True))


def test_zero_grad_and_refusals() -> None:
    params = _params(3)
    optimizer = RMSprop(params)
    _grads(params, 0)
    optimizer.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in params)
    optimizer.zero_grad()
    assert all(p.grad is None for p in params)
    with pytest.raises(ValueError, match="no parameters"):
        RMSprop([])
    with pytest.raises(ValueError, match="alpha"):
        RMSprop(params, alpha=1.5)
    with pytest.raises(ValueError, match="other parameters"):
        RMSprop(params[:2]).load_state_dict(optimizer.state_dict())
    with pytest.raises(ValueError, match="no parameters"):
        Adam([])
    with pytest.raises(ValueError, match="betas"):
        Adam(params, betas=(0.9, 1.0))


@pytest.mark.slow
def test_a_training_step_imports_no_compiler_stack() -> None:
    code = (
        "import torch\n"
        "from evogan.optimizer import Adam, RMSprop\n"
        "p = torch.nn.Parameter(torch.ones(3)); o = RMSprop([p]); a = Adam([p])\n"
        "(p * p).sum().backward(); o.step(); a.step(); o.zero_grad(); o.state_dict()\n"
    )
    assert not imported_by(code, "torch._dynamo")
