"""RMSprop, the optimiser of every gradient method in evogan (3DGAN, regressor baseline, hybrid).

It computes exactly what ``torch.optim.RMSprop`` computes without momentum or centring (the
same operations in the same order, so the same bits), and keeps the same ``state_dict`` layout
and ``param_groups``. It exists because any ``torch.optim`` optimiser imports torch's compiler
stack (``torch._dynamo``, about 900 modules) on its first call: 2-3 s of start-up on every
training rank and a burst of file-system lookups per rank on a cluster's shared file system,
for a training that compiles nothing. The update runs as ``torch._foreach_*`` operations: one
multi-tensor kernel per operation on a GPU, as torch's own default there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


class RMSprop:
    """``param <- param - lr * grad / (sqrt(v) + eps)`` with ``v <- alpha v + (1 - alpha) grad^2``
    per element; parameters without a gradient are skipped, as torch does."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
    ) -> None:
        if lr < 0 or eps < 0 or not 0 <= alpha <= 1:
            raise ValueError(f"RMSprop needs lr >= 0, eps >= 0, 0 <= alpha <= 1: {lr, eps, alpha}")
        params = list(params)
        if not params:
            raise ValueError("RMSprop got no parameters to optimise")
        self.param_groups: list[dict[str, Any]] = [
            {"params": params, "lr": lr, "alpha": alpha, "eps": eps}
        ]
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
            if not params:
                continue
            grads = [p.grad for p in params]
            slots = [self._slots(p) for p in params]
            torch._foreach_add_([s["step"] for s in slots], 1)
            averages = [s["square_avg"] for s in slots]
            torch._foreach_mul_(averages, group["alpha"])
            torch._foreach_addcmul_(averages, grads, grads, value=1 - group["alpha"])
            denominators = torch._foreach_sqrt(averages)
            torch._foreach_add_(denominators, group["eps"])
            torch._foreach_addcdiv_(params, grads, denominators, value=-group["lr"])

    def _slots(self, param: torch.Tensor) -> dict[str, torch.Tensor]:
        slots = self.state.get(param)
        if slots is None:
            slots = {
                "step": torch.zeros((), dtype=torch.float32),
                "square_avg": torch.zeros_like(param, memory_format=torch.preserve_format),
            }
            self.state[param] = slots
        return slots

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
