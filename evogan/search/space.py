"""The search space: genes over a base 3DGAN spec, and genomes that become specs.

A genome is a plain ``dict`` gene name -> value (JSON-serialisable, so it travels over MPI and
into the campaign table). A per-block gene holds one value per possible block (the ``high`` of
its blocks gene); only the first n are *active*, n the value of the blocks gene, so mutation of
the count keeps the inactive genes for later (the usual encoding of conditional genes).
:meth:`Space.spec` applies a genome to the base spec and validates the result, which runs the
shape arithmetic of :mod:`evogan.gan3d.model.spec`: an impossible candidate is known before
anything is allocated. A gene none of whose values makes a valid spec for the base spec's
detector (one written for another window) is refused when the space is built.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from evogan.config.base import validate
from evogan.config.search import GeneConfig
from evogan.errors import ConfigError
from evogan.gan3d.model.spec import GanSpec

Genome = dict[str, Any]


class Space:
    """Genes over ``base``; every random draw takes the caller's generator."""

    def __init__(self, genes: Sequence[GeneConfig], base: GanSpec) -> None:
        self.genes = list(genes)
        self.base = base
        self._raw = base.model_dump(mode="json")
        self._by_name = {gene.name: gene for gene in self.genes}
        for gene in self.genes:
            self._check_path(gene)
        for gene in self.genes:
            self._check_range(gene)

    # ----------------------------------------------------------------- genomes
    def width(self, gene: GeneConfig) -> int:
        """Stored values of a gene: 1, or the most blocks its count gene allows."""
        if gene.per_block is None:
            return 1
        return int(self._by_name[gene.per_block].high)

    def sample(self, rng: np.random.Generator) -> Genome:
        genome: Genome = {}
        for gene in self.genes:
            values = [draw_value(gene, rng) for _ in range(self.width(gene))]
            genome[gene.name] = values if gene.per_block is not None else values[0]
        return genome

    def default(self) -> Genome:
        """The genome of the base spec (each gene at the base's value, or its nearest)."""
        genome: Genome = {}
        for gene in self.genes:
            if gene.type == "blocks":
                genome[gene.name] = clip_value(gene, 1)
            elif gene.per_block is not None:
                genome[gene.name] = [_nearest(gene, self._base_value(gene))] * self.width(gene)
            else:
                genome[gene.name] = _nearest(gene, self._base_value(gene))
        return genome

    def base_genome(self) -> Genome:
        """The base spec's own genome, for a search that starts from the hand design
        (``start_from_base``); ConfigError (one line) when a gene cannot hold the base's value,
        since the nearest value would start the search somewhere else."""
        genome = self.default()
        for gene in self.genes:
            if gene.type == "blocks":
                continue
            value = self._base_value(gene)
            held = genome[gene.name][0] if gene.per_block is not None else genome[gene.name]
            if not _same_value(gene, held, value):
                where = gene.choices if gene.type == "categorical" else [gene.low, gene.high]
                kind = "choices" if gene.type == "categorical" else "range"
                step = f" on step {gene.step}" if gene.step is not None else ""
                raise ConfigError(
                    f"start_from_base: gene {gene.name} cannot hold the base spec's "
                    f"{gene.path or gene.field} = {json.dumps(value)} (its {kind} "
                    f"{json.dumps(where)}{step}); add the value to the gene or set "
                    "start_from_base: false"
                )
        return genome

    def _base_value(self, gene: GeneConfig) -> Any:
        """The base spec's value of a gene (a per-block gene's: its template block's)."""
        if gene.per_block is not None:
            owner = self._by_name[gene.per_block]
            return self._raw[owner.net][owner.repeat][gene.field]
        return _get(self._raw, gene.path)

    def active(self, genome: Genome) -> Genome:
        """The genome without inactive per-block values (what the table and Optuna show)."""
        out = {}
        for gene in self.genes:
            value = genome[gene.name]
            if gene.per_block is not None:
                value = list(value[: int(genome[gene.per_block])])
            out[gene.name] = value
        return out

    def key(self, genome: Genome) -> str:
        """Identity of the architecture a genome makes (inactive genes do not count)."""
        return json.dumps(self.active(genome), sort_keys=True)

    def mutate(self, genome: Genome, rng: np.random.Generator, rate: float) -> Genome:
        """Redraw each gene with probability ``rate``; at least one gene always changes."""
        child = copy.deepcopy(genome)
        chosen = [i for i in range(len(self.genes)) if rng.random() < rate]
        if not chosen:
            chosen = [int(rng.integers(len(self.genes)))]
        for index in chosen:
            gene = self.genes[index]
            if gene.per_block is None:
                child[gene.name] = _perturb(gene, child[gene.name], rng)
            else:
                slot = int(rng.integers(int(child[gene.per_block])))
                child[gene.name][slot] = _perturb(gene, child[gene.name][slot], rng)
        return child

    def crossover(
        self, first: Genome, second: Genome, rng: np.random.Generator
    ) -> tuple[Genome, Genome]:
        """Uniform crossover gene by gene (a per-block gene moves with all its blocks)."""
        a, b = copy.deepcopy(first), copy.deepcopy(second)
        for gene in self.genes:
            if gene.per_block is None and rng.random() < 0.5:
                a[gene.name], b[gene.name] = b[gene.name], a[gene.name]
        for gene in self.genes:  # keep block counts with their per-block values
            if gene.type == "blocks" and a[gene.name] != first[gene.name]:
                for other in self.genes:
                    if other.per_block == gene.name:
                        a[other.name], b[other.name] = (
                            copy.deepcopy(second[other.name]),
                            copy.deepcopy(first[other.name]),
                        )
        return a, b

    # ----------------------------------------------------------------- specs
    def spec(self, genome: Genome) -> GanSpec:
        """The validated spec of ``genome``; ConfigError (one line) when it cannot be built."""
        return validate(GanSpec, self._apply(genome, self.genes), source="candidate spec")

    def _apply(self, genome: Genome, genes: Sequence[GeneConfig]) -> dict[str, Any]:
        """The raw base spec with the values of ``genes`` (a per-block gene's blocks gene among
        them) taken from ``genome``; every other value stays the base spec's."""
        raw = copy.deepcopy(self._raw)
        for gene in genes:  # expand block lists first, last copy index highest first
            if gene.type == "blocks":
                blocks = raw[gene.net]
                template = blocks[gene.repeat]
                count = int(genome[gene.name])
                copies = [copy.deepcopy(template) for _ in range(count)]
                raw[gene.net] = blocks[: gene.repeat] + copies + blocks[gene.repeat + 1 :]
        for gene in genes:
            if gene.type == "blocks":
                continue
            if gene.per_block is not None:
                owner = self._by_name[gene.per_block]
                for k in range(int(genome[owner.name])):
                    raw[owner.net][owner.repeat + k][gene.field] = genome[gene.name][k]
            else:
                _set(raw, gene.path, genome[gene.name])
        raw["name"] = f"{self.base.name}-search"
        return raw

    def failures(self, gene: GeneConfig) -> list[tuple[Any, str]]:
        """``(value, reason)`` for each of :func:`trial_values` of ``gene`` that makes no valid
        spec when set alone on the base spec (a per-block value in every copy the blocks
        gene's lowest count makes). Shape arithmetic only: no network is built."""
        default = self.default()
        genes = [gene]
        if gene.per_block is not None:
            genes.insert(0, self._by_name[gene.per_block])
        failed = []
        for value in trial_values(gene):
            genome = {**default, gene.name: value}
            if gene.per_block is not None:
                genome[gene.name] = [value] * self.width(gene)
            try:
                validate(GanSpec, self._apply(genome, genes), source="candidate spec")
            except ConfigError as exc:
                failed.append((value, str(exc)))
        return failed

    def check(self, genome: Genome) -> str | None:
        """None when ``genome`` makes a valid spec, else the one-line reason."""
        try:
            self.spec(genome)
        except ConfigError as exc:
            return str(exc)
        return None

    def repair(self, genome: Genome) -> Genome | None:
        """The nearest valid genome: first the genome with one gene reset to the base spec's
        value (trying genes in space order), else resetting genes cumulatively; None when even
        that fails (only a space whose defaults cannot make the base spec ends there)."""
        default = self.default()
        for gene in self.genes:
            fixed = copy.deepcopy(genome)
            fixed[gene.name] = copy.deepcopy(default[gene.name])
            if self.check(fixed) is None:
                return fixed
        fixed = copy.deepcopy(genome)
        for gene in self.genes:
            fixed[gene.name] = copy.deepcopy(default[gene.name])
            if self.check(fixed) is None:
                return fixed
        return None

    # ----------------------------------------------------------------- optuna
    def suggest(self, trial: Any) -> Genome:
        """A genome from an Optuna trial (define-by-run: per-block genes are conditional)."""
        genome: Genome = {}
        for gene in self.genes:
            if gene.per_block is None:
                genome[gene.name] = _suggest(trial, gene, gene.name)
                continue
            count = int(genome[gene.per_block])
            values = [_suggest(trial, gene, f"{gene.name}_{k}") for k in range(count)]
            pad = self.width(gene) - count
            genome[gene.name] = values + [values[-1]] * pad
        return genome

    # ----------------------------------------------------------------- checks
    def _check_range(self, gene: GeneConfig) -> None:
        """Refuse a gene none of whose values makes a valid spec: every genome would be
        repaired away from it (GA) or rejected (Optuna), so it searches nothing."""
        values = trial_values(gene)
        failed = self.failures(gene)
        if len(failed) < len(values):
            return
        shape = "x".join(map(str, self.base.output_shape))
        where = f"the {shape} window"
        if self.base.detector is not None:
            where = f"detector {self.base.detector} ({shape})"
        raise ConfigError(
            f"space gene {gene.name}: none of its values {_show(values)} makes a valid spec for "
            f"{where}: {failed[0][1]}; change its range"
        )

    def _check_path(self, gene: GeneConfig) -> None:
        if gene.type == "blocks":
            blocks = self._raw[gene.net]
            if gene.repeat >= len(blocks):
                raise ConfigError(
                    f"gene {gene.name}: repeat must index a {gene.net} block of the base spec "
                    f"(0..{len(blocks) - 1}), got {gene.repeat}"
                )
            return
        if gene.per_block is not None:
            owner = self._by_name[gene.per_block]
            if gene.field not in self._raw[owner.net][owner.repeat]:
                raise ConfigError(
                    f"gene {gene.name}: field must be a key of a {owner.net} block, got "
                    f"{gene.field!r}"
                )
            return
        try:
            _get(self._raw, gene.path)
        except (KeyError, IndexError, TypeError, ValueError):
            raise ConfigError(
                f"gene {gene.name}: path must name a value of the base spec, got {gene.path!r}"
            ) from None


