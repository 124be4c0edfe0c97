"""Shower physics: observables, high-level features, validation metrics and the selection score.

Modules: ``observables`` (vectorised profiles and moments), ``inspect`` (summary of a shower
file), ``features`` (the per-event feature table, following the detector), ``layered`` (the
CaloChallenge high-level features per layer, for any detector), one module per metric
(``separation``, ``frechet``, ``kernel``, ``classifier``, ``sampling``), ``resampling``
(errors from bootstrap and permutation replicates of the events), ``score`` (the selection
score, defined once, and its floor), ``resolution`` (an energy reconstruction's response and
the calorimeter resolution fit), ``ensemble`` (ensemble score and SAGIPS mean and spread over
scored shower sets), ``distortions`` (known damage the score must rank, per detector),
``targets`` (the learning target's four per-bin means against their tolerances). Showers
(arrays) and a reference go in, features and scores come out: running a generator and reading
run directories belong to :mod:`evogan.gan3d.model`.

The score contract used by training and search::

    reference = Reference.from_showers(ecal, energy, cell_threshold=1e-6, bins=5, seed=0,
                                       detector=detector)   # None: the CLIC ECAL
    result = reference.score(gen_ecal, gen_energy)   # Validation; result.score: lower is better
    result.to_json(), reference.floor()

The names are imported on first use (PEP 562): a training rank that only takes a constant from
``features`` never loads the scoring code.
"""

from __future__ import annotations

from evogan.lazy import lazy_names

_LAZY = {
    "FeatureTable": "evogan.physics.features",
    "Reference": "evogan.physics.score",
    "Validation": "evogan.physics.score",
    "WORST_SCORE": "evogan.physics.score",
    "shower_features": "evogan.physics.features",
    "worst_validation": "evogan.physics.score",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_names(__name__, _LAZY)
