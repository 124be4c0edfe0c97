"""RMSprop, the optimiser of every gradient method in evogan (3DGAN, regressor baseline, hybrid),
and Adam, the optimiser of the CaloChallenge classifier metric.

Each computes exactly what its ``torch.optim`` namesake computes (RMSprop without momentum or
centring, Adam without weight decay or AMSGrad): the same operations in the same order, so the
same bits. RMSprop keeps torch's ``state_dict`` layout and ``param_groups``. They exist because
any ``torch.optim`` optimiser imports torch's compiler stack (``torch._dynamo``, about 900
modules) on its first call: 2-3 s of start-up on every training rank and every ``validate``,
and a burst of file-system lookups per rank on a cluster's shared file system, for work that
compiles nothing. The updates run as ``torch._foreach_*`` operations: one multi-tensor kernel
per operation on a GPU, as torch's own default there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


class _Optimiser:
    """One parameter group of ``params`` with ``settings``, and per parameter a step count and
    one zero-initialised tensor like it per name in ``SLOTS``."""

    SLOTS: tuple[str, ...] = ()

    def __init__(self, params: Iterable[torch.Tensor], **settings: Any) -> None:
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__} got no parameters to optimise")
        self.param_groups: list[dict[str, Any]] = [{"params": params, **settings}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if set_to_none:
                    param.grad = None
                else:
                    param.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                grads = [p.grad for p in params]
                self._update(group, params, grads, [self._slots(p) for p in params])

    def _update(
        self,
        group: dict[str, Any],
        params: list[torch.Tensor],
        grads: list[torch.Tensor],
        slots: list[dict[str, torch.Tensor]],
    ) -> None:
        """One step of the parameters of ``group`` that have a gradient, in place."""
        raise NotImplementedError

    def _slots(self, param: torch.Tensor) -> dict[str, torch.Tensor]:
        slots = self.state.get(param)
        if slots is None:
            slots = {"step": torch.zeros((), dtype=torch.float32)}
            for name in self.SLOTS:
                slots[name] = torch.zeros_like(param, memory_format=torch.preserve_format)
            self.state[param] = slots
        return slots


class RMSprop(_Optimiser):
    """``param <- param - lr * grad / (sqrt(v) + eps)`` with ``v <- alpha v + (1 - alpha) grad^2``
    per element; parameters without a gradient are skipped, as torch does."""

    SLOTS = ("square_avg",)

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
    ) -> None:
        if lr < 0 or eps < 0 or not 0 <= alpha <= 1:
            raise ValueError(f"RMSprop needs lr >= 0, eps >= 0, 0 <= alpha <= 1: {lr, eps, alpha}")
        super().__init__(params, lr=lr, alpha=alpha, eps=eps)

    def _update(self, group, params, grads, slots) -> None:
        torch._foreach_add_([s["step"] for s in slots], 1)
        averages = [s["square_avg"] for s in slots]
        torch._foreach_mul_(averages, group["alpha"])
        torch._foreach_addcmul_(averages, grads, grads, value=1 - group["alpha"])
        denominators = torch._foreach_sqrt(averages)
        torch._foreach_add_(denominators, group["eps"])
        torch._foreach_addcdiv_(params, grads, denominators, value=-group["lr"])

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: slots}, "param_groups": [...]}`` with parameters as indices in
        order, as ``torch.optim`` writes it."""
        groups, state, index = [], {}, 0
        for group in self.param_groups:
            indices = list(range(index, index + len(group["params"])))
            for position, param in zip(indices, group["params"], strict=True):
                if param in self.state:
                    state[position] = dict(self.state[param])
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": indices})
            index += len(indices)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` gave (copies: the saved tensors stay the caller's)."""
        groups = saved["param_groups"]
        if len(groups) != len(self.param_groups) or any(
            len(g["params"]) != len(own["params"])
            for g, own in zip(groups, self.param_groups, strict=True)
        ):
            raise ValueError("the saved optimiser state belongs to other parameters")
        self.state = {}
        for own, group in zip(self.param_groups, groups, strict=True):
            own.update({k: v for k, v in group.items() if k in ("lr", "alpha", "eps")})
            for param, position in zip(own["params"], group["params"], strict=True):
                slots = saved["state"].get(position)
                if slots is not None:
                    self.state[param] = {
                        "step": torch.as_tensor(slots["step"], dtype=torch.float32).clone(),
                        "square_avg": torch.as_tensor(slots["square_avg"])
                        .to(param.device, param.dtype)
                        .clone(),
                    }


class Adam(_Optimiser):
    """``param <- param - lr * m_hat / (sqrt(v_hat) + eps)`` with the bias-corrected moving
    averages ``m <- lerp(m, grad, 1 - beta1)`` and ``v <- beta2 v + (1 - beta2) grad^2``;
    parameters without a gradient are skipped, as torch does."""

    SLOTS = ("exp_avg", "exp_avg_sq")

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        if lr < 0 or eps < 0 or not all(0 <= beta < 1 for beta in betas):
            raise ValueError(f"Adam needs lr >= 0, eps >= 0, 0 <= betas < 1: {lr, eps, betas}")
        super().__init__(params, lr=lr, betas=betas, eps=eps)

    def _update(self, group, params, grads, slots) -> None:
        (beta1, beta2), steps = group["betas"], [s["step"] for s in slots]
        torch._foreach_add_(steps, 1)
        averages, squares = [s["exp_avg"] for s in slots], [s["exp_avg_sq"] for s in slots]
        torch._foreach_lerp_(averages, grads, 1 - beta1)
        torch._foreach_mul_(squares, beta2)
        torch._foreach_addcmul_(squares, grads, grads, value=1 - beta2)
        counts = [float(step) for step in steps]
        step_sizes = [-(group["lr"] / (1 - beta1**n)) for n in counts]
        denominators = torch._foreach_sqrt(squares)
        torch._foreach_div_(denominators, [(1 - beta2**n) ** 0.5 for n in counts])
        torch._foreach_add_(denominators, group["eps"])
        torch._foreach_addcdiv_(params, averages, denominators, step_sizes)