TRIAL_POINTS = 5
"""Values of a numeric gene the range check tries: low, high and evenly spaced ones between
(in log space for log genes)."""


def trial_values(gene: GeneConfig) -> list[Any]:
    """The values the range check tries: every choice, every count of a blocks gene, else
    :data:`TRIAL_POINTS` points of the range on its step (fewer where they coincide)."""
    if gene.type == "categorical":
        return copy.deepcopy(list(gene.choices))
    if gene.type == "blocks":
        return sorted({clip_value(gene, n) for n in range(int(gene.low), int(gene.high) + 1)})
    low, high = (math.log(gene.low), math.log(gene.high)) if gene.log else (gene.low, gene.high)
    values: list[Any] = []
    for point in np.linspace(low, high, TRIAL_POINTS):
        value = clip_value(gene, math.exp(point) if gene.log else point)
        if value not in values:
            values.append(value)
    return values


def _show(values: list[Any]) -> str:
    """Values as a short list: floats to 3 significant digits, the rest as JSON."""
    shown = (f"{v:.3g}" if isinstance(v, float) else json.dumps(v) for v in values)
    return "[" + ", ".join(shown) + "]"


def draw_value(gene: GeneConfig, rng: np.random.Generator) -> Any:
    """A value of ``gene`` drawn from its range (log-uniform for log genes) or choices."""
    if gene.type == "categorical":
        return copy.deepcopy(gene.choices[int(rng.integers(len(gene.choices)))])
    if gene.log:
        value = math.exp(rng.uniform(math.log(gene.low), math.log(gene.high)))
    else:
        value = rng.uniform(gene.low, gene.high)
    if gene.type in ("int", "blocks"):
        if gene.step is None and not gene.log:
            return int(rng.integers(int(gene.low), int(gene.high) + 1))
        return clip_value(gene, value)
    return clip_value(gene, value)


