"""The 3DGAN task: the architecture spec and its shape arithmetic (``spec``), networks built from
it (``networks``, ``blocks``), self-describing generator files (``model_file``), one training step
and its losses (``step``, ``losses``), the gradient exchanges (``data_parallel``) and the two
parallel modes that use them (``parallel``: sync all-reduce, SAGIPS ARAR rings), and the
data-parallel trainer (:class:`GanTrainer` in ``trainer``, with ``setup``, ``loop``,
``checkpoint``, ``resume``, ``cadence`` and ``validation`` during training). The spec names are
imported eagerly; the rest on first use (PEP 562), because the trainer depends on
:mod:`evogan.config.gan`, which embeds the spec from this package.
"""

from __future__ import annotations

from evogan.gan3d.spec import GanSpec, Layer, discriminator_layers, generator_layers, load_spec
from evogan.lazy import lazy_names

_LAZY = {
    "Discriminator": "evogan.gan3d.networks",
    "GanTrainer": "evogan.gan3d.trainer",
    "Generator": "evogan.gan3d.networks",
    "build_models": "evogan.gan3d.networks",
    "load_generator": "evogan.gan3d.model_file",
    "save_generator": "evogan.gan3d.model_file",
    "train_gan3d": "evogan.gan3d.trainer",
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
