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

    events: PositiveInt = 6000
    energy_range: tuple[float, float] = (2.0, 500.0)
    seed: NonNegativeInt = 20240601  # numpy's SeedSequence takes no negative seed
    log_uniform: bool = False  # energies uniform in log E (CaloChallenge datasets 2 and 3)

    @model_validator(mode="after")
    def _ordered(self) -> SyntheticConfig:
        low, high = self.energy_range
        if not 0 < low < high:
            raise ValueError(f"energy_range must satisfy 0 < low < high, got ({low}, {high})")
        return self


class DataConfig(StrictModel):
    """Files (paths or globs) in one of the public 3DGAN layouts or the CaloChallenge one, or
    the synthetic default; ``detector`` names the calorimeter they come from (a shipped name or
    the path of a CaloChallenge binning XML)."""

    detector: str = "clic-ecal"
    files: list[str] = Field(default_factory=list)
    test_files: list[str] = Field(default_factory=list)
    layout: Layout = "auto"
    ecal_key: str | None = None
    energy_key: str | None = None
    ecal_scale: float | None = Field(default=None, gt=0)
    test_fraction: float = Field(default=0.2, gt=0, lt=1)
    max_events: PositiveInt | None = None
    train_events: PositiveInt | None = None
    test_events: PositiveInt | None = None
    chunk_events: PositiveInt = 1000
    cell_threshold: float = Field(default=1e-6, ge=0)
    projection_axis: ProjectionAxis = "auto"  # the regressor's image: evogan.detectors.projection
    cache_projections: bool = True  # keep the regressor's 2D projections in EVOGAN_CACHE_DIR
    cell_scale: Literal["none", "log", "power"] = "none"
    power: float = Field(default=0.85, gt=0)
    energy_scale: float = Field(default=100.0, gt=0)
    synthetic: SyntheticConfig = Field(default_factory=SyntheticConfig)

    @field_validator("detector")
    @classmethod
    def _known_detector(cls, value: str) -> str:
        try:
            detector_for(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value
