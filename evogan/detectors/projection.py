"""Which 2D image of a detector's showers the energy regressor sees: the 3D grid (layer axis
last) summed over one transverse axis, so the image keeps the longitudinal development.

A Cartesian grid ``(x, y, layer)`` is summed over ``x`` or ``y`` (``auto``: ``y``, the GA
study's image); a cylindrical one ``(radial, alpha, layer)`` over its angular bins ``alpha``
(an image of radial bins x layers). A binning that differs from layer to layer forms no grid
and has no such image. ``data.projection_axis`` is resolved here and nowhere else.
"""

from __future__ import annotations

from typing import Literal

from evogan.detectors.detector import Detector
from evogan.detectors.shipped import DETECTOR_NAMES, detector_for
from evogan.errors import ConfigError

ProjectionAxis = Literal["auto", "x", "y", "alpha"]

GRID_AXES = {"cartesian": ("x", "y", "layer"), "cylindrical": ("radial", "alpha", "layer")}
"""The names of a grid's axes, per geometry kind, in the grid's order."""

SUMMED = {"cartesian": ("x", "y"), "cylindrical": ("alpha",)}
"""The axes the regressor's image may be summed over, per geometry kind."""

AUTO = {"cartesian": "y", "cylindrical": "alpha"}


def projection_axis(detector: Detector, asked: str = "auto") -> str:
    """The axis ``asked`` (``auto`` resolved) for ``detector``; a ConfigError in one line naming
    the detector, the axis asked and the axes it has where it does not fit."""
    kind = detector.geometry.kind
    if detector.grid_shape is None:
        regular = ", ".join(name for name in DETECTOR_NAMES if detector_for(name).grid_shape)
        raise ConfigError(
            f"data.projection_axis = {asked}: the regressor needs showers on a regular 3D grid, "
            f"but detector {detector.describe()} bins its layers differently, so it has no grid "
            f"axis to sum over; use a detector with one ({regular}, or a binning XML whose "
            "layers are all binned alike)"
        )
    if asked == "auto":
        return AUTO[kind]
    if asked not in SUMMED[kind]:
        axes = ", ".join(GRID_AXES[kind])
        choices = " or ".join(SUMMED[kind])
        raise ConfigError(
            f"data.projection_axis = {asked} does not fit detector {detector.describe()}, "
            f"whose grid axes are ({axes}); use {choices}, or auto ({AUTO[kind]})"
        )
    return asked


def grid_index(axis: str) -> int:
    """Index of the grid axis (layer axis last, no event axis) that a resolved ``axis`` sums
    over, in the geometry that has it."""
    for kind, names in SUMMED.items():
        if axis in names:
            return GRID_AXES[kind].index(axis)
    summable = ", ".join(name for names in SUMMED.values() for name in names)
    raise ConfigError(f"a projection axis must be one of {summable}, got {axis!r}")


def image_shape(detector: Detector, axis: str) -> tuple[int, int]:
    """(height, width) of the regressor's image of ``detector`` summed over ``axis``."""
    summed = grid_index(projection_axis(detector, axis))
    kept = [n for index, n in enumerate(detector.grid_shape or ()) if index != summed]
    return kept[0], kept[1]
