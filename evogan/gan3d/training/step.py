"""One 3DGAN training step, split so a data-parallel trainer can exchange gradients.

``discriminator_grads`` and ``generator_grads`` only fill ``.grad``; the caller steps the
optimisers (``train_step`` does it for a single process). This follows the Keras originals
(docs/explanation/physics.md section 4): the discriminator sees a real and a generated batch
(separate forward passes, so each keeps its own batch-norm statistics) with real/fake labels flipped
with probability ``spec.label_flip``, regresses E/100 (MAPE), and has fixed heads for the ECAL sum
(MAPE) and the measured angle (MAE); the generator is then trained ``spec.generator_steps``
times against "real" labels, with the same energies, angles and ECAL-sum targets. Two
documented differences from Keras: the two discriminator halves are averaged into one update
instead of two, and generated images for the discriminator come from the generator in
training mode (batch statistics) rather than from its moving averages.

``forward`` (:class:`~evogan.gan3d.model.precision.ForwardOptions`) picks how both forward passes
run (bf16 autocast, channels-last, compiled); losses and backward passes stay outside autocast.

Cells enter in GeV; ``to_network`` / ``to_gev`` apply and undo the spec's cell
transform (``(cell_scale * GeV) ** cell_power``), the same functions generation uses
(:mod:`evogan.gan3d.model.networks`).
"""

from __future__ import annotations

import torch

from evogan.errors import EvoganError
from evogan.gan3d.model.losses import (
    BATCH_TERMS,
    batch_features,
    batch_mean_gap,
    flipped_labels,
    gan_loss,
)
from evogan.gan3d.model.networks import (
    Discriminator,
    Generator,
    missing_theta,
    sample,
    to_gev,
    to_network,
)
from evogan.gan3d.model.precision import ForwardOptions
from evogan.gan3d.model.spec import GanSpec
from evogan.optimizer import RMSprop


