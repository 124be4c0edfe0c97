"""The 3DGAN task, in three floors: the model (:mod:`evogan.gan3d.model`: the architecture spec
and its shape arithmetic, the networks built from it, their losses, generator files, showers from
a generator and ensembles of generator files), its training (:mod:`evogan.gan3d.training`: the
data-parallel :class:`GanTrainer`, its epoch loop, step, parallel modes, checkpoints and
validation during training) and the speed kernels the model picks its convolutions and dropout
masks from (:mod:`evogan.gan3d.kernels`). The gradient exchanges the parallel modes use are
generic and live in :mod:`evogan.distributed`. The spec names are imported eagerly; the rest on
first use (PEP 562), because the trainer depends on :mod:`evogan.config.gan`, which embeds the
spec from this package.
"""

from __future__ import annotations

from evogan.gan3d.model.spec import (
    GanSpec,
    Layer,
    discriminator_layers,
    generator_layers,
    load_spec,
)
from evogan.lazy import lazy_names

_LAZY = {
    "Discriminator": "evogan.gan3d.model.networks",
    "GanTrainer": "evogan.gan3d.training.trainer",
    "Generator": "evogan.gan3d.model.networks",
    "build_models": "evogan.gan3d.model.networks",
    "load_generator": "evogan.gan3d.model.model_file",
    "save_generator": "evogan.gan3d.model.model_file",
    "train_gan3d": "evogan.gan3d.training.trainer",
}

__all__ = [
    "GanSpec",
    "Layer",
    "discriminator_layers",
    "generator_layers",
    "load_spec",
    *sorted(_LAZY),
]


__getattr__ = lazy_names(__name__, _LAZY)
