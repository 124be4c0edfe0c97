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

    filters: PositiveInt
    kernel: Triple
    padding: Literal["same", "valid"] = "valid"
    zero_pad: PadTriple = (0, 0, 0)
    upsample: Triple = (1, 1, 1)
    activation: Activation = "relu"
    batch_norm: bool = False
    bias: bool = True
    init: Init = "he_uniform"
    noise: bool = False


class DiscriminatorBlock(StrictModel):
    """ZeroPadding3D -> Conv3D -> activation -> [BatchNorm] -> [Dropout] (Keras order)."""

    filters: PositiveInt
    kernel: Triple
    padding: Literal["same", "valid"] = "valid"
    zero_pad: PadTriple = (0, 0, 0)
    activation: Activation = "leaky_relu"
    batch_norm: bool = False
    dropout: float = Field(default=0.0, ge=0, lt=1)
    bias: bool = True
    init: Init = "glorot_uniform"


class PoolingSpec(StrictModel):
    """Pooling between the last discriminator block and the flatten."""

    kind: Literal["avg", "max"] = "avg"
    size: Triple = (2, 2, 2)


class ConditioningSpec(StrictModel):
    """How the primary energy (and angle) enter the latent vector.

    ``concat``: latent = [E/energy_scale, theta (if angle), normal draws] (variable-angle model);
    ``multiply``: latent = normal draws x E/energy_scale (fixed-angle model). ``log_energy``
    adds ``ln(E/energy_scale)`` as a concat slot: over three decades of energy (CaloChallenge's
    1 GeV - 1 TeV) the shower depth grows with ln E, which a linear slot squeezes near zero for
    the lowest decade.
    """

    mode: Literal["concat", "multiply"] = "concat"
    angle: bool = False
    log_energy: bool = False
    energy_scale: float = Field(default=100.0, gt=0)

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

    energy: bool = True
    ecal_sum: bool = True
    angle: bool = False
    conditional: bool = False


class LossWeights(StrictModel):
    """Weights of BCE(real/fake), MAPE(energy), MAE(angle), MAPE(ECAL sum), and of two
    generator-only batch terms (0: off, as in the originals).

    ``width`` weights the percentage difference between the mean transverse width of the generated
    batch and of the real batch it is paired with (same energies); ``sampling_fraction`` the same
    for the mean ECAL sum / primary energy; ``hits`` the same for the mean soft count of cells above
    3e-4 GeV (:func:`~evogan.gan3d.model.losses.soft_hit_count`). They match batch means, not each
    shower, so they do not shrink the shower-to-shower spread the way a per-shower target would.
    """

    real_fake: float = Field(default=3.0, ge=0)
    energy: float = Field(default=0.1, ge=0)
    angle: float = Field(default=25.0, ge=0)
    ecal_sum: float = Field(default=0.1, ge=0)
    width: float = Field(default=0.0, ge=0)
    sampling_fraction: float = Field(default=0.0, ge=0)
    hits: float = Field(default=0.0, ge=0)
