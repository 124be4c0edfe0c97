"""Shower physics: observables, high-level features, validation metrics and the selection score.

Modules: ``observables`` (vectorised profiles and moments), ``inspect`` (summary of a shower
file), ``features`` (the per-event feature table), one module per metric (``separation``,
``frechet``, ``kernel``, ``classifier``, ``sampling``), ``score`` (the selection score, defined
once, and its floor), ``validation`` (showers from a generator), ``ensemble`` (ensemble score
and SAGIPS mean and spread over generators), ``members`` (which files form an ensemble),
``distortions`` (known damage the score must rank), ``targets`` (the learning target's four
per-bin means against their tolerances).

The score contract used by training and search::

    reference = Reference.from_showers(ecal, energy, bins=5, seed=0)
    result = reference.score(gen_ecal, gen_energy)   # Validation; result.score: lower is better
    result.to_json(), reference.floor()
"""

from evogan.physics.features import FeatureTable, shower_features
from evogan.physics.score import WORST, Reference, Validation, worst_validation

__all__ = [
    "WORST",
    "FeatureTable",
    "Reference",
    "Validation",
    "shower_features",
    "worst_validation",
]
