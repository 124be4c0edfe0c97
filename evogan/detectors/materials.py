"""What a calorimeter is made of, as far as the shower model and the features need it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evogan.errors import ConfigError


@dataclass(frozen=True)
class Materials:
    """Per layer the absorber thickness in mm (``absorber_mm``) and the active thickness
    (``active_mm``, counted in the geometric pitch only); the absorber's radiation length,
    Moliere radius, critical energy and atomic number (the GFLASH parameters), and the nominal
    sampling fraction (visible over deposited energy) the synthetic showers are checked against."""

    absorber: str
    z: int
    x0_mm: float
    moliere_mm: float
    critical_gev: float
    absorber_mm: tuple[float, ...]
    active_mm: float
    sampling_fraction: float

    def __post_init__(self) -> None:
        positive = (self.x0_mm, self.moliere_mm, self.critical_gev, self.sampling_fraction)
        if min(positive) <= 0 or min(self.absorber_mm, default=0) <= 0 or self.active_mm < 0:
            raise ConfigError(
                f"materials of {self.absorber}: lengths, energies and the sampling fraction "
                "must be positive"
            )

    @property
    def layers(self) -> int:
        return len(self.absorber_mm)

    def layer_edges_x0(self) -> np.ndarray:
        """Layer boundaries in absorber radiation lengths (layers + 1 values from 0)."""
        return np.concatenate(([0.0], np.cumsum(self.absorber_mm) / self.x0_mm))

    def layer_centres_x0(self) -> np.ndarray:
        """Depth of the middle of each layer's absorber in X0."""
        edges = self.layer_edges_x0()
        return 0.5 * (edges[:-1] + edges[1:])

    def layer_edges_mm(self) -> np.ndarray:
        """Geometric layer boundaries in mm (absorber plus active), for inclined showers."""
        return np.concatenate(([0.0], np.cumsum(np.asarray(self.absorber_mm) + self.active_mm)))
