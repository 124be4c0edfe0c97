"""Detectors as values: a calorimeter's cell geometry, its materials and its file units.

Everything that depends on the calorimeter (reading and writing shower files, the synthetic
generator, the physics features, the figures) takes a :class:`Detector` instead of module
constants, so evogan works for the detector a user has. ``geometry`` holds the Cartesian grid
(the CLIC ECAL of the public 3DGAN files) and the cylindrical per-layer binning of the
CaloChallenge datasets; ``binning_xml`` reads a CaloChallenge binning file; ``materials`` holds
what the shower model and the features need; ``shipped`` names the detectors evogan knows and
resolves ``data.detector: NAME | PATH``; ``projection`` says which 2D image of a detector's
showers the energy regressor sees (``data.projection_axis``).
"""

from __future__ import annotations

from evogan.lazy import lazy_names

_LAZY = {
    "CartesianGrid": "evogan.detectors.geometry",
    "CylindricalBinning": "evogan.detectors.geometry",
    "Detector": "evogan.detectors.detector",
    "LayerBins": "evogan.detectors.geometry",
    "Materials": "evogan.detectors.materials",
    "VoxelMap": "evogan.detectors.geometry",
    "DETECTOR_NAMES": "evogan.detectors.shipped",
    "detector_for": "evogan.detectors.shipped",
    "image_shape": "evogan.detectors.projection",
    "projection_axis": "evogan.detectors.projection",
    "read_binning_xml": "evogan.detectors.binning_xml",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_names(__name__, _LAZY)
