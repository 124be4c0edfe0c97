"""evogan: evolutionary and meta-optimisation of calorimeter fast-simulation networks.

The package root exports the names of the Python API (docs/tutorials/python-api.md): the evolution
engine (strategies, problems, random streams, results), the generic :class:`ModuleProblem` for one's
own torch module and arrays, the regressor and 3DGAN entry points, the physics score, run
directories and config loading. Names are resolved on first use (PEP 562), so ``import evogan``
stays cheap (the CLI starts without torch) and the root imports no subpackage; it arranges
that torch, when something imports it, imports faster (:mod:`evogan.startup`).
"""

from __future__ import annotations

import importlib
from typing import Any

from evogan.startup import pause_collector_for_torch_import

pause_collector_for_torch_import()

__version__ = "0.1.0"

_LAZY = {
    # engine: the evolution loop on any problem
    "DifferentiableProblem": "evogan.engine",
    "Evolution": "evogan.engine",
    "EvolutionResult": "evogan.engine",
    "GenerationContext": "evogan.engine",
    "Hybrid": "evogan.engine",
    "ModuleProblem": "evogan.engine",
    "PlusLambda": "evogan.engine",
    "Problem": "evogan.engine",
    "Reevaluation": "evogan.engine",
    "Streams": "evogan.engine",
    "SuccessRule": "evogan.engine",
    "make_schedule": "evogan.engine",
    # the regressor task
    "RegressorData": "evogan.regressor.data",
    "RegressorLayout": "evogan.regressor.network",
    "RegressorNet": "evogan.regressor.network",
    "evolve_regressor": "evogan.regressor.evolve",
    "load_regressor": "evogan.regressor.network",
    "mape": "evogan.regressor.data",
    "train_regressor": "evogan.regressor.rmsprop",
    "train_rmsprop": "evogan.regressor.rmsprop",
    "ReadoutStart": "evogan.regressor.readout",
    # the 3DGAN task
    "GanSpec": "evogan.gan3d.model.spec",
    "GanTrainer": "evogan.gan3d.training.trainer",
    "Island": "evogan.islands",
    "IslandSession": "evogan.islands",
    "load_generator": "evogan.gan3d.model.model_file",
    "train_gan3d": "evogan.gan3d.training.trainer",
    # physics, runs, configs
    "Reference": "evogan.physics",
    "RunDir": "evogan.store",
    "Validation": "evogan.physics",
    "load_config": "evogan.config",
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # resolved once
        return value
    raise AttributeError(f"module 'evogan' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
