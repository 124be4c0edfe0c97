"""The 3DGAN architecture spec and its shape arithmetic, block by block, without building anything.

A :class:`GanSpec` is everything needed to build, train and invert a 3DGAN: the latent and its
conditioning, the generator's dense seed and convolution blocks, the discriminator's blocks,
pooling and heads, loss weights, optimiser settings and the cell transform. Specs live in YAML
(``configs/gan3d*.yaml``) and are stored as JSON in every model file.

Validating a spec walks its layers (:func:`generator_layers`, :func:`discriminator_layers`), so
a spec that cannot produce ``output_shape`` fails with one line naming the block before any
allocation; the benchmark counts FLOPs from the same layer list, so the two never disagree about
what the network is. Shapes are channels-first ``(C, X, Y, Z)``; convolutions follow Keras
semantics (``valid``: n - k + 1; ``same``: n, padded (k-1)//2 before and the rest after),
``zero_pad`` is Keras ZeroPadding3D (symmetric, before the convolution), ``upsample`` is
nearest-neighbour repetition before the padding, pooling floors like Keras ``valid``.

A spec is written for a detector (``detector``, set from the config's ``data.detector``): its
``output_shape`` is the detector's cell grid, and on a cylindrical detector, whose grid is
``(radial, angular, layer)``, the angular axis closes on itself, so every convolution pads it
circularly (``circular_padding``) and sees no seam at alpha = 0 that the detector does not have.
"""

from evogan.gan3d.model.spec.gan import (
    ANGULAR_AXIS,
    GanSpec,
    Layer,
    check_window,
    discriminator_layers,
    fit_to_data,
    flatten_features,
    generation_bytes,
    generator_layers,
    load_spec,
    require_grid,
    same_padding,
)
from evogan.gan3d.model.spec.sections import (
    ConditioningSpec,
    DiscriminatorBlock,
    GeneratorBlock,
    HeadsSpec,
    LossWeights,
    PoolingSpec,
)

__all__ = [
    "ANGULAR_AXIS",
    "ConditioningSpec",
    "DiscriminatorBlock",
    "GanSpec",
    "GeneratorBlock",
    "HeadsSpec",
    "Layer",
    "LossWeights",
    "PoolingSpec",
    "check_window",
    "discriminator_layers",
    "fit_to_data",
    "flatten_features",
    "generation_bytes",
    "generator_layers",
    "load_spec",
    "require_grid",
    "same_padding",
]
