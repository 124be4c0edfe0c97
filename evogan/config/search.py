"""The ``task: search`` config: an architecture search campaign over the 3DGAN spec.

A campaign samples genomes from a search ``space`` (genes that set values of a base
:class:`~evogan.gan3d.model.spec.GanSpec`), trains each candidate for a short ``budget`` on the
data-parallel trainer with one rank group, scores it by physics validation over an ensemble of
``fitness.members`` trainings, and searches with a GA (``backend: ga``, islands of rank groups),
Optuna (``backend: optuna``, one rank owns the study) or Population Based Training
(``backend: pbt``, one worker per rank group, trained in segments). See docs/search.md.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, field_validator, model_validator

from evogan.config.base import StrictModel
from evogan.config.data import DataConfig
from evogan.config.islands import MigrationConfig
from evogan.config.run import tensorboard_installed
from evogan.config.trainer import TrainerConfig
from evogan.errors import ConfigError
from evogan.gan3d.model.spec import GanSpec, fit_to_data


class GeneConfig(StrictModel):
    """One gene. ``path`` is a dotted path into the spec (``generator.0.filters``);
    ``type: blocks`` makes the number of copies of block ``repeat`` of ``net`` a gene, and a
    gene with ``per_block: NAME`` sets ``field`` of every copy made by blocks gene ``NAME``
    (conditional genes: only the first n of them are active)."""

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    type: Literal["int", "float", "categorical", "blocks"]
    path: str | None = None
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: list[Any] | None = None
    net: Literal["generator", "discriminator"] | None = None
    repeat: NonNegativeInt = 0
    per_block: str | None = None
    field: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> GeneConfig:
        where = f"gene {self.name}"
        if self.type == "categorical":
            if not self.choices:
                raise ValueError(f"{where}: type categorical needs a non-empty choices list")
            if not all(_finite(choice) for choice in self.choices):
                raise ValueError(f"{where}: every choice must be finite, got {self.choices}")
        else:
            if self.low is None or self.high is None or not self.low <= self.high:
                raise ValueError(
                    f"{where}: type {self.type} needs low <= high, got ({self.low}, {self.high})"
                )
            if self.log and (self.low <= 0 or self.step is not None):
                raise ValueError(f"{where}: log = true needs low > 0 and no step, got {self.low}")
        if self.type == "blocks":
            if self.net is None or self.low < 1:
                raise ValueError(f"{where}: type blocks needs net and low >= 1")
        elif self.per_block is not None:
            if self.field is None or self.path is not None:
                raise ValueError(f"{where}: per_block genes set a block field: give field, no path")
        elif self.path is None:
            raise ValueError(f"{where}: give path (a dotted spec path such as g_lr)")
        return self


def _finite(value: Any) -> bool:
    """Whether a choice holds no inf or nan, at any depth (a kernel choice is a list)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_finite(item) for item in value)
    return True


class BudgetConfig(StrictModel):
    """How long one ensemble member trains: steps of one epoch, epochs, or seconds."""

    kind: Literal["steps", "epochs", "seconds"] = "steps"
    amount: float = Field(default=4, gt=0)
    timeout_s: float | None = Field(default=None, gt=0)  # a candidate running longer fails
    max_memory_mb: float | None = Field(default=None, gt=0)  # estimated need above: rejected


MIN_TEST_EVENTS = 8
"""Held-out showers the fitness score needs at least: its floor compares two halves of them,
each of at least 4 (as training validation's ``MIN_VALIDATION_EVENTS``)."""


class FitnessConfig(StrictModel):
    """fitness = mean member score + beta x spread; optional second objective."""

    members: PositiveInt = 1
    beta: float = 0.0
    second_objective: Literal["none", "params", "flops"] = "none"
    test_events: int = Field(default=100, ge=MIN_TEST_EVENTS)
    energy_bins: PositiveInt = 3
    # what members are scored by (evogan.physics.score; lower is better): the selection score,
    # or one of its reported metrics
    metric: Literal["score", "separation", "fpd", "kpd", "classifier_auc", "sf_error"] = "score"


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

    population: PositiveInt = 4
    offspring: PositiveInt = 2
    tournament: PositiveInt = 2
    crossover: float = Field(default=0.3, ge=0, le=1)
    gene_mutation: float = Field(default=0.3, ge=0, le=1)  # per gene; at least one always
    invalid: Literal["repair", "reject"] = "repair"
    inherit_weights: bool = False  # children with the parent's layer shapes start from its weights
    migration: MigrationConfig = Field(default_factory=lambda: MigrationConfig(**SEARCH_MIGRATION))

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

    sampler: Literal["tpe", "cmaes", "nsga2", "random"] = "tpe"
    startup_trials: NonNegativeInt = 4
    population: PositiveInt = 8  # NSGA-II generation size


