"""When the ranks of a GAN training stop, checkpoint or validate: together, at one point.

A stop (SIGTERM/SIGINT on any rank) is agreed with :class:`StopAgreement`. In ``sync`` mode
the agreement is a blocking round after every step, so all ranks stop at the same step, and
rank 0 puts its due timers (``checkpoint.every_seconds``, ``trainer.validate_every_seconds``)
into the same round's value: every rank learns them at the same step at no extra cost. In
``arar`` mode rounds never block a step; a rank acts on a stop when its round settles (its own
step), and ranks line up at the epoch end (``finish``), where rank 0's due timers are shared.
"""

from __future__ import annotations

import math
import time
from typing import Any

from evogan.distributed.signals import StopAgreement, StopFlag

CHECKPOINT = 1
VALIDATE = 2


class Cadence:
    """Stop agreement plus rank 0's wall-clock timers, decided the same way on every rank.

    ``lockstep``: the ranks agree after every step (sync mode); otherwise without waiting."""

    def __init__(
        self,
        world: Any,
        flag: StopFlag,
        lockstep: bool,
        checkpoint_seconds: float | None,
        validate_seconds: float | None,
    ) -> None:
        self.world = world
        self.sync = lockstep
        self.agreement = StopAgreement(world, flag, "sync" if self.sync else "async")
        self.lead = world.rank == 0
        self.every = {CHECKPOINT: checkpoint_seconds or None, VALIDATE: validate_seconds}
        now = time.monotonic()
        self.last = dict.fromkeys(self.every, now)

    def done(self, action: int) -> None:
        """A checkpoint or validation just happened (for any reason): restart its timer."""
        self.last[action] = time.monotonic()

    def _due(self) -> int:
        now = time.monotonic()
        return sum(a for a, every in self.every.items() if every and now - self.last[a] >= every)

    def after_step(self) -> tuple[bool, int]:
        """Once per step: (stop agreed, actions due now as CHECKPOINT | VALIDATE bits)."""
        if self.lead:
            due = self._due()
            self.agreement.value = float(due) if due and self.sync else math.inf
        stop = self.agreement.poll()
        if not self.sync:
            return stop, 0
        value = self.agreement.global_value
        return stop, int(value) if math.isfinite(value) else 0

    def epoch_end(self) -> tuple[bool, int]:
        """At the end of every epoch (collective): (stop agreed, actions due)."""
        if self.sync:
            return self.agreement.stopped, 0
        if self.agreement.finish():
            return True, 0
        return False, self.world.bcast(self._due() if self.lead else 0, root=0)

    @property
    def signal_name(self) -> str:
        return self.agreement.flag.signal_name or "a signal on another rank"

    def close(self) -> None:
        self.agreement.close()
