"""A calorimeter as one value: its cells, its materials and the energy unit of its files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from evogan.detectors.geometry import Geometry
from evogan.detectors.materials import Materials
from evogan.errors import ConfigError

ENERGY_UNITS = {"GeV": 1.0, "MeV": 1e-3}


@dataclass(frozen=True)
class Detector:
    """``name`` (a shipped name or the binning file it came from), ``geometry``, ``materials``
    and ``file_unit``: the unit of cell and incident energies in this detector's own file
    format (evogan holds GeV in memory)."""

    name: str
    geometry: Geometry
    materials: Materials
    file_unit: Literal["GeV", "MeV"] = "GeV"
    source: str = ""

    def __post_init__(self) -> None:
        if self.materials.layers != self.geometry.layers:
            raise ConfigError(
                f"detector {self.name}: the materials describe {self.materials.layers} layers, "
                f"the geometry {self.geometry.layers}"
            )

    @property
    def voxels(self) -> int:
        return self.geometry.voxels

    @property
    def layers(self) -> int:
        return self.geometry.layers

    @property
    def grid_shape(self) -> tuple[int, int, int] | None:
        """The 3D array one shower forms (layer axis last), or None for irregular binning."""
        return self.geometry.grid_shape

    @property
    def shower_shape(self) -> tuple[int, ...]:
        """One shower as evogan holds it: the grid, or the row of voxels of irregular binning."""
        return self.grid_shape or (self.voxels,)

    @property
    def to_gev(self) -> float:
        """Factor from this detector's file unit to GeV."""
        return ENERGY_UNITS[self.file_unit]

    def describe(self) -> str:
        shape = self.grid_shape
        cells = "x".join(map(str, shape)) if shape else f"{self.voxels} voxels (irregular)"
        return f"{self.name} ({self.geometry.kind}, {cells})"
