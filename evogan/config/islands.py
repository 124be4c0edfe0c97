"""Config sections of the island model: ``islands``, ``migration`` and ``checkpoint``."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from evogan.config.base import StrictModel


class IslandsConfig(StrictModel):
    """Under mpirun every ``ranks_per_island`` consecutive ranks form one island; its ranks
    share the evaluation of each generation's candidates."""

    ranks_per_island: PositiveInt = Field(
        default=1,
        description="consecutive MPI ranks that form one island and share its evaluations",
    )


class MigrationConfig(StrictModel):
    """How islands exchange candidates: every ``every`` generations each island sends its
    ``migrants`` best along ``topology``. One shape for every island model: the regressor's
    islands and the architecture search's GA, which refuses the options it cannot use (see
    docs/explanation/parallel.md for choosing them)."""

    renamed_keys: ClassVar[dict[str, str]] = {"interval": "every", "k": "migrants"}

    every: PositiveInt = Field(default=10, description="generations between migrations")
    migrants: NonNegativeInt = Field(
        default=1, description="best candidates each island sends per migration"
    )
    topology: Literal["ring", "random", "full", "matrix"] = Field(
        default="ring", description="which islands each island sends to"
    )
    matrix: list[list[NonNegativeInt]] | None = Field(
        default=None, description="topology: matrix: N x N migrant counts, row from, column to"
    )
    policy: Literal["replace_worst", "compete"] = Field(
        default="compete",
        description="how immigrants enter: replace the worst, or compete with them",
    )
    mode: Literal["async", "sync"] = Field(
        default="async",
        description="async: take what has arrived; sync: islands wait for each other",
    )
    send: Literal["auto", "lineage", "weights"] = Field(
        default="auto", description="how weight genomes travel: seed lineages or full weights"
    )

    @model_validator(mode="after")
    def _matrix_given(self) -> MigrationConfig:
        if self.topology == "matrix" and self.matrix is None:
            raise ValueError("topology = 'matrix' needs matrix: an N x N list of migrant counts")
        if self.topology != "matrix" and self.matrix is not None:
            raise ValueError(f"matrix is only used with topology = 'matrix', got {self.topology!r}")
        return self


class CheckpointConfig(StrictModel):
    """Per-island HDF5 checkpoints, from which a run resumes."""

    every: NonNegativeInt = Field(
        default=200, description="generations between checkpoints; 0: only at the end"
    )
    keep: int = Field(default=3, ge=2, description="newest checkpoints kept on disk per island")
