"""One island: any engine strategy, wrapped, with lineages, immigrants, migration, stop
agreement and checkpoints added through the strategy's hook lists.

:class:`Island` registers three hooks: before evaluation it names every candidate by its
:class:`~evogan.islands.lineage.Lineage` (from the strategy's
:attr:`~evogan.engine.loop.Evolution.last_draw`) and lets the immigrants in through the
immigration policy; after selection it keeps the elite's lineage (none once the strategy
refined the elite by gradients: such weights cannot be replayed from seeds); after each step it
migrates, polls the stop agreement, shares both with the island's other ranks and writes
checkpoints. The loop itself stays in :class:`~evogan.engine.loop.Evolution`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from evogan.distributed.signals import StopFlag
from evogan.engine.loop import Evolution
from evogan.engine.problem import GenerationContext
from evogan.engine.records import ChildDraw, EvolutionResult, InitialDraw, Selection
from evogan.islands.codec import Emigrant, Immigrant, MigrantCodec
from evogan.islands.lineage import Lineage
from evogan.islands.migration import Migration, Policy, best_first, compete
from evogan.islands.state import IslandState

POLL_SECONDS = 1.0
"""Least time between two polls of an async stop agreement."""


@dataclass(frozen=True)
class IslandSettings:
    """Where the island stands in the model and how often it talks: migration and the stop
    agreement every ``migrate_every`` generations (``migrants`` of them), a checkpoint every
    ``checkpoint_every`` generations (0: only at the end)."""

    index: int = 0
    count: int = 1
    migrate_every: int = 10
    migrants: int = 1
    checkpoint_every: int = 0


class Island:
    """``strategy`` as one island of a model; see the module docstring.

    ``migration`` is the island leader's :class:`Migration` (None when alone or not leader;
    built with ``codec``'s encode/decode), ``group`` the communicator of the island's ranks
    (None for one rank), ``agreement`` a :class:`~evogan.distributed.signals.StopAgreement`
    (leader only), ``flag`` this rank's stop flag (with a group, a signal on any of the island's
    ranks reaches the leader's agreement) and ``checkpoint`` a callable writing an
    :class:`IslandState` (leader only).
    """

    def __init__(
        self,
        strategy: Evolution,
        settings: IslandSettings | None = None,
        *,
        policy: Policy = compete,
        codec: MigrantCodec | None = None,
        migration: Migration | None = None,
        group: Any = None,
        agreement: Any = None,
        flag: StopFlag | None = None,
        checkpoint: Callable[[IslandState], None] | None = None,
    ) -> None:
        self.strategy = strategy
        self.settings = settings or IslandSettings()
        self.policy = policy
        self.codec = codec or MigrantCodec(strategy.problem)
        self.migration = migration
        self.group = group
        self.agreement = agreement
        self.flag = flag
        self.checkpoint = checkpoint
        self.elite_lineage: Lineage | None = None
        self.immigrants: list[Immigrant] = []
        self.immigrants_used = 0
        self.immigrant_wins = 0
        self.island_seconds = 0.0  # migration, stop agreement and checkpoints
        self.island_cpu_seconds = 0.0  # the same in this process's CPU time
        self.last_checkpoint = -1
        self._lineages: list[Lineage | None] = []
        self._arrived_rows: set[int] = set()
        self._last: tuple[Tensor, Tensor] | None = None
        self._last_poll = -float("inf")
        strategy.before_evaluation.append(self._admit)
        strategy.after_selection.append(self._selected)
        strategy.after_step.append(self._after_step)

    # -- the run --------------------------------------------------------------------------
    def run(self) -> EvolutionResult:
        """The strategy's run, then a last checkpoint (also when the islands agreed to stop:
        see :attr:`stopped`)."""
        result = self.strategy.run()
        self.save_checkpoint()
        return result

    @property
    def stopped(self) -> bool:
        """Whether the run ended because the ranks agreed to stop (a signal)."""
        return self.strategy.stop_requested

    # -- hooks ----------------------------------------------------------------------------
    def _admit(self, candidates: Tensor, context: GenerationContext) -> Tensor:
        """Name the candidates by lineage, then let the immigrants in through the policy
        (before the first selection there is no elite to protect: they join)."""
        del context
        lineages = self._draw_lineages(candidates.shape[0])
        arrived, self.immigrants = self.immigrants, []
        own = candidates.shape[0]
        self._arrived_rows = set()
        if arrived:
            policy = self.policy if self.strategy.elite is not None else compete
            order = policy(list(range(own)), list(range(own, own + len(arrived))))
            pool = torch.cat([candidates, torch.stack([genome for genome, _ in arrived])])
            lineages += [lineage for _, lineage in arrived]
            candidates = pool[torch.tensor(order)]
            lineages = [lineages[row] for row in order]
            self._arrived_rows = {place for place, row in enumerate(order) if row >= own}
            self.immigrants_used += len(self._arrived_rows)
        self._lineages = lineages
        return candidates

    def _draw_lineages(self, rows: int) -> list[Lineage | None]:
        draw = self.strategy.last_draw
        if isinstance(draw, InitialDraw):
            return [Lineage(draw.seed, draw.count, i) for i in range(draw.count)]
        if isinstance(draw, ChildDraw):
            parent = self.elite_lineage
            steps = (draw.key, draw.generation, draw.count)
            drawn = [parent] + [
                None if parent is None else parent.child(*steps, i, draw.rate, draw.power)
                for i in range(draw.count)
            ]
            return drawn + [None] * (rows - len(drawn))  # rows a strategy adds unnamed
        return [None] * rows

    def _selected(self, selection: Selection) -> None:
        best = selection.kept
        self.elite_lineage = None if selection.refined else self._lineages[best]
        self.immigrant_wins += best in self._arrived_rows
        self._last = (selection.candidates, selection.fitness)

    def _after_step(self, record: dict[str, Any]) -> None:
        """Migration, stop agreement and checkpoints. MPI is touched only every ``migrate_every``
        generations: on oversubscribed or busy nodes each progress call can cost a scheduler
        time slice, and a stop signal still takes effect within one interval."""
        started = time.perf_counter()
        generation = self.strategy.generation
        due = generation % self.settings.migrate_every == 0
        every = self.settings.checkpoint_every
        checkpoint_due = bool(every and generation % every == 0)
        # CPU time only where there is work: on a shared core the clock call is a syscall at
        # which the scheduler likes to switch, which would bill the other rank's slice here
        cpu_started = time.process_time() if due or checkpoint_due else None
        arrived: list[Immigrant] = []
        stop = False
        if self.migration is not None and due:
            self.migration.send(self.emigrants())
            arrived = self.migration.receive()
        if self.agreement is not None:
            self.agreement.value = self.strategy.elite_fitness
            if due and self._poll_due(started):
                stop = self.agreement.poll()
                record["global_best"] = min(
                    self.agreement.global_value, self.strategy.elite_fitness
                )
        if self.group is not None and due:  # the leader's news out, every rank's signal in
            raised = self.flag is not None and self.flag.raised
            shared = self.group.allgather((arrived, stop, raised))
            arrived, stop, _ = shared[0]
            if self.flag is not None and any(signal for *_, signal in shared):
                self.flag.raised = True  # the leader's next poll agrees the stop
        self.immigrants.extend(arrived)
        record["immigrants"] = len(arrived)
        if stop or checkpoint_due:
            self.save_checkpoint()
        spent = time.perf_counter() - started
        self.island_seconds += spent
        if cpu_started is not None:
            self.island_cpu_seconds += time.process_time() - cpu_started
        record["island_seconds"] = spent
        if stop:
            self.strategy.request_stop()

    def _poll_due(self, now: float) -> bool:
        """Sync agreement runs every interval (all islands stop at one generation); an async
        round needs only a poll every ``POLL_SECONDS``, which keeps a stop signal's effect
        within a second or two and spares the MPI progress calls in between."""
        if self.agreement.mode == "sync" or now - self._last_poll >= POLL_SECONDS:
            self._last_poll = now
            return True
        return False

    # -- migrants -------------------------------------------------------------------------
    def emigrants(self) -> list[Emigrant]:
        """The island's ``migrants`` best of the last generation, best first (the elite after any
        gradient refinement): ``(genome, lineage or None, fitness)``."""
        strategy = self.strategy
        if self._last is None or strategy.elite is None:
            return []
        out = [(strategy.elite, self.elite_lineage, strategy.elite_fitness)]
        if self.settings.migrants > 1:
            candidates, fitness = self._last
            for index in best_first(fitness.tolist(), self.settings.migrants)[1:]:
                out.append((candidates[index], self._lineages[index], float(fitness[index])))
        for genome, lineage, _ in out:  # a neighbour's reply often extends these: replay less
            if lineage is not None:
                self.codec.remember(lineage, genome)
        return out

    # -- checkpoints ----------------------------------------------------------------------
    def save_checkpoint(self) -> None:
        """Write this island's state (leader only; once per generation)."""
        generation = self.strategy.generation
        if self.checkpoint is not None and self.last_checkpoint != generation:
            self.checkpoint(self.state())
            self.last_checkpoint = generation

    def state(self) -> IslandState:
        """This island's state after its last finished generation."""
        sync = self.migration is not None and self.migration.mode == "sync"
        return IslandState(
            island=self.settings.index,
            islands=self.settings.count,
            loop=self.strategy.state(),
            elite_lineage=self.elite_lineage,
            immigrants=self.immigrants,
            immigrants_used=self.immigrants_used,
            immigrant_wins=self.immigrant_wins,
            island_seconds=self.island_seconds,
            island_cpu_seconds=self.island_cpu_seconds,
            migrant_bytes=self.codec.bytes,
            migration=None if self.migration is None else self.migration.state(),
            sent=self.codec.sent if sync else None,
            known=self.codec.known if sync else None,
        )

    def load_state(self, state: IslandState) -> None:
        """Continue from ``state`` (this island freshly built with the same config)."""
        self.strategy.load_state(state.loop)
        self.last_checkpoint = state.loop.generation
        self.elite_lineage = state.elite_lineage
        self.immigrants = list(state.immigrants)
        self.immigrants_used = state.immigrants_used
        self.immigrant_wins = state.immigrant_wins
        self.island_seconds = state.island_seconds
        self.island_cpu_seconds = state.island_cpu_seconds
        self.codec.bytes = state.migrant_bytes
        if self.migration is not None and state.migration is not None:
            self.migration.restore(state.migration)
            if self.migration.mode == "sync" and state.sent is not None:
                self.codec.sent = state.sent
                self.codec.known = state.known or {}
