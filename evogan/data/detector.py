"""The CLIC silicon-tungsten ECAL barrel that the public 3DGAN data (and our synthetic set) sample.

Constants only (no mutable state): a 51 x 51 window of 5.1 mm silicon pads in front of 25
sampling layers, 17 with 2.4 mm of tungsten then 8 with 4.8 mm. Depths are measured in tungsten
radiation lengths (X0) because the GFLASH shower model is written in X0; the 0.5 mm of silicon per
layer adds only 0.005 X0 and is neglected there, but counted in the geometric layer pitch.
"""

from __future__ import annotations

import numpy as np

CELLS_X = 51
CELLS_Y = 51
LAYERS = 25
SHAPE = (CELLS_X, CELLS_Y, LAYERS)
CELL_MM = 5.1

THIN_LAYERS = 17
THICK_LAYERS = 8
THIN_W_MM = 2.4
THICK_W_MM = 4.8
SILICON_MM = 0.5  # assumed (not given in the source papers)

Z = 74
X0_MM = 3.504
MOLIERE_MM = 9.327
CRITICAL_GEV = 0.0080

assert THIN_LAYERS + THICK_LAYERS == LAYERS


def absorber_mm() -> np.ndarray:
    """Tungsten thickness of each layer in mm, front to back (25 values)."""
    return np.array([THIN_W_MM] * THIN_LAYERS + [THICK_W_MM] * THICK_LAYERS)


def layer_edges_x0() -> np.ndarray:
    """Layer boundaries in X0 of tungsten (26 values, 0 to about 22.6)."""
    return np.concatenate(([0.0], np.cumsum(absorber_mm()) / X0_MM))


def layer_centres_x0() -> np.ndarray:
    """Depth of the middle of each layer's absorber in X0 (25 values)."""
    edges = layer_edges_x0()
    return 0.5 * (edges[:-1] + edges[1:])


def layer_edges_mm() -> np.ndarray:
    """Geometric layer boundaries in mm (tungsten plus silicon), for inclined showers."""
    return np.concatenate(([0.0], np.cumsum(absorber_mm() + SILICON_MM)))
