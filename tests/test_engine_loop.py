"""The generation loop on small in-memory problems: selection, NaN handling, reproducibility,
hooks, DEAP records and the hybrid strategy."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
import torch

from evogan.engine import (
    Constant,
    DifferentiableProblem,
    GenerationContext,
    Hybrid,
    PlusLambda,
    Streams,
    point_mutation,
)


class Sphere(DifferentiableProblem):
    """Noisy sphere: each batch is a random shift of the optimum, like a data minibatch."""

    def __init__(self, size: int = 20, batches: int = 5, nan_rows: int = 0) -> None:
        self.size = size
        self.n_batches = batches
        self.nan_rows = nan_rows
        self.evaluated: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def initial_genomes(self, count: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randn(count, self.size, generator=generator) * 3

    def mutate(self, parent, count, seed: int, context: GenerationContext, only=None):
        return point_mutation(parent, count, context.rate, context.power, seed, only)

    def evaluate(self, genomes: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        fitness = ((genomes - batch) ** 2).sum(dim=1)
        if self.nan_rows:
            fitness[-self.nan_rows :] = math.nan
        self.evaluated.append((genomes.clone(), batch.clone(), fitness.clone()))
        return fitness

    def loss(self, genome: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        return ((genome - batch) ** 2).sum()

    def batches(self, epoch: int, generator: torch.Generator):
        for _ in range(self.n_batches):
            yield 0.1 * torch.randn(self.size, generator=generator)


def _run(problem, strategy=PlusLambda, seed: int = 0, **kwargs: Any):
    engine = strategy(
        problem,
        children=6,
        initial_parents=4,
        epochs=kwargs.pop("epochs", 4),
        streams=Streams.derive(seed),
        rate=Constant(0.3),
        power=Constant(0.5),
        **kwargs,
    )
    return engine, engine.run()


def test_elite_never_gets_worse_on_the_batch_it_was_selected_on() -> None:
    problem = Sphere()
    engine, result = _run(problem)
    assert result.generations == 20 and result.evaluations == 4 + 19 * 7
    later = zip(problem.evaluated[1:], engine.logbook[1:], strict=True)
    for (genomes, batch, fitness), record in later:
        old_elite_fitness = fitness[0]
        assert record["best"] <= old_elite_fitness
        new_elite = genomes[int(torch.argmin(fitness))]
        assert ((new_elite - batch) ** 2).sum() == pytest.approx(record["best"])
    # the elite is re-evaluated with its children: row 0 of every later generation
    for previous, current in zip(problem.evaluated, problem.evaluated[1:], strict=False):
        assert torch.equal(current[0][0], previous[0][int(torch.argmin(previous[2]))])
    assert result.best_fitness < problem.evaluated[0][2].min()


def test_nan_fitness_ranks_last_instead_of_crashing() -> None:
    problem = Sphere(nan_rows=2)
    records: list[dict] = []
    _, result = _run(problem, epochs=2, observers=[records.append])
    assert math.isfinite(result.elite_fitness)
    for _, _, fitness in problem.evaluated:
        assert torch.isnan(fitness[-2:]).all()
    generations = [r for r in records if r["kind"] == "generation"]
    assert all(r["invalid"] == 2 and math.isfinite(r["worst"]) for r in generations)


def test_same_seed_gives_identical_runs_and_other_seed_does_not() -> None:
    _, first = _run(Sphere(), seed=5)
    _, second = _run(Sphere(), seed=5)
    _, other = _run(Sphere(), seed=6)
    assert torch.equal(first.best, second.best)
    assert [r["best"] for r in first.logbook] == [r["best"] for r in second.logbook]
    assert not torch.equal(first.best, other.best)


def test_hooks_observers_and_hall_of_fame() -> None:
    seen: list[str] = []

    class Counting(PlusLambda):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.after_step.append(lambda record: seen.append("generation"))
            self.after_epoch.append(lambda record: seen.append("epoch"))

    records: list[dict] = []
    engine, result = _run(
        Sphere(),
        strategy=Counting,
        epochs=3,
        observers=[records.append],
        hall_of_fame=2,
        epoch_report=lambda genome: {"norm": float(genome.norm())},
    )
    assert seen == (["generation"] * 5 + ["epoch"]) * 3
    assert [r["kind"] for r in records] == seen
    epochs = [r for r in records if r["kind"] == "epoch"]
    assert all("norm" in r for r in epochs)
    # without a reference set the hall of fame ranks epoch-end elites by their last fitness
    assert result.best_fitness == min(r["elite_fitness"] for r in epochs)
    assert len(result.hall_of_fame) == 2
    assert len(engine.logbook) == 15 and engine.logbook.select("nevals")[1] == 7


def test_hybrid_steps_move_the_elite_downhill() -> None:
    problem = Sphere(size=10, batches=3)
    engine, result = _run(problem, strategy=Hybrid, epochs=2, steps=3, lr=0.05)
    assert engine.gradient_steps == 3 * 6
    # the elite carried into a generation is the refined one: not one of the last candidates
    genomes, batch, fitness = problem.evaluated[-1]
    selected = genomes[int(torch.argmin(fitness))]
    assert not torch.equal(result.elite, selected)
    assert problem.loss(result.elite, batch) < fitness.min()


def _overshooting(keep_steps: str, epochs: int = 3) -> Hybrid:
    """A hybrid with a learning rate so large that RMSprop's first step (ten times it)
    overshoots."""
    return Hybrid(
        Sphere(size=10, batches=4),
        steps=1,
        lr=1.0,
        keep_steps=keep_steps,
        children=4,
        initial_parents=2,
        epochs=epochs,
        streams=Streams.derive(5),
        rate=Constant(0.3),
        power=Constant(0.1),
    )


def _refinements(keep_steps: str) -> tuple[Hybrid, list[tuple[float, float]]]:
    """(fitness of the selected elite, its loss after refinement) on every batch of an
    overshooting hybrid."""
    engine = _overshooting(keep_steps)
    problem = engine.problem
    pairs = []

    def compare(selection) -> None:
        batch = problem.evaluated[-1][1]
        after = float(problem.loss(engine.elite, batch))
        pairs.append((float(selection.fitness[selection.kept]), after))

    engine.after_selection.append(compare)
    engine.run()
    return engine, pairs


def test_hybrid_keeps_only_steps_that_do_not_worsen_the_elite() -> None:
    always, raised = _refinements("always")
    assert any(after > before for before, after in raised)  # overshooting steps are kept
    guarded, pairs = _refinements("no_worse")
    assert all(after <= before for before, after in pairs)
    assert any(after < before for before, after in pairs)  # good steps are still kept
    assert 0 < guarded.discarded_refinements < len(pairs)
    assert guarded.gradient_steps == always.gradient_steps == len(pairs)
    with pytest.raises(ValueError, match="keep_steps must be"):
        Hybrid(Sphere(), keep_steps="sometimes", streams=Streams.derive(0))


def test_trained_weights_compete_with_the_children_on_the_next_batch() -> None:
    engine = _overshooting("compete", epochs=4)
    seen = []  # every selection, with the elite after it and the weights its steps gave

    def record(selection) -> None:
        seen.append((selection, engine.elite.clone(), engine.trained))

    engine.after_selection.append(record)
    engine.run()
    wins = 0
    for (_, _, trained), (selection, elite, _) in itertools.pairwise(seen):
        candidates, fitness, kept = selection.candidates, selection.fitness, selection.kept
        assert torch.equal(candidates[-1], trained)  # the last candidate
        # the elite is the candidate that won: the steps never change it
        assert not selection.refined and torch.equal(elite, candidates[kept])
        assert fitness[kept] == fitness.min()
        wins += kept == candidates.shape[0] - 1
    assert 0 < wins < len(seen) - 1  # overshooting steps lose, good ones win
    assert engine.discarded_refinements == len(seen) - 1 - wins
    assert engine.gradient_steps == len(seen)
    with pytest.raises(ValueError, match="keep_steps must be one of always, no_worse, compete"):
        Hybrid(Sphere(), keep_steps="next", streams=Streams.derive(0))


def test_steps_driven_by_hand_give_a_result_and_run_the_hooks() -> None:
    now = [100.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    problem = Sphere(size=8)
    engine = PlusLambda(
        problem, children=3, initial_parents=2, epochs=1, streams=Streams.derive(2), clock=clock
    )
    with pytest.raises(ValueError, match="no generation has run yet"):
        engine.result()
    contexts, selections, admitted = [], [], []
    engine.before_step.append(contexts.append)

    def admit(candidates: torch.Tensor, context: GenerationContext) -> torch.Tensor:
        admitted.append(candidates.shape[0])
        return candidates

    engine.before_evaluation.append(admit)
    engine.after_selection.append(selections.append)
    batches = [torch.full((8,), 0.5 * i) for i in range(4)]
    for batch in batches:
        engine.step(batch, epoch=0)
    result = engine.result()
    # no epoch ended: the hall of fame is empty and the best is the elite on its last batch
    assert len(result.hall_of_fame) == 0 and torch.equal(result.best, engine.elite)
    assert result.best_fitness == engine.elite_fitness == float(selections[-1].fitness.min())
    assert result.generations == 4 and result.evaluations == 2 + 3 * 4
    assert [c.generation for c in contexts] == [0, 1, 2, 3] and admitted == [2, 4, 4, 4]
    assert not any(selection.refined for selection in selections)
    # wall time counts from the first step (clock 101), not from when the clock started
    assert 0 < result.wall_seconds < 100
    assert result.wall_seconds == pytest.approx(now[0] - 101.0)


def test_a_hook_can_stop_the_run_after_a_step() -> None:
    engine = PlusLambda(
        Sphere(), children=2, initial_parents=2, epochs=3, streams=Streams.derive(0)
    )
    engine.after_step.append(lambda record: record["generation"] == 6 and engine.request_stop())
    result = engine.run()
    assert engine.stop_requested and result.generations == 7 and len(result.epochs) == 1


@pytest.mark.parametrize("keep_steps", ["always", "no_worse", "compete"])
def test_loop_state_round_trips_into_a_fresh_strategy(keep_steps: str) -> None:
    def build() -> Hybrid:
        ticks = iter(range(10**6))  # a clock that moves one second per reading
        return Hybrid(
            Sphere(size=10, batches=3),
            steps=2,
            lr=0.5,
            keep_steps=keep_steps,
            children=4,
            initial_parents=2,
            epochs=2,
            streams=Streams.derive(9),
            rate=Constant(0.3),
            power=Constant(0.5),
            clock=lambda: float(next(ticks)),
        )

    whole = build()
    whole.run()
    first = build()
    first.epochs = 1
    first.run()
    first.epochs = 2
    resumed = build()
    resumed.load_state(first.state())
    resumed.run()
    assert torch.equal(resumed.elite, whole.elite)
    assert resumed.gradient_steps == whole.gradient_steps
    assert resumed.discarded_refinements == whole.discarded_refinements
    assert [r["best"] for r in resumed.logbook] == [r["best"] for r in whole.logbook]
    before, result = first.state().wall_seconds, resumed.result()
    assert result.wall_seconds >= max(result.train_seconds, before) > 0  # the clock goes on


def test_bad_strategy_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="lambda"):
        PlusLambda(Sphere(), children=0, epochs=1, streams=Streams.derive(0))
    with pytest.raises(ValueError, match="epochs"):
        PlusLambda(Sphere(), epochs=0, streams=Streams.derive(0))
