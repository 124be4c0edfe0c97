"""Turning showers into network inputs: 2D projections, cell scaling, energy targets.

The regressor of the GA study sees a 2D image per shower: the 3D cells summed over one
transverse axis, keeping the longitudinal development (docs/explanation/physics.md section 5); which
axis follows the detector (:mod:`evogan.detectors.projection`: ``y`` of a Cartesian grid, the
angular bins of a cylindrical one). Arrays for it are built by streaming the data set, so memory
holds the projections only (51 x 25 floats per event instead of 51 x 51 x 25), and kept in the cache
for the next run (:mod:`evogan.data.projections`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evogan.config.data import DataConfig
from evogan.data.projections import cached_projection
from evogan.data.reader import ShowerDataset, open_dataset
from evogan.detectors import detector_for
from evogan.detectors.projection import grid_index, projection_axis
from evogan.errors import ConfigError, DataError

# ``log`` scaling works in units of LOG_UNIT_GEV (1 MeV), so typical cell energies (1e-6 to
# a few GeV) land between 0 and about 9 instead of crowding near zero.
LOG_UNIT_GEV = 1e-3


@dataclass
class RegressorArrays:
    """Inputs and targets of the energy regressor, ready for ``torch.from_numpy``."""

    x: np.ndarray  # float32 (n, 1, W, Z): projected (and scaled) images
    y: np.ndarray  # float32 (n,): energy / energy_scale
    energy: np.ndarray  # float32 (n,): primary energy in GeV
    detector: str = ""  # the showers' detector, described (Detector.describe())
    axis: str = ""  # the grid axis the images are summed over

    def __len__(self) -> int:
        return len(self.y)


def project_2d(ecal: np.ndarray, axis: str = "y") -> np.ndarray:
    """Sum grids (n, A, B, layer) over a resolved transverse ``axis``: ``x`` or ``y`` of a
    Cartesian (n, X, Y, Z) grid gives (n, Y, Z) or (n, X, Z), ``alpha`` of a cylindrical
    (n, R, alpha, layer) grid (n, R, layer)."""
    try:
        index = grid_index(axis)
    except ConfigError as exc:
        raise DataError(str(exc)) from None
    if ecal.ndim != 4:
        raise DataError(f"project_2d needs grids of shape (n, A, B, layer), got {ecal.shape}")
    return ecal.sum(axis=1 + index, dtype=np.float32)


def scale_cells(x: np.ndarray, mode: str = "none", power: float = 0.85) -> np.ndarray:
    """Compress the dynamic range of non-negative cell energies (GeV); zeros stay zero.

    - ``none``: ``x`` unchanged;
    - ``log``: ``log1p(x / LOG_UNIT_GEV)`` = ln(1 + x / 1 MeV), monotonic and 0 at 0;
    - ``power``: ``x ** power`` (0.85 in the 3DGAN variable-angle training).
    """
    if mode == "none":
        return x
    if mode == "log":
        return np.log1p(x / np.float32(LOG_UNIT_GEV), dtype=np.float32)
    if mode == "power":
        return np.power(x, np.float32(power), dtype=np.float32)
    raise DataError(f"cell scaling must be one of none, log, power, got {mode!r}")


def energy_targets(energy: np.ndarray, scale: float = 100.0) -> np.ndarray:
    """Regression targets: primary energy (GeV) / ``scale`` (the 3DGAN convention, E/100)."""
    return (np.asarray(energy, dtype=np.float32) / np.float32(scale)).astype(np.float32)


def regressor_arrays(
    cfg: DataConfig, dataset: ShowerDataset, announce: Callable[[str], object] = print
) -> RegressorArrays:
    """Projected, scaled images and energy targets of ``dataset`` (projections cached unless
    ``cfg.cache_projections`` is off: :mod:`evogan.data.projections`), summed over the axis
    ``cfg.projection_axis`` names for ``cfg.detector`` (the files' detector: the reader refuses
    files of another kind of geometry)."""
    axis = image_axis(cfg)

    def build() -> tuple[np.ndarray, np.ndarray]:
        return project_view(dataset, axis, cfg.chunk_events)

    if cfg.cache_projections:
        images, energy = cached_projection(dataset, axis, build, announce)
    else:
        images, energy = build()
    x = scale_cells(images, cfg.cell_scale, cfg.power)[:, np.newaxis]
    targets = energy_targets(energy, cfg.energy_scale)
    return RegressorArrays(x, targets, energy, describe_source(dataset), axis)


def image_axis(cfg: DataConfig) -> str:
    """The grid axis the regressor's images sum over: ``data.projection_axis`` resolved for
    ``data.detector`` (the files' detector: the reader refuses files of another geometry)."""
    return projection_axis(detector_for(cfg.detector), cfg.projection_axis)


def input_shape(cfg: DataConfig, dataset: ShowerDataset) -> tuple[int, int, int]:
    """(channels, height, layers) of the regressor's images of ``dataset``, known from its
    cell shape before any cell is read."""
    return (1, *projected_shape(dataset, image_axis(cfg)))


def describe_source(dataset: ShowerDataset) -> str:
    """The detector of ``dataset`` as figures and summaries name it; a Cartesian window that no
    shipped detector has is named by its cells."""
    detector = dataset.detector
    if detector is not None:
        return detector.describe()
    return f"cartesian window ({'x'.join(map(str, dataset.shape))})"


def project_view(
    dataset: ShowerDataset, axis: str, chunk_events: int
) -> tuple[np.ndarray, np.ndarray]:
    """Stream ``dataset`` and keep only its 2D projections over the resolved ``axis``
    (n, H, layers) and energies (GeV)."""
    n = len(dataset)
    height, depth = projected_shape(dataset, axis)
    images = np.empty((n, height, depth), dtype=np.float32)
    energy = np.empty(n, dtype=np.float32)
    at = 0
    for chunk in dataset.iter_chunks(chunk_events):
        k = len(chunk)
        images[at : at + k] = project_2d(chunk.ecal, axis)
        energy[at : at + k] = chunk.energy
        at += k
    return images, energy


def load_regressor_data(
    cfg: DataConfig, *, rank: int = 0, size: int = 1, announce: Callable[[str], object] = print
) -> tuple[RegressorArrays, RegressorArrays]:
    """(train, test) regressor arrays: this rank's block of the training set, all test events."""
    train, test = open_dataset(cfg, announce=announce)
    shard = train.shard(rank, size)
    if len(shard) == 0:
        raise DataError(
            f"rank {rank} of {size} gets no training events: {len(train)} events cannot be "
            f"shared by {size} ranks; use more data or fewer ranks"
        )
    return regressor_arrays(cfg, shard, announce), regressor_arrays(cfg, test, announce)


def projected_shape(dataset: ShowerDataset, axis: str) -> tuple[int, int]:
    """(height, layers) of the regressor's image of ``dataset``'s showers summed over the
    resolved ``axis``; refused for showers that are no 3D grid."""
    if len(dataset.shape) != 3:
        raise DataError(
            f"the regressor's 2D projection needs showers on a 3D grid, got cells of shape "
            f"{dataset.shape} from {dataset.files[0]}"
        )
    summed = grid_index(axis)
    height, depth = (size for index, size in enumerate(dataset.shape) if index != summed)
    return height, depth
