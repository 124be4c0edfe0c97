"""The sections a 3DGAN spec is made of, as validated config: generator and discriminator
blocks, pooling, how the conditions enter the latent, the discriminator's heads and the loss
weights (:class:`~evogan.gan3d.model.spec.GanSpec` holds them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from evogan.config.base import StrictModel

Triple = tuple[PositiveInt, PositiveInt, PositiveInt]
PadTriple = tuple[NonNegativeInt, NonNegativeInt, NonNegativeInt]
Activation = Literal["relu", "leaky_relu", "linear"]
Init = Literal["he_uniform", "glorot_uniform", "glorot_normal"]


class GeneratorBlock(StrictModel):
    """upsample -> ZeroPadding3D -> Conv3D -> [noise] -> activation -> [BatchNorm] (Keras
    order); ``noise`` adds per-cell Gaussian noise with a learned per-channel scale before the
    activation (:class:`evogan.gan3d.model.blocks.NoiseInjection`; not in the Keras originals)."""

    filters: PositiveInt = Field(description="output channels of the convolution")
    kernel: Triple = Field(description="convolution kernel (x, y, z)")
    padding: Literal["same", "valid"] = Field(default="valid", description="Keras padding")
    zero_pad: PadTriple = Field(default=(0, 0, 0), description="zeros added on each side first")
    upsample: Triple = Field(default=(1, 1, 1), description="nearest-neighbour repetition first")
    activation: Activation = Field(default="relu", description="activation after the convolution")
    batch_norm: bool = Field(default=False, description="batch normalisation after the activation")
    bias: bool = Field(default=True, description="the convolution has a bias")
    init: Init = Field(default="he_uniform", description="initial draw of the weights")
    noise: bool = Field(default=False, description="learned-scale Gaussian noise per cell")


class DiscriminatorBlock(StrictModel):
    """ZeroPadding3D -> Conv3D -> activation -> [BatchNorm] -> [Dropout] (Keras order)."""

    filters: PositiveInt = Field(description="output channels of the convolution")
    kernel: Triple = Field(description="convolution kernel (x, y, z)")
    padding: Literal["same", "valid"] = Field(default="valid", description="Keras padding")
    zero_pad: PadTriple = Field(default=(0, 0, 0), description="zeros added on each side first")
    activation: Activation = Field(
        default="leaky_relu", description="activation after the convolution"
    )
    batch_norm: bool = Field(default=False, description="batch normalisation after the activation")
    dropout: float = Field(default=0.0, ge=0, lt=1, description="dropout rate at the block's end")
    bias: bool = Field(default=True, description="the convolution has a bias")
    init: Init = Field(default="glorot_uniform", description="initial draw of the weights")


class PoolingSpec(StrictModel):
    """Pooling between the last discriminator block and the flatten."""

    kind: Literal["avg", "max"] = Field(default="avg", description="average or max pooling")
    size: Triple = Field(default=(2, 2, 2), description="pooling window (x, y, z)")


class ConditioningSpec(StrictModel):
    """How the primary energy (and angle) enter the latent vector.

    ``concat``: latent = [E/energy_scale, theta (if angle), normal draws] (variable-angle model);
    ``multiply``: latent = normal draws x E/energy_scale (fixed-angle model). ``log_energy``
    adds ``ln(E/energy_scale)`` as a concat slot: over three decades of energy (CaloChallenge's
    1 GeV - 1 TeV) the shower depth grows with ln E, which a linear slot squeezes near zero for
    the lowest decade.
    """

    mode: Literal["concat", "multiply"] = Field(
        default="concat", description="conditions as latent entries, or scaling the draws"
    )
    angle: bool = Field(default=False, description="the incident angle is a condition (concat)")
    log_energy: bool = Field(
        default=False, description="ln(E / energy_scale) is a further condition (concat)"
    )
    energy_scale: float = Field(
        default=100.0, gt=0, description="energies (GeV) enter as E / energy_scale"
    )

    @property
    def slots(self) -> int:
        """Condition entries ahead of the noise in a concat latent vector."""
        return 1 + int(self.log_energy) + int(self.angle)


class HeadsSpec(StrictModel):
    """Discriminator outputs besides real/fake: trainable energy regression, fixed sums.

    ``conditional`` makes the real/fake head a projection discriminator (Miyato & Koyama 2018):
    its logit gains ``phi(E) . V h`` with ``phi(E) = (e, ln e)``, ``e = E/energy_scale``, so the
    discriminator can tell a shower that is right for some energy from one right for its own
    (e.g. a depth that does not grow with ln E), which the unconditional head cannot.
    """

    energy: bool = Field(default=True, description="a trainable head regressing the energy")
    ecal_sum: bool = Field(default=True, description="the fixed sum of the image's cells")
    angle: bool = Field(default=False, description="the fixed angle measured from the image")
    conditional: bool = Field(
        default=False, description="the real/fake head is a projection discriminator"
    )


class LossWeights(StrictModel):
    """Weights of BCE(real/fake), MAPE(energy), MAE(angle), MAPE(ECAL sum), and of two
    generator-only batch terms (0: off, as in the originals).

    ``width`` weights the percentage difference between the mean transverse width of the generated
    batch and of the real batch it is paired with (same energies); ``sampling_fraction`` the same
    for the mean ECAL sum / primary energy; ``hits`` the same for the mean soft count of cells above
    3e-4 GeV (:func:`~evogan.gan3d.model.losses.soft_hit_count`). They match batch means, not each
    shower, so they do not shrink the shower-to-shower spread the way a per-shower target would.
    """

    real_fake: float = Field(default=3.0, ge=0, description="binary cross-entropy, real or fake")
    energy: float = Field(default=0.1, ge=0, description="MAPE of the energy head")
    angle: float = Field(default=25.0, ge=0, description="MAE of the angle head")
    ecal_sum: float = Field(default=0.1, ge=0, description="MAPE of the ECAL sum")
    width: float = Field(
        default=0.0, ge=0, description="generator: batch mean transverse width against the data"
    )
    sampling_fraction: float = Field(
        default=0.0, ge=0, description="generator: batch mean ECAL sum / energy against the data"
    )
    hits: float = Field(
        default=0.0, ge=0, description="generator: batch mean count of hit cells against the data"
    )