class FinalConfig(StrictModel):
    """The significance test at the end of a campaign: the ``top`` best candidates and the base
    spec re-trained with ``retrain_seeds`` fresh seeds each (a test needs two or more)."""

    retrain_seeds: int = Field(default=5, ge=2)
    top: NonNegativeInt = 1  # 0: no final step


class PruningConfig(StrictModel):
    """Multi-fidelity pruning: candidates are scored at rungs ``min_budget x reduction_factor^k``
    (units of ``budget.kind``) below the full budget; the worst stop early (``pruned``)."""

    kind: Literal["none", "successive_halving", "hyperband"] = "none"
    min_budget: float | None = Field(default=None, gt=0)  # default: budget.amount / factor^2
    reduction_factor: int = Field(default=3, ge=2)


PBT_PATHS = (
    "g_lr",
    "d_lr",
    "batch_size",
    "rmsprop_alpha",
    "rmsprop_eps",
    "label_flip",
    "generator_steps",
    "loss_weights.*",
)
"""Spec values PBT genes may set: training hyper-parameters that keep every layer's shape, so
weights copied from one worker fit any other."""


class PbtConfig(StrictModel):
    """Population Based Training: each rank group trains one worker for ``budget.amount`` in
    segments of ``interval`` (units of ``budget.kind``); after every segment the worst
    ``quantile`` of the workers copy the weights and hyper-parameters of one of the best
    ``quantile`` and perturb the genes named in ``perturb`` (default: every gene of ``space``)
    by a factor drawn from ``factors``, or redraw them with ``resample_probability``."""

    interval: float = Field(default=1, gt=0)
    quantile: float = Field(default=0.25, gt=0, le=0.5)
    factors: list[float] = Field(default_factory=lambda: [0.8, 1.2], min_length=1)
    resample_probability: float = Field(default=0.25, ge=0, le=1)
    perturb: list[str] | None = None

    @field_validator("factors")
    @classmethod
    def _positive(cls, factors: list[float]) -> list[float]:
        if any(f <= 0 for f in factors):
            raise ValueError(f"every factor must be > 0, got {factors}")
        return factors


class CampaignConfig(StrictModel):
    root: str | None = None
    name: str | None = None
    top: PositiveInt = 5  # best candidates kept in summary.json
    tensorboard: bool = False  # the candidate table as TensorBoard scalars

    _tensorboard = field_validator("tensorboard")(tensorboard_installed)


