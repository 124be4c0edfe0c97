"""The detectors evogan knows by name, and ``data.detector: NAME | PATH`` resolved to one.

Geometry facts and their sources are in docs/explanation/physics.md section 7; values marked
"assumed" there are not published with the datasets and only set the synthetic generator's scale.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

from evogan.detectors.binning_xml import read_binning_xml
from evogan.detectors.detector import Detector
from evogan.detectors.geometry import CartesianGrid, CylindricalBinning, LayerBins
from evogan.detectors.materials import Materials
from evogan.errors import ConfigError

DEFAULT = "clic-ecal"

TUNGSTEN = {"absorber": "tungsten", "z": 74, "x0_mm": 3.504, "moliere_mm": 9.327,
            "critical_gev": 0.0080}  # fmt: skip
LEAD = {"absorber": "lead", "z": 82, "x0_mm": 5.612, "moliere_mm": 16.02,
        "critical_gev": 0.00743}  # fmt: skip

CLIC_MATERIALS = Materials(
    **TUNGSTEN,
    absorber_mm=(2.4,) * 17 + (4.8,) * 8,
    active_mm=0.5,
    sampling_fraction=0.0209,
)

# Dataset 1 (ATLAS, |eta| 0.2-0.25): layers 0-3 the LAr-Pb barrel (presampler, strips, middle,
# back), 4-11 unused here, 12-14 the tile barrel; thicknesses in lead-equivalent mm (assumed).
_ATLAS_ABSORBER_MM = (0.6, 24.0, 90.0, 11.0) + (0.01,) * 8 + (80.0, 200.0, 90.0) + (0.01,) * 9
_DS1_PHOTON_LAYERS = {
    0: ((0, 5, 10, 30, 50, 100, 200, 400, 600), 1),
    1: ((0, 2, 4, 6, 8, 10, 12, 15, 20, 30, 40, 50, 70, 90, 120, 150, 200), 10),
    2: ((0, 2, 5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 130, 160, 200, 250, 300, 350, 400), 10),
    3: ((0, 50, 100, 200, 400, 600), 1),
    12: ((0, 100, 200, 400, 1000, 2000), 1),
}
_DS1_PION_LAYERS = {
    0: ((0, 5, 10, 30, 50, 100, 200, 400, 600), 1),
    1: ((0, 1, 4, 7, 10, 15, 30, 50, 90, 150, 200), 10),
    2: ((0, 5, 10, 20, 30, 50, 80, 130, 200, 300, 400), 10),
    3: ((0, 50, 100, 200, 400, 600), 1),
    12: ((0, 10, 20, 30, 50, 80, 100, 130, 160, 200, 250, 300, 350, 400, 1000, 2000), 10),
    13: ((0, 10, 20, 30, 50, 80, 100, 130, 160, 200, 250, 300, 350, 400, 600, 1000, 2000), 10),
    14: ((0, 50, 100, 150, 200, 250, 300, 400, 600, 1000, 2000), 1),
}


def _cylinder(radial_step_mm: float, radial: int, angular: int, layers: int) -> CylindricalBinning:
    edges = tuple(round(radial_step_mm * i, 6) for i in range(radial + 1))
    return CylindricalBinning((LayerBins(edges, angular),) * layers)


def _atlas(layers: dict[int, tuple[tuple[float, ...], int]]) -> CylindricalBinning:
    return CylindricalBinning(
        tuple(
            LayerBins(tuple(float(e) for e in layers[i][0]), layers[i][1])
            if i in layers
            else LayerBins((0.0,), 1)
            for i in range(24)
        )
    )


def _par04_materials(layers: int) -> Materials:
    """Geant4 Par04 (CaloChallenge datasets 2 and 3): each readout layer is two pairs of 1.4 mm
    tungsten and 0.3 mm silicon; the sampling fraction is derived, not published: the MIP
    fraction of that stack times the e/mip of the CLIC calibration (docs/explanation/physics.md
    section 7)."""
    return Materials(
        **TUNGSTEN, absorber_mm=(2.8,) * layers, active_mm=0.6, sampling_fraction=0.025
    )


def _par04(radial: int, angular: int, step_mm: float) -> Callable[[str], Detector]:
    """Datasets 2 and 3: 45 layers, radial bins of half (ds2) or a quarter (ds3) of a Moliere
    radius of tungsten, equal angular bins."""
    binning = _cylinder(step_mm, radial, angular, 45)
    return lambda name: Detector(name, binning, _par04_materials(45), "MeV", "CaloChallenge Par04")


def _ds1(layers: dict[int, tuple[tuple[float, ...], int]]) -> Callable[[str], Detector]:
    materials = Materials(
        **LEAD, absorber_mm=_ATLAS_ABSORBER_MM, active_mm=0.0, sampling_fraction=0.25
    )
    return lambda name: Detector(name, _atlas(layers), materials, "MeV", "CaloChallenge ATLAS")


_SHIPPED: dict[str, Callable[[str], Detector]] = {
    "clic-ecal": lambda name: Detector(
        name, CartesianGrid(51, 51, 25, 5.1), CLIC_MATERIALS, "GeV", "CLIC ECAL barrel (3DGAN)"
    ),
    "clic-ecal-25": lambda name: Detector(
        name, CartesianGrid(25, 25, 25, 5.1), CLIC_MATERIALS, "GeV", "CLIC ECAL, 25x25 window"
    ),
    "calochallenge-1-photons": _ds1(_DS1_PHOTON_LAYERS),
    "calochallenge-1-pions": _ds1(_DS1_PION_LAYERS),
    "calochallenge-2": _par04(9, 16, 4.65),
    "calochallenge-3": _par04(18, 50, 2.325),
}
DETECTOR_NAMES = tuple(_SHIPPED)


@cache
def detector_for(value: str = DEFAULT) -> Detector:
    """A shipped detector by name, or a cylindrical one from a CaloChallenge binning XML path
    (Par04 materials per layer, MeV files; the name is the path)."""
    if value in _SHIPPED:
        return _SHIPPED[value](value)
    if value.endswith(".xml") or Path(value).exists():
        binning = read_binning_xml(value)
        materials = _par04_materials(binning.layers)
        return Detector(value, binning, materials, "MeV", f"binning file {value}")
    raise ConfigError(
        f"unknown detector {value!r}; use one of {', '.join(DETECTOR_NAMES)} or the path of a "
        "CaloChallenge binning .xml file"
    )
