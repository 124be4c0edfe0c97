"""Calorimeter showers in and out: public 3DGAN and CaloChallenge HDF5 layouts, the synthetic
generator, transforms.

Modules: ``synthetic`` (GFLASH-style showers in any detector, :mod:`evogan.detectors`),
``writer`` (atomic HDF5 output in the detector's own layout), ``layouts`` (detection of the
layouts), ``file_detector`` (a file's detector against ``data.detector``, unit plausibility),
``cells`` (the cell threshold, one rule for files and scores), ``hdf5`` (checked,
chunk-aligned reads of one file), ``reader`` (lazy datasets, per-rank shards, train/test
splits), ``transforms`` (2D projection, cell scaling, regressor arrays), ``projections`` (the
regressor's projections kept in the cache), ``default`` (the cached synthetic set used when a
config names no files).
"""

from evogan.data.hdf5 import ShowerChunk
from evogan.data.reader import ShowerDataset, open_dataset, open_files
from evogan.data.synthetic import generate_showers, synthesize, write_synthetic
from evogan.data.transforms import (
    RegressorArrays,
    energy_targets,
    load_regressor_data,
    project_2d,
    scale_cells,
)
from evogan.data.writer import ShowerWriter

__all__ = [
    "RegressorArrays",
    "ShowerChunk",
    "ShowerDataset",
    "ShowerWriter",
    "energy_targets",
    "generate_showers",
    "load_regressor_data",
    "open_dataset",
    "open_files",
    "project_2d",
    "scale_cells",
    "synthesize",
    "write_synthetic",
]
