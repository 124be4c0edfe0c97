"""The sections of a search config besides its genes: how long a member trains, how a
candidate is scored, the settings of each backend (GA, Optuna, PBT), pruning, the final
significance test and the campaign directory (:class:`evogan.config.search.SearchConfig` holds
them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, field_validator, model_validator

from evogan.config.base import StrictModel
from evogan.config.islands import MigrationConfig
from evogan.config.run import mlflow_setting, tensorboard_installed
from evogan.errors import ConfigError


class BudgetConfig(StrictModel):
    """How long one ensemble member trains: steps of one epoch, epochs, or seconds."""

    kind: Literal["steps", "epochs", "seconds"] = Field(
        default="steps", description="the unit of amount"
    )
    amount: float = Field(default=4, gt=0, description="how long each member trains")
    timeout_s: float | None = Field(
        default=None, gt=0, description="seconds after which a member's training fails"
    )
    max_memory_mb: float | None = Field(
        default=None, gt=0, description="candidates whose estimated memory is above are rejected"
    )


MIN_TEST_EVENTS = 8
"""Held-out showers the fitness score needs at least: its floor compares two halves of them,
each of at least 4 (as training validation's ``MIN_VALIDATION_EVENTS``)."""


class FitnessConfig(StrictModel):
    """fitness = mean member score + beta x spread; optional second objective."""

    members: PositiveInt = Field(
        default=1, description="trainings per candidate, with different seeds"
    )
    beta: float = Field(default=0.0, description="weight of the members' spread in the fitness")
    second_objective: Literal["none", "params", "flops"] = Field(
        default="none", description="a second objective minimised beside the fitness (NSGA-II)"
    )
    test_events: int = Field(
        default=100, ge=MIN_TEST_EVENTS, description="held-out showers each member is scored on"
    )
    energy_bins: PositiveInt = Field(default=3, description="energy bins of the score")
    metric: Literal["score", "separation", "fpd", "kpd", "classifier_auc", "sf_error"] = Field(
        default="score",
        description="what members are scored by: the selection score or one of its metrics",
    )


SEARCH_MIGRATION: dict[str, Any] = {"every": 1, "policy": "replace_worst"}
"""The architecture GA's migration defaults where they differ from the regressor's: one of its
generations is a few trainings, so migrants go every generation and replace the worst members."""

USABLE_MIGRATION: dict[str, tuple[str, ...]] = {
    "topology": ("ring", "random", "full"),
    "policy": ("replace_worst",),
    "mode": ("async",),
    "send": ("auto",),
}
"""The migration options the architecture GA can use: its islands never wait for each other and
send records (genome and evaluation), which replace the worst members."""


class GASearchConfig(StrictModel):
    """Per-island (mu + lambda) GA over architecture genomes."""

    population: PositiveInt = Field(default=4, description="mu: candidates each island keeps")
    offspring: PositiveInt = Field(default=2, description="lambda: children per generation")
    tournament: PositiveInt = Field(default=2, description="candidates per selection tournament")
    crossover: float = Field(
        default=0.3, ge=0, le=1, description="probability a child comes from uniform crossover"
    )
    gene_mutation: float = Field(
        default=0.3, ge=0, le=1, description="probability per gene to mutate (at least one does)"
    )
    invalid: Literal["repair", "reject"] = Field(
        default="repair", description="a genome that does not build is repaired or redrawn"
    )
    inherit_weights: bool = Field(
        default=False, description="children with the parent's layer shapes start from its weights"
    )
    migration: MigrationConfig = Field(
        default_factory=lambda: MigrationConfig(**SEARCH_MIGRATION),
        description="how islands exchange candidates (the options this GA can use)",
    )

    @field_validator("migration", mode="before")
    @classmethod
    def _search_defaults(cls, value: Any) -> Any:
        return {**SEARCH_MIGRATION, **value} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _usable_migration(self) -> GASearchConfig:
        """Refuse what the architecture GA cannot do (raised as is: one line)."""
        for key, usable in USABLE_MIGRATION.items():
            value = getattr(self.migration, key)
            if value not in usable:
                raise ConfigError(
                    f"ga.migration.{key} = {value!r} is not allowed: the architecture GA takes "
                    f"{' or '.join(usable)}"
                )
        return self


class OptunaSearchConfig(StrictModel):
    """The study owned by world rank 0, stored as a journal file in the campaign directory."""

    sampler: Literal["tpe", "cmaes", "nsga2", "random"] = Field(
        default="tpe", description="the Optuna sampler"
    )
    startup_trials: NonNegativeInt = Field(
        default=4,
        description="finished random trials before TPE or CMA-ES model the results; trials "
        "asked while these run are random too (with G groups, up to G - 1 more)",
    )
    population: PositiveInt = Field(default=8, description="NSGA-II's generation size")


class FinalConfig(StrictModel):
    """The significance test at the end of a campaign: the ``top`` best candidates and the base
    spec re-trained with ``retrain_seeds`` fresh seeds each (a test needs two or more)."""

    retrain_seeds: int = Field(default=5, ge=2, description="fresh seeds each is re-trained with")
    top: NonNegativeInt = Field(default=1, description="best candidates tested; 0: no final test")


class PruningConfig(StrictModel):
    """Multi-fidelity pruning: candidates are scored at rungs ``min_budget x reduction_factor^k``
    (units of ``budget.kind``) below the full budget; the worst stop early (``pruned``)."""

    kind: Literal["none", "successive_halving", "hyperband"] = Field(
        default="none", description="the pruning rule; none: every candidate trains fully"
    )
    min_budget: float | None = Field(
        default=None, gt=0, description="the lowest rung; null: budget.amount / factor^2"
    )
    reduction_factor: int = Field(
        default=3, ge=2, description="factor between rungs; 1/factor of candidates go on"
    )


class PbtConfig(StrictModel):
    """Population Based Training: each rank group trains one worker for ``budget.amount`` in
    segments of ``interval`` (units of ``budget.kind``); after every segment the worst
    ``quantile`` of the workers copy the weights and hyper-parameters of one of the best
    ``quantile`` and perturb the genes named in ``perturb`` (default: every gene of ``space``)
    by a factor drawn from ``factors``, or redraw them with ``resample_probability``."""

    interval: float = Field(default=1, gt=0, description="length of a segment (budget.kind)")
    quantile: float = Field(
        default=0.25, gt=0, le=0.5, description="share of workers that copy, and that are copied"
    )
    factors: list[float] = Field(
        default_factory=lambda: [0.8, 1.2],
        min_length=1,
        description="factors a perturbed gene is multiplied by, one drawn per gene",
    )
    resample_probability: float = Field(
        default=0.25, ge=0, le=1, description="probability a gene is redrawn instead"
    )
    perturb: list[str] | None = Field(
        default=None, description="names of the genes perturbed; null: every gene of space"
    )

    @field_validator("factors")
    @classmethod
    def _positive(cls, factors: list[float]) -> list[float]:
        if any(f <= 0 for f in factors):
            raise ValueError(f"every factor must be > 0, got {factors}")
        return factors


class CampaignConfig(StrictModel):
    """Where the campaign directory goes and what it reports."""

    root: str | None = Field(
        default=None,
        description="directory of run directories; null: EVOGAN_POPULATIONS or populations/",
    )
    name: str | None = Field(
        default=None,
        description="the campaign directory's name; null: search and the UTC start time",
    )
    top: PositiveInt = Field(default=5, description="best candidates listed in summary.json")
    tensorboard: bool = Field(
        default=False, description="the candidate table as TensorBoard scalars (needs tensorboard)"
    )
    mlflow: bool | str = Field(
        default=False,
        description="campaign -> candidate -> member runs in MLflow: true, or a tracking URI",
    )

    _tensorboard = field_validator("tensorboard")(tensorboard_installed)
    _mlflow = field_validator("mlflow")(mlflow_setting)
