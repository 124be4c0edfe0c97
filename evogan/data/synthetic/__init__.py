"""The synthetic shower generator: GFLASH electromagnetic showers in any detector.

Modules: ``spots`` (the GFLASH model in X0 and Moliere radii: spot counts, longitudinal shape,
radial distance), ``deposit`` (sampling per layer and summing spots into a detector's cells,
Cartesian or cylindrical), ``showers`` (batches of showers, the seeded block stream and the
file writer). The physics a synthetic set is checked against, per detector, is
:mod:`evogan.physics.synthetic_checks`.
"""

from __future__ import annotations

from evogan.lazy import lazy_names

_LAZY = {
    "BLOCK_EVENTS": "evogan.data.synthetic.showers",
    "FILE_BYTES_PER_EVENT": "evogan.data.synthetic.showers",
    "MAX_ENERGY_GEV": "evogan.data.synthetic.showers",
    "MIN_ENERGY_GEV": "evogan.data.synthetic.showers",
    "generate_showers": "evogan.data.synthetic.showers",
    "synthesize": "evogan.data.synthetic.showers",
    "write_synthetic": "evogan.data.synthetic.showers",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_names(__name__, _LAZY)
