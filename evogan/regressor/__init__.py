"""The energy regressor task: the 2D CNN and its batched evaluation of many genomes (``layout``,
``network``, ``fused_eval`` + ``_fused_eval.c``, ``patches``), the data splits, minibatch
order and MAPE shared by every method (``data``), the least-squares readout start
(``readout``), weights as genomes with MAPE fitness (``problem``), the configured GA strategy
and its schedules (``strategy``), the GA command and its island run (``evolve``, ``islands``,
``island_report``), the RMSprop baseline (``rmsprop``; on one process only, ``one_process``)
and their reports with the energy response (``report``; its resolution fit is calorimeter
physics, :mod:`evogan.physics.resolution`).

Names are imported on first use: the runs need MPI, which a user of the network alone should not
start.
"""

from __future__ import annotations

from evogan.lazy import lazy_names

_LAZY = {
    "RegressorData": ".data",
    "load_and_check": ".data",
    "mape": ".data",
    "RegressorLayout": ".layout",
    "RegressorNet": ".network",
    "load_regressor": ".network",
    "RegressorProblem": ".problem",
    "ReadoutStart": ".readout",
    "evolve_regressor": ".evolve",
    "train_regressor": ".rmsprop",
    "train_rmsprop": ".rmsprop",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_names(__name__, _LAZY)
