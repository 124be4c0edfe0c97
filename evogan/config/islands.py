"""Config sections of the island model: ``islands``, ``migration`` and ``checkpoint``."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from evogan.config.base import StrictModel


class IslandsConfig(StrictModel):
    """Under mpirun every ``ranks_per_island`` consecutive ranks form one island; its ranks
    share the evaluation of each generation's candidates."""

    ranks_per_island: PositiveInt = 1


class MigrationConfig(StrictModel):
    """Every ``every`` generations each island sends its ``migrants`` best candidates to its
    neighbours along ``topology`` (``matrix``: an N x N list of migrant counts); ``policy`` says
    how immigrants enter, ``mode`` whether islands wait for each other, ``send`` how weight
    genomes travel. One shape for every island model: the regressor's islands and the
    architecture search's GA, which refuses the options it cannot use (see
    docs/explanation/parallel.md for choosing them)."""

    renamed_keys: ClassVar[dict[str, str]] = {"interval": "every", "k": "migrants"}

    every: PositiveInt = 10
    migrants: NonNegativeInt = 1
    topology: Literal["ring", "random", "full", "matrix"] = "ring"
    matrix: list[list[NonNegativeInt]] | None = None
    policy: Literal["replace_worst", "compete"] = "compete"
    mode: Literal["async", "sync"] = "async"
    send: Literal["auto", "lineage", "weights"] = "auto"

    @model_validator(mode="after")
    def _matrix_given(self) -> MigrationConfig:
        if self.topology == "matrix" and self.matrix is None:
            raise ValueError("topology = 'matrix' needs matrix: an N x N list of migrant counts")
        if self.topology != "matrix" and self.matrix is not None:
            raise ValueError(f"matrix is only used with topology = 'matrix', got {self.topology!r}")
        return self


class CheckpointConfig(StrictModel):
    """Per-island HDF5 checkpoints every ``every`` generations (0: only at the end); the newest
    ``keep`` stay on disk."""

    every: NonNegativeInt = 200
    keep: int = Field(default=3, ge=2)
