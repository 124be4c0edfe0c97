"""The ``task: search`` config: an architecture search campaign over the 3DGAN spec.

A campaign samples genomes from a search ``space`` (genes that set values of a base
:class:`~evogan.gan3d.model.spec.GanSpec`), trains each candidate for a short ``budget`` on the
data-parallel trainer with one rank group, scores it by physics validation over an ensemble of
``fitness.members`` trainings, and searches with a GA (``backend: ga``, islands of rank groups),
Optuna (``backend: optuna``, one rank owns the study) or Population Based Training
(``backend: pbt``, one worker per rank group, trained in segments). See docs/explanation/search.md.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from evogan.config.base import StrictModel
from evogan.config.data import DataConfig
from evogan.config.search_sections import (
    BudgetConfig,
    CampaignConfig,
    FinalConfig,
    FitnessConfig,
    GASearchConfig,
    OptunaSearchConfig,
    PbtConfig,
    PruningConfig,
)
from evogan.config.trainer import TrainerConfig
from evogan.errors import ConfigError
from evogan.gan3d.model.spec import GanSpec, fit_to_data


class GeneConfig(StrictModel):
    """One gene. ``path`` is a dotted path into the spec (``generator.0.filters``);
    ``type: blocks`` makes the number of copies of block ``repeat`` of ``net`` a gene, and a
    gene with ``per_block: NAME`` sets ``field`` of every copy made by blocks gene ``NAME``
    (conditional genes: only the first n of them are active)."""

    name: str = Field(
        pattern=r"^[A-Za-z][A-Za-z0-9_]*$", description="the gene's name in genomes and tables"
    )
    type: Literal["int", "float", "categorical", "blocks"] = Field(
        description="a number in [low, high], one of choices, or a count of block copies"
    )
    path: str | None = Field(default=None, description="dotted spec path the gene sets")
    low: float | None = Field(default=None, description="smallest value (int, float, blocks)")
    high: float | None = Field(default=None, description="largest value (int, float, blocks)")
    step: float | None = Field(default=None, description="grid step of the values; null: none")
    log: bool = Field(default=False, description="draw on a log scale (needs low > 0, no step)")
    choices: list[Any] | None = Field(default=None, description="the values of a categorical gene")
    net: Literal["generator", "discriminator"] | None = Field(
        default=None, description="blocks: the network whose block is copied"
    )
    repeat: NonNegativeInt = Field(default=0, description="blocks: index of the block copied")
    per_block: str | None = Field(
        default=None, description="the blocks gene whose every copy this gene sets"
    )
    field: str | None = Field(default=None, description="per_block: the block field it sets")

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


class SearchConfig(StrictModel):
    """``task: search``: an architecture search campaign (``evogan search``)."""

    task: Literal["search"] = Field(default="search", description="which task the file configures")
    seed: int = Field(default=0, description="root seed of every random stream of the campaign")
    backend: Literal["ga", "optuna", "pbt"] = Field(
        default="ga", description="GA islands, an Optuna study, or Population Based Training"
    )
    candidates: PositiveInt = Field(
        default=8, description="candidates trained by the whole campaign (not used by pbt)"
    )
    ranks_per_group: PositiveInt = Field(
        default=1, description="ranks that train one candidate together (an island)"
    )
    start_from_base: bool = Field(
        default=False,
        description="the base spec is the first candidate (GA island 0, Optuna trial 0, PBT "
        "worker 0)",
    )
    base: str | None = Field(
        default=None, description="YAML file with the base spec (bare or a gan3d config)"
    )
    spec: GanSpec | None = Field(default=None, description="the base spec inline, instead of base")
    space: list[GeneConfig] = Field(min_length=1, description="the genes searched over")
    data: DataConfig = Field(default_factory=DataConfig, description="the showers trained on")
    trainer: TrainerConfig = Field(
        default_factory=TrainerConfig, description="how each member training runs"
    )
    budget: BudgetConfig = Field(
        default_factory=BudgetConfig, description="how long each member trains"
    )
    fitness: FitnessConfig = Field(
        default_factory=FitnessConfig, description="how a candidate is scored"
    )
    ga: GASearchConfig = Field(default_factory=GASearchConfig, description="backend: ga")
    optuna: OptunaSearchConfig = Field(
        default_factory=OptunaSearchConfig, description="backend: optuna"
    )
    campaign: CampaignConfig = Field(
        default_factory=CampaignConfig, description="where the campaign directory goes"
    )
    pruning: PruningConfig = Field(
        default_factory=PruningConfig, description="stopping weak candidates early"
    )
    final: FinalConfig = Field(
        default_factory=FinalConfig, description="the significance test at the end"
    )
    pbt: PbtConfig = Field(default_factory=PbtConfig, description="backend: pbt")

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
