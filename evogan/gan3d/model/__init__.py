"""The 3DGAN model: the architecture spec and its shape arithmetic (``spec``), the networks built
from it (``networks``, ``blocks``), their losses (``losses``), the conditions a generator was
trained on (``conditions``), self-describing generator files (``model_file``), how the forward
passes run (``precision``: bf16 autocast, channels-last, compile, convolution forms), showers
from a generator (``generate``), the generator files that form an ensemble
(``ensemble_members``), and a generator with what ``generate`` does around it as one graph
(``shower_graph``) written as an ONNX file (``onnx_file``). The convolutions and dropout masks
come from :mod:`evogan.gan3d.kernels`.

The names are imported on first use (PEP 562): :mod:`evogan.config.gan` embeds the spec, and
importing it must not import torch.
"""

from __future__ import annotations

from evogan.lazy import lazy_names

_LAZY = {
    "Discriminator": ".networks",
    "ForwardOptions": ".precision",
    "GanSpec": ".spec",
    "Generator": ".networks",
    "build_models": ".networks",
    "export_onnx": ".onnx_file",
    "generate_showers": ".generate",
    "load_generator": ".model_file",
    "load_spec": ".spec",
    "save_generator": ".model_file",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_names(__name__, _LAZY)