class SearchConfig(StrictModel):
    """``task: search``: an architecture search campaign (``evogan search``)."""

    task: Literal["search"] = "search"
    seed: int = 0
    backend: Literal["ga", "optuna", "pbt"] = "ga"
    candidates: PositiveInt = 8  # trained candidates of the whole campaign (not used by pbt)
    ranks_per_group: PositiveInt = 1  # ranks that train one candidate together (an island)
    base: str | None = None  # YAML with the base spec (bare or a gan3d config)
    spec: GanSpec | None = None  # or the base spec inline
    space: list[GeneConfig] = Field(min_length=1)
    data: DataConfig = Field(default_factory=DataConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    fitness: FitnessConfig = Field(default_factory=FitnessConfig)
    ga: GASearchConfig = Field(default_factory=GASearchConfig)
    optuna: OptunaSearchConfig = Field(default_factory=OptunaSearchConfig)
    campaign: CampaignConfig = Field(default_factory=CampaignConfig)
    pruning: PruningConfig = Field(default_factory=PruningConfig)
    final: FinalConfig = Field(default_factory=FinalConfig)
    pbt: PbtConfig = Field(default_factory=PbtConfig)

    def check_ranks(self, world_size: int) -> None:
        """The rank layout of a campaign on ``world_size`` ranks, in one line naming the fix:
        whole rank groups, and for PBT a population of two groups or more. ``evogan search``
        checks it from the launcher's environment before torch and MPI load."""
        if world_size % self.ranks_per_group:
            raise ConfigError(
                f"the number of ranks must be a multiple of ranks_per_group = "
                f"{self.ranks_per_group}, got {world_size}; change mpirun -n or ranks_per_group"
            )
        groups = world_size // self.ranks_per_group
        if self.backend == "pbt" and groups < 2:
            raise ConfigError(
                f"backend: pbt trains one worker per rank group and needs a population of at "
                f"least 2 rank groups; ranks_per_group = {self.ranks_per_group} on {world_size} "
                f"rank(s) gives {groups}: run mpirun -n {2 * self.ranks_per_group} or more, or "
                "lower ranks_per_group"
            )

    @model_validator(mode="before")
    @classmethod
    def _spec_for_detector(cls, raw: Any) -> Any:
        """An inline base spec is written for ``data.detector`` (as a ``base`` file is:
        :func:`evogan.search.campaign.resolve_base`)."""
        if isinstance(raw, dict) and raw.get("spec") is not None:
            return {**raw, "spec": fit_to_data(raw["spec"], raw.get("data"))}
        return raw

    @model_validator(mode="after")
    def _pruning_fits_budget(self) -> SearchConfig:
        """A min_budget above the budget could never be reached (raised as is: one line)."""
        low, amount = self.pruning.min_budget, self.budget.amount
        if self.pruning.kind != "none" and low is not None and low > amount:
            raise ConfigError(
                f"pruning.min_budget = {low:g} is not allowed: it must be <= budget.amount = "
                f"{amount:g} ({self.budget.kind})"
            )
        return self

    @model_validator(mode="after")
    def _pbt_fits(self) -> SearchConfig:
        """PBT's segments, genes and perturbed names (raised as is: one line each)."""
        if self.backend != "pbt":
            return self
        pbt, budget = self.pbt, self.budget
        segments = budget.amount / pbt.interval
        if segments < 1 or abs(segments - round(segments)) > 1e-9:
            raise ConfigError(
                f"pbt.interval = {pbt.interval:g} is not allowed: it must divide budget.amount = "
                f"{budget.amount:g} ({budget.kind}) into whole segments"
            )
        if self.pruning.kind != "none":
            raise ConfigError(
                f"pruning.kind = {self.pruning.kind!r} is not allowed with backend: pbt "
                "(its exploit step stops bad workers already): use none"
            )
        for gene in self.space:
            path = gene.path or ""
            ok = path in PBT_PATHS or path.startswith("loss_weights.")
            if gene.type == "blocks" or gene.per_block is not None or not ok:
                raise ConfigError(
                    f"space gene {gene.name} (path = {gene.path!r}) is not allowed with backend: "
                    f"pbt, which perturbs training hyper-parameters only: {', '.join(PBT_PATHS)}"
                )
        names = [gene.name for gene in self.space]
        unknown = [name for name in pbt.perturb or [] if name not in names]
        if unknown:
            raise ConfigError(
                f"pbt.perturb = {pbt.perturb} is not allowed: {unknown[0]!r} is no gene of "
                f"space; allowed: {', '.join(names)}"
            )
        return self

    @model_validator(mode="after")
    def _one_base(self) -> SearchConfig:
        if (self.base is None) == (self.spec is None):
            raise ValueError("give exactly one of base (a YAML path) and spec (inline)")
        names = [gene.name for gene in self.space]
        if len(set(names)) != len(names):
            raise ValueError(f"gene names must be unique, got {names}")
        for index, gene in enumerate(self.space):
            if gene.per_block is None:
                continue
            owner = next((g for g in self.space[:index] if g.name == gene.per_block), None)
            if owner is None or owner.type != "blocks":
                raise ValueError(
                    f"gene {gene.name}: per_block must name a blocks gene listed before it, "
                    f"got {gene.per_block!r}"
                )
        return self