class GanStep:
    """Gradients and updates of one 3DGAN, on one process (see the module docstring)."""

    def __init__(
        self,
        spec: GanSpec,
        generator: Generator,
        discriminator: Discriminator,
        generator_rng: torch.Generator,
        device: str | torch.device = "cpu",
        forward: ForwardOptions | None = None,
    ) -> None:
        self.spec = spec
        self.device = torch.device(device)
        self.forward = forward or ForwardOptions()
        self.generator = self.forward.prepare(generator.to(self.device))
        self.discriminator = self.forward.prepare(discriminator.to(self.device))
        self.rng = generator_rng
        self.shard = (0, 1)  # (rank, ranks) of a synchronous data-parallel run; see sample
        self.discriminator.set_dropout_generator(generator_rng)
        options = {"alpha": spec.rmsprop_alpha, "eps": spec.rmsprop_eps}
        self.g_optimizer = RMSprop(generator.parameters(), lr=spec.g_lr, **options)
        self.d_optimizer = RMSprop(discriminator.parameters(), lr=spec.d_lr, **options)
        self._last_real_sum: torch.Tensor | None = None
        self._last_real: dict[str, torch.Tensor] = {}  # batch features the generator matches

    def to_network(self, ecal_gev: torch.Tensor) -> torch.Tensor:
        """Real cells in GeV (tensor or numpy) -> discriminator input on this step's device."""
        return self.forward.image(to_network(self.spec, self._cells(ecal_gev)))

    def discriminator_grads(
        self, real_ecal: torch.Tensor, energy: torch.Tensor, theta: torch.Tensor | None
    ) -> dict[str, float]:
        """Zero the discriminator's grads and backpropagate its loss; no optimiser step."""
        self.discriminator.reseed_dropout()
        real = self.to_network(real_ecal)
        energy, theta = self._conditions(energy, theta, real.shape[0])
        targets = self._targets(energy, theta, real_ecal)
        self._last_real_sum = targets["ecal_sum"]
        terms = self._batch_terms()
        if terms:
            real_cells = self._cells(real_ecal).clamp_min(0.0)
            self._last_real = batch_features(real_cells, energy, terms, self.spec.cylindrical)
        with torch.no_grad(), self.forward.autocast(self.device):
            self.generator.train()
            fake = sample(self.spec, self.generator, energy, theta, self.rng, self.shard)
        fake = self.forward.image(fake)
        self.discriminator.train()
        self.d_optimizer.zero_grad(set_to_none=True)
        flip, n = self.spec.label_flip, real.shape[0]
        metrics: dict[str, float] = {}
        total = torch.zeros((), device=self.device)
        for name, images, label in (("real", real, 1.0), ("fake", fake, 0.0)):
            labels = flipped_labels(label, n, flip, self.rng, self.device, self.shard)
            with self.forward.autocast(self.device):
                outputs = self.discriminator(images, targets["energy"])
            loss, parts = gan_loss(outputs, labels, targets, self.spec.loss_weights)
            total = total + 0.5 * loss
            metrics[f"d_{name}_loss"] = float(loss.detach())
            for key, value in parts.items():
                metrics[f"d_{key}"] = metrics.get(f"d_{key}", 0.0) + 0.5 * float(value.detach())
        total.backward()
        metrics["d_loss"] = float(total.detach())
        return metrics

    def generator_grads(
        self,
        batch_size: int,
        energy: torch.Tensor,
        theta: torch.Tensor | None,
        ecal_sum: torch.Tensor | None = None,
    ) -> dict[str, float]:
        """Zero the generator's grads and backpropagate its loss; no optimiser step.

        ``ecal_sum`` is the ECAL-sum target in network cell units (``cell_scale`` x GeV);
        by default the sums of the real batch last given to :meth:`discriminator_grads`, as the
        original pairs every generator update with the preceding real batch. The batch terms
        (width, hits, sampling fraction) always match that real batch.
        """
        self.discriminator.reseed_dropout()
        energy, theta = self._conditions(energy, theta, batch_size)
        if ecal_sum is None:
            ecal_sum = self._last_real_sum
            if ecal_sum is None or ecal_sum.shape[0] != batch_size:
                raise EvoganError(
                    "generator_grads needs the ECAL-sum targets of a real batch of the same size: "
                    "call discriminator_grads first or pass ecal_sum"
                )
        targets = {"energy": energy / self.spec.conditioning.energy_scale, "ecal_sum": ecal_sum}
        if theta is not None:
            targets["angle"] = theta
        self.generator.train()
        self.discriminator.train()
        self.g_optimizer.zero_grad(set_to_none=True)
        frozen = [p for p in self.discriminator.parameters() if p.requires_grad]
        for p in frozen:
            p.requires_grad_(False)
        ratios: dict[str, float] = {}  # generated / real batch means of the batch terms
        try:
            with self.forward.autocast(self.device):
                fake = sample(self.spec, self.generator, energy, theta, self.rng, self.shard)
                fake = self.forward.image(fake)
                outputs = self.discriminator(fake, targets["energy"])
            labels = torch.ones(batch_size, device=self.device)
            weights = self.spec.loss_weights
            loss, parts = gan_loss(outputs, labels, targets, weights)
            terms = self._batch_terms()
            fake_values = {}
            if terms:
                fake_cells = to_gev(self.spec, fake)
                fake_values = batch_features(fake_cells, energy, terms, self.spec.cylindrical)
            for name in terms:
                real = self._real(name, batch_size)
                parts[name] = batch_mean_gap(fake_values[name], real)
                loss = loss + getattr(weights, name) * parts[name]
                ratios[f"g_{name}_ratio"] = float(fake_values[name].detach().mean() / real.mean())
            loss.backward()
        finally:
            for p in frozen:
                p.requires_grad_(True)
        metrics = {f"g_{key}": float(value.detach()) for key, value in parts.items()}
        metrics.update(ratios)
        metrics["g_loss"] = float(loss.detach())
        return metrics

    def train_step(
        self, real_ecal: torch.Tensor, energy: torch.Tensor, theta: torch.Tensor | None
    ) -> dict[str, float]:
        """Single process: discriminator update, then ``generator_steps`` generator updates."""
        metrics = self.discriminator_grads(real_ecal, energy, theta)
        self.d_optimizer.step()
        steps = self.spec.generator_steps
        for _ in range(steps):
            g_metrics = self.generator_grads(len(real_ecal), energy, theta)
            self.g_optimizer.step()
            for key, value in g_metrics.items():
                metrics[key] = metrics.get(key, 0.0) + value / steps
        return metrics

    def _batch_terms(self) -> tuple[str, ...]:
        """The generator's batch terms that are on (weight above 0)."""
        weights = self.spec.loss_weights
        return tuple(name for name in BATCH_TERMS if getattr(weights, name) > 0)

    def _real(self, feature: str, batch_size: int) -> torch.Tensor:
        values = self._last_real.get(feature)
        if values is None or values.shape[0] != batch_size:
            raise EvoganError(
                f"the {feature} term needs the {feature} of a real batch of the same size: "
                "call discriminator_grads first"
            )
        return values

    def _conditions(
        self, energy: torch.Tensor, theta: torch.Tensor | None, n: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        energy = torch.as_tensor(energy, dtype=torch.float32).reshape(-1).to(self.device)
        if energy.shape[0] != n:
            raise EvoganError(f"energy must hold one value per shower ({n}), got {energy.shape[0]}")
        if not self.spec.conditioning.angle:
            return energy, None
        if theta is None:
            raise missing_theta(self.spec)
        theta = torch.as_tensor(theta, dtype=torch.float32).reshape(-1).to(self.device)
        if theta.shape[0] != n:
            raise EvoganError(f"theta must hold one value per shower ({n}), got {theta.shape[0]}")
        return energy, theta

    def _cells(self, ecal: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(ecal).to(self.device, torch.float32)

    def _targets(
        self, energy: torch.Tensor, theta: torch.Tensor | None, real_ecal: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        cells = self._cells(real_ecal).clamp_min(0.0)
        targets = {
            "energy": energy / self.spec.conditioning.energy_scale,
            "ecal_sum": cells.sum(dim=(1, 2, 3)) * self.spec.cell_scale,
        }
        if theta is not None:
            targets["angle"] = theta
        return targets
