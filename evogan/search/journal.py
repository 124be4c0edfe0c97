"""One view of every campaign: the candidate table as an Optuna journal study.

The Optuna backend's study owner writes ``CAMPAIGN/study.journal`` itself. A GA campaign gets
the same file from world rank 0, which follows the table (as the progress lines do) and adds
one finished trial per row with ``study.add_trial``: parameters from the genome (the same names
and distributions the Optuna backend suggests), the fitness as value (``PRUNED`` / ``FAIL``
for the others), the rung scores as intermediate values and the row's status, reason, size,
member scores and seeds as user attributes. So ``optuna-dashboard CAMPAIGN/study.journal``
opens every backend. A PBT campaign gets one trial per worker instead, its segments as
intermediate values (:class:`evogan.search.pbt.WorkerMirror`). One process writes the file;
trials carry their candidate id (``user_attrs["candidate"]``), so a resumed campaign adds only
the rows the journal lacks.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evogan.search.campaign import STUDY, TABLE
from evogan.search.follow import TableFollower, polled

STUDY_NAME = "evogan-search"
ATTRS = (
    "status",
    "reason",
    "params",
    "flops",
    "score_mean",
    "score_std",
    "score_sem",
    "member_scores",
    "member_seeds",
    "seeds",
    "rung",
    "reproduce",
    "session",
    "inherit_from",
    "parents",
    "worker",
    "segment",
    "exploit",
)


def open_journal(path: Path | str, objectives: int, **options: Any) -> Any:
    """The campaign's study in its journal file (created or loaded); ``options`` go to
    ``optuna.create_study`` (sampler, pruner)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from evogan.logs import route_optuna

    route_optuna()
    return optuna.create_study(
        storage=JournalStorage(JournalFileBackend(str(path))),
        study_name=STUDY_NAME,
        directions=["minimize"] * objectives,
        load_if_exists=True,
        **options,
    )


def user_attrs(row: dict[str, Any]) -> dict[str, Any]:
    """What the dashboard shows beside a trial (JSON-safe: non-finite numbers become None)."""
    attrs = {"candidate": row["id"]}
    for key in ATTRS:
        if key in row:
            attrs[key] = _json_safe(row[key])
    return attrs


def intermediate_values(row: dict[str, Any]) -> dict[int, float]:
    """The row's rung scores by integer budget step (Optuna's steps are integers)."""
    values = {}
    for key, value in (row.get("intermediate") or {}).items():
        if value is not None and math.isfinite(value):
            values[round(float(key))] = float(value)
    return values


def frozen_trial(
    row: dict[str, Any],
    space: Any,
    objectives: int,
    intermediate: dict[str, float] | None = None,
    attrs: dict[str, Any] | None = None,
) -> Any:
    """A finished Optuna trial for one table row; ``intermediate`` (budget point -> score)
    replaces the row's own, ``attrs`` are added to its user attributes."""
    import optuna
    from optuna.trial import TrialState

    values = list(row.get("objectives") or [row.get("fitness")])[:objectives]
    finite = all(v is not None and math.isfinite(v) for v in values)
    if row["status"] == "ok" and finite and len(values) == objectives:
        state, kwargs = TrialState.COMPLETE, {"values": [float(v) for v in values]}
    elif row["status"] == "pruned":
        state, kwargs = TrialState.PRUNED, {}
    else:
        state, kwargs = TrialState.FAIL, {}
    params, distributions = trial_params(row["genome"], space)
    return optuna.trial.create_trial(
        state=state,
        params=params,
        distributions=distributions,
        user_attrs={**user_attrs(row), **_json_safe(attrs or {})},
        intermediate_values=intermediate_values(
            row if intermediate is None else {"intermediate": intermediate}
        ),
        **kwargs,
    )


class JournalMirror:
    """Adds table rows to the journal study, each candidate once (one trial per row; a
    subclass may group rows into trials by overriding :meth:`trials`)."""

    def __init__(self, path: Path, space: Any, objectives: int) -> None:
        self.space, self.objectives = space, objectives
        self.study = open_journal(path, objectives)
        trials = self.study.get_trials(deepcopy=False)
        self.known = {t.user_attrs.get("candidate") for t in trials}

    def trials(self, rows: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        """(candidate, finished trial) for each of the new ``rows`` the journal lacks."""
        return [
            (row["id"], frozen_trial(row, self.space, self.objectives))
            for row in rows
            if row["id"] not in self.known
        ]

    def add(self, rows: list[dict[str, Any]]) -> int:
        """Add the trials the journal lacks; returns how many were added."""
        added = 0
        for key, trial in self.trials(rows):
            if key in self.known:
                continue
            self.study.add_trial(trial)
            self.known.add(key)
            added += 1
        return added


@contextmanager
def mirror_table(
    session: Any, active: bool, make: Callable[..., JournalMirror] = JournalMirror
) -> Iterator[None]:
    """While the block runs (on one process: ``active``), mirror the campaign table into
    ``CAMPAIGN/study.journal`` from a background thread with the mirror ``make(path, space,
    objectives)`` builds; a failure to write it is reported once and never stops the
    campaign."""
    if not active:
        yield
        return
    campaign = session.campaign
    objectives = 1 + int(session.config.fitness.second_objective != "none")
    mirror = make(campaign.path / STUDY, session.space, objectives)
    follower = TableFollower(campaign.path / TABLE)
    broken: list[str] = []

    def sync() -> None:
        if broken:
            return
        try:
            mirror.add(follower.new_rows())
        except Exception as exc:  # the journal is a view: the campaign goes on without it
            broken.append(str(exc))
            print(f"search: the Optuna journal stopped: {exc}", file=sys.stderr, flush=True)

    sync()
    with polled(sync, "evogan-search-journal"):
        yield


class _Recorder:
    """Stands in for an Optuna trial in :meth:`Space.suggest`: answers with the genome's
    values and records each parameter's internal value and distribution."""

    def __init__(self, genome: dict[str, Any]) -> None:
        self.values: dict[str, Any] = {}
        for name, value in genome.items():
            self.values[name] = value
            if isinstance(value, list):
                self.values.update({f"{name}_{k}": v for k, v in enumerate(value)})
        self.params: dict[str, Any] = {}
        self.distributions: dict[str, Any] = {}

    def suggest_categorical(self, name: str, labels: list[str]) -> str:
        from optuna.distributions import CategoricalDistribution

        label = json.dumps(self.values[name])
        return self._record(name, label, CategoricalDistribution(labels))

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        from optuna.distributions import IntDistribution

        value = int(self.values[name])
        return self._record(name, value, IntDistribution(low, high, log=log, step=step))

    def suggest_float(
        self, name: str, low: float, high: float, step: float | None = None, log: bool = False
    ) -> float:
        from optuna.distributions import FloatDistribution

        value = float(self.values[name])
        return self._record(name, value, FloatDistribution(low, high, log=log, step=step))

    def _record(self, name: str, value: Any, distribution: Any) -> Any:
        self.params[name] = value
        self.distributions[name] = distribution
        return value


def trial_params(genome: dict[str, Any], space: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Optuna parameters and distributions of an (active) genome (to mirror a table row, or to
    enqueue a genome as a trial); values a distribution does not contain (a hand-edited row)
    leave the parameters empty: the genome is still in the table."""
    recorder = _Recorder(genome)
    try:
        space.suggest(recorder)
        for name, distribution in recorder.distributions.items():
            if not distribution._contains(distribution.to_internal_repr(recorder.params[name])):
                return {}, {}
    except (KeyError, TypeError, ValueError, IndexError):
        return {}, {}
    return recorder.params, recorder.distributions


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value
