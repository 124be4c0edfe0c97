"""The data a config will train on, known before any of it is read: the (train, test) views
:func:`evogan.data.reader.open_dataset` gives, from the files' HDF5 metadata (keys, shapes,
attributes; no cells, no energies), or, when the config names no files, from its
``data.synthetic`` settings, without generating the set.

The commands check batch sizes and cell windows against these views before torch and MPI load
(:mod:`evogan.commands.data_checks`), so such a refusal comes in a second, not after the
imports and the data; the trainers check again against the data they read, with the same
functions.
"""

from __future__ import annotations

from evogan.config.data import DataConfig
from evogan.data.default import default_data_path
from evogan.data.hdf5 import ShowerFile
from evogan.data.layouts import written_layout
from evogan.data.reader import ShowerDataset, open_files, read_settings, split_dataset
from evogan.detectors import detector_for


def planned_dataset(cfg: DataConfig) -> tuple[ShowerDataset, ShowerDataset]:
    """The (train, test) views of ``cfg``'s data, as :func:`open_dataset` will give them (the
    same refusals of missing or unreadable files, and of splits that leave a side empty),
    reading metadata only and saying nothing."""
    options = read_settings(cfg)
    files = open_files(cfg.files, **options, units=False) if cfg.files else [synthetic_file(cfg)]
    return split_dataset(cfg, files, lambda _line: None, units=False)


def synthetic_file(cfg: DataConfig) -> ShowerFile:
    """The cached synthetic set of ``cfg`` as :func:`evogan.data.reader.open_file` describes
    it, whether or not it has been generated yet."""
    detector = detector_for(cfg.detector)
    path = default_data_path(cfg.synthetic, detector)
    layout = written_layout(detector)
    return ShowerFile(path, layout, cfg.synthetic.events, detector.shower_shape, 1, "", detector)
