"""The ``data`` section: where showers come from and how they are turned into network input."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, field_validator, model_validator

from evogan.config.base import StrictModel
from evogan.detectors import detector_for
from evogan.detectors.projection import ProjectionAxis
from evogan.errors import ConfigError

Layout = Literal["auto", "fixed25", "raw51", "processed51", "evogan", "calochallenge"]


class SyntheticConfig(StrictModel):
    """The built-in GFLASH-style data set, generated once and cached when no files are given."""

    events: PositiveInt = Field(default=6000, description="showers in the generated set")
    energy_range: tuple[float, float] = Field(
        default=(2.0, 500.0),
        description="primary energies (GeV) drawn from [low, high], 0 < low < high",
    )
    seed: NonNegativeInt = Field(  # numpy's SeedSequence takes no negative seed
        default=20240601, description="seed of the generator; another seed is another cached set"
    )
    log_uniform: bool = Field(
        default=False,
        description="energies uniform in log E (as CaloChallenge datasets 2 and 3), else in E",
    )

    @model_validator(mode="after")
    def _ordered(self) -> SyntheticConfig:
        low, high = self.energy_range
        if not 0 < low < high:
            raise ValueError(f"energy_range must satisfy 0 < low < high, got ({low}, {high})")
        return self


class DataConfig(StrictModel):
    """Files (paths or globs) in one of the public 3DGAN layouts or the CaloChallenge one, or
    the synthetic default, and how they are read, split and turned into network input."""

    detector: str = Field(
        default="clic-ecal",
        description="the calorimeter the showers come from: a shipped name or a binning XML path",
    )
    files: list[str] = Field(
        default_factory=list, description="HDF5 files or globs; empty: the cached synthetic set"
    )
    test_files: list[str] = Field(
        default_factory=list,
        description="held-out files; empty: the last test_fraction of each file",
    )
    layout: Layout = Field(
        default="auto", description="the files' layout; auto: from keys and shapes"
    )
    ecal_key: str | None = Field(
        default=None, description="HDF5 key of the cells; null: the layout's"
    )
    energy_key: str | None = Field(
        default=None, description="HDF5 key of the primary energies; null: the layout's"
    )
    ecal_scale: float | None = Field(
        default=None,
        gt=0,
        description="factor from file cells to GeV; null: the file's or layout's",
    )
    test_fraction: float = Field(
        default=0.2, gt=0, lt=1, description="share of each file's events held out for testing"
    )
    max_events: PositiveInt | None = Field(
        default=None, description="events read from the files at most, before the split"
    )
    train_events: PositiveInt | None = Field(
        default=None, description="training events used at most (after the split)"
    )
    test_events: PositiveInt | None = Field(
        default=None, description="test events used at most (after the split)"
    )
    chunk_events: PositiveInt = Field(
        default=1000, description="events per read from HDF5 (memory per slice, not results)"
    )
    cell_threshold: float = Field(
        default=1e-6, ge=0, description="cells below this energy (GeV) are read as zero"
    )
    projection_axis: ProjectionAxis = Field(
        default="auto",
        description="transverse axis the regressor's 2D image sums over; auto: y, or alpha",
    )
    cache_projections: bool = Field(
        default=True, description="keep the regressor's 2D projections in EVOGAN_CACHE_DIR"
    )
    cell_scale: Literal["none", "log", "power"] = Field(
        default="none", description="how the regressor compresses cell energies: log1p or x**power"
    )
    power: float = Field(default=0.85, gt=0, description="exponent of cell_scale: power")
    energy_scale: float = Field(
        default=100.0, gt=0, description="the regressor's target is energy (GeV) / energy_scale"
    )
    synthetic: SyntheticConfig = Field(
        default_factory=SyntheticConfig, description="the synthetic set used when files is empty"
    )

    @field_validator("detector")
    @classmethod
    def _known_detector(cls, value: str) -> str:
        try:
            detector_for(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value