def _perturb(gene: GeneConfig, value: Any, rng: np.random.Generator) -> Any:
    """A local move: a new categorical choice, or a Gaussian step of a fifth of the range
    (in log space for log genes); integers move by at least one step."""
    if gene.type == "categorical":
        others = [c for c in gene.choices if c != value] or list(gene.choices)
        return copy.deepcopy(others[int(rng.integers(len(others)))])
    if gene.log:
        span = math.log(gene.high) - math.log(gene.low)
        moved = math.exp(math.log(value) + rng.normal(0.0, span / 5 or 1.0))
    else:
        moved = value + rng.normal(0.0, (gene.high - gene.low) / 5 or 1.0)
    new = clip_value(gene, moved)
    if gene.type in ("int", "blocks") and new == value and gene.low < gene.high:
        unit = int(gene.step or 1)
        new = clip_value(gene, value + unit * (1 if rng.random() < 0.5 else -1))
        if new == value:
            new = clip_value(gene, value - unit if value + unit > gene.high else value + unit)
    return new


def clip_value(gene: GeneConfig, value: float) -> Any:
    """``value`` within the gene's bounds, on its step, an integer for integer genes."""
    value = min(max(float(value), gene.low), gene.high)
    if gene.step is not None:
        value = gene.low + round((value - gene.low) / gene.step) * gene.step
        value = min(value, gene.high)
    if gene.type in ("int", "blocks"):
        return round(value)
    return float(value)


