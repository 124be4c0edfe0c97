"""Scoring a candidate's generators: held-out showers and their reference features, built
once per process, and the value a search minimises.

:class:`Scorer` loads a generator file, makes showers for the held-out events with the same
noise for every member and candidate (``SCORE_SEED``) and scores them against
:class:`evogan.physics.Reference` (``fitness.metric``, default the selection score, finite for
any showers: empty ones score worst-class); :meth:`Scorer.score_all` spreads a candidate's
generators over the ranks of its group. :func:`check_data` refuses, before a campaign
starts, data that would fail every candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evogan.config.search import SearchConfig
from evogan.distributed.mpi import MPI
from evogan.gan3d.model.generate import generate_numbered
from evogan.physics import WORST_SCORE, Reference, Validation
from evogan.search.data_fit import check_test_split

SCORE_SEED = 12345  # noise of the validation showers: the same for every member and candidate


@dataclass(frozen=True)
class MemberScore:
    """One generator's score and its empty showers (each scored worst-class), so a candidate
    whose generators made them can say why it scored as it did."""

    value: float
    empty: int
    events: int


class Scorer:
    """Reference features of the held-out showers, computed once per process. As in training
    validation, an angle-conditioned base spec has its showers' angles scored."""

    def __init__(self, config: SearchConfig) -> None:
        from evogan.data.reader import open_dataset

        _train, test = open_dataset(config.data, announce=lambda _line: None)
        chunk = test.read(min(config.fitness.test_events, len(test)))
        self.metric = config.fitness.metric
        self.energy = chunk.energy
        self.theta = chunk.theta
        self.reference = Reference.from_showers(
            chunk.ecal,
            chunk.energy,
            cell_threshold=test.cell_threshold,
            detector=test.detector,
            bins=config.fitness.energy_bins,
            seed=SCORE_SEED,
            theta=chunk.theta if config.spec.conditioning.angle else None,
        )

    def score(self, path: Path) -> float:
        """``fitness.metric`` of the generator file ``path`` (lower is better): NaN when its
        showers are not finite (training diverged), else finite."""
        return self.measure(path).value

    def measure(self, path: Path) -> MemberScore:
        """:meth:`score` with the count of empty showers behind it."""
        from evogan.gan3d.model.model_file import load_generator

        spec, generator, _meta = load_generator(path)
        theta = self.theta if spec.conditioning.angle else None
        showers = generate_numbered(spec, generator, self.energy, theta, SCORE_SEED)
        if not np.isfinite(showers).all():
            return MemberScore(math.nan, 0, len(showers))
        result = self.reference.score(showers, self.energy, self.theta)
        return MemberScore(metric_value(result, self.metric), result.bad_events, len(showers))

    def score_all(self, files: list[Path], group: MPI.Comm) -> list[MemberScore]:
        """Collective on ``group``: the score of every generator file in ``files`` (in their
        order, on every rank), each file scored on one rank."""
        mine = {m: self.measure(p) for m, p in enumerate(files) if m % group.size == group.rank}
        scores: dict[int, MemberScore] = {}
        for part in group.allgather(mine):
            scores.update(part)
        return [scores[m] for m in range(len(files))]


def check_data(config: SearchConfig) -> Scorer:
    """Refuse data that would fail every candidate, before the campaign directory exists: files
    that cannot be read, a test split the candidates cannot be scored on
    (:func:`~evogan.search.data_fit.check_test_split`), an energy or angle of any train or test
    event that is not finite (read without the cells). Makes the synthetic data when no files
    are given, so one rank calls it before the others read, and returns the scorer it built
    for them to share. It says what data the campaign reads, once for all its trainings."""
    from evogan.data.reader import open_dataset

    train, test = open_dataset(config.data)
    check_test_split(config, test)
    for view in (train, test):
        view.energies()  # checks every event's energy and angle
    return Scorer(config)


def metric_value(result: Validation, metric: str) -> float:
    """The value a search minimises: the selection score, or one reported metric (AUC as
    its distance from 0.5); worst-class when the metric could not be measured."""
    if metric == "score":
        return result.score
    entry = result.metrics.get(metric)
    value = math.nan if entry is None else entry["value"]
    if metric == "classifier_auc":
        value = abs(value - 0.5)
    return float(value) if math.isfinite(value) else WORST_SCORE