def _nearest(gene: GeneConfig, value: Any) -> Any:
    if gene.type == "categorical":
        as_json = json.dumps(value)
        for choice in gene.choices:
            if json.dumps(choice) == as_json:
                return copy.deepcopy(choice)
        return copy.deepcopy(gene.choices[0])
    return clip_value(gene, value)


def _same_value(gene: GeneConfig, held: Any, value: Any) -> bool:
    if gene.type == "categorical" or not isinstance(value, int | float):
        return json.dumps(held) == json.dumps(value)
    return math.isclose(float(held), float(value), rel_tol=1e-9)


def _suggest(trial: Any, gene: GeneConfig, name: str) -> Any:
    if gene.type == "categorical":  # Optuna choices must be scalars: encode lists as JSON
        labels = [json.dumps(c) for c in gene.choices]
        return json.loads(trial.suggest_categorical(name, labels))
    if gene.type in ("int", "blocks"):
        step = int(gene.step or 1)
        return trial.suggest_int(name, int(gene.low), int(gene.high), step=step, log=gene.log)
    return trial.suggest_float(name, gene.low, gene.high, step=gene.step, log=gene.log)


def _parts(path: str) -> list[str | int]:
    """``generator.-1.kernel`` -> ["generator", -1, "kernel"] (list indices may be negative)."""
    return [int(p) if p.lstrip("-").isdigit() else p for p in path.split(".")]


def _get(raw: Any, path: str) -> Any:
    node = raw
    for part in _parts(path):
        node = node[part]
    return node


def _set(raw: Any, path: str, value: Any) -> None:
    parts = _parts(path)
    node = raw
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
