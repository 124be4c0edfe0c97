"""Step-size adaptation (success rule) and noise-aware elite acceptance of the (1+lambda),
on small in-memory problems, and their state across a resume."""

from __future__ import annotations

import math

import pytest
import torch

from evogan.engine import (
    Constant,
    GenerationContext,
    Hybrid,
    PlusLambda,
    Selection,
    Streams,
    SuccessRule,
    point_mutation,
)
from evogan.engine.acceptance import Reevaluation
from evogan.engine.problem import Problem
from tests.test_engine_loop import Sphere


class Shifted(Problem):
    """Noise-free sphere around ``optimum`` with the initial genomes at ``start``."""

    def __init__(self, start: float, optimum: float = 0.0, size: int = 10) -> None:
        self.start, self.optimum, self.size = start, optimum, size

    def initial_genomes(self, count: int, generator: torch.Generator) -> torch.Tensor:
        return torch.full((count, self.size), self.start)

    def mutate(self, parent, count, seed: int, context: GenerationContext, only=None):
        return point_mutation(parent, count, context.rate, context.power, seed, only)

    def evaluate(self, genomes: torch.Tensor, batch) -> torch.Tensor:
        return ((genomes - self.optimum) ** 2).sum(dim=1)


class Resampled(Sphere):
    """The noisy sphere with a re-evaluation sample: ``events`` draws average the noise down."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.samples: list[torch.Tensor] = []

    def sample(self, events: int, generator: torch.Generator) -> torch.Tensor:
        self.samples.append(0.1 * torch.randn(self.size, generator=generator) / math.sqrt(events))
        return self.samples[-1]


def _adaptive(problem: Problem, power: float, **kwargs) -> PlusLambda:
    return PlusLambda(
        problem,
        children=4,
        initial_parents=1,
        epochs=kwargs.pop("epochs", 1),
        streams=Streams.derive(kwargs.pop("seed", 0)),
        rate=Constant(0.2),
        power=Constant(power),
        adaptation=SuccessRule(window=5, factor=1.5, low=1e-4, high=1e4),
        **kwargs,
    )


def test_success_rule_moves_the_scale_once_per_window_within_its_bounds() -> None:
    rule = SuccessRule(window=4, factor=2.0, target=0.2, low=0.25, high=4.0)
    for success in (True, True, False):
        rule.record(success)
    assert rule.scale == 1.0  # the window is not over yet
    rule.record(False)
    assert rule.scale == 2.0 and rule.trials == rule.successes == 0
    for _ in range(12):
        rule.record(True)
    assert rule.scale == 4.0  # capped
    for _ in range(40):
        rule.record(False)
    assert rule.scale == 0.25
    assert SuccessRule(adapts="rate", high=100, scale=50).apply(0.1, 0.3) == (1.0, 0.3)
    assert SuccessRule(adapts="both", scale=2).apply(0.1, 0.3) == (0.2, 0.6)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"factor": 1.0}, "factor must be > 1"),
        ({"window": 0}, "window must be at least 1"),
        ({"low": 2.0}, "0 < low <= 1 <= high"),
        ({"target": 1.0}, "target must be in"),
    ],
)
def test_bad_adaptation_settings_are_rejected(settings, message) -> None:
    with pytest.raises(ValueError, match=message):
        SuccessRule(**settings)


def test_step_grows_on_a_slope_and_shrinks_near_the_optimum() -> None:
    slope = _adaptive(Shifted(start=100.0), power=1e-3)
    optimum = _adaptive(Shifted(start=0.0), power=1.0)
    powers = {}
    for name, engine in (("slope", slope), ("optimum", optimum)):
        for _ in range(61):
            record = engine.step(None, 0)
        powers[name] = record["power"]
    assert slope.adaptation.scale > 10 and powers["slope"] > 1e-2
    assert optimum.adaptation.scale < 0.1 and powers["optimum"] < 0.1


def test_acceptance_never_replaces_the_elite_with_one_worse_on_the_resample() -> None:
    problem = Resampled(size=10, batches=20)
    engine = _adaptive(problem, power=0.3, epochs=5, reevaluation_events=64, seed=3)
    checked = {"replaced": 0, "kept": 0}

    def check(selection: Selection) -> None:
        if engine.generation == 0:  # the initial draw: no elite to replace yet
            return
        best = int(torch.argmin(selection.fitness))
        if best:  # a minibatch win: compared again on a fresh sample
            sample = problem.samples[-1]
            assert torch.equal(sample, engine.acceptance.last_sample)
            elite, child = selection.candidates[0], selection.candidates[best]
            better = ((child - sample) ** 2).sum() < ((elite - sample) ** 2).sum()
            assert selection.kept == (best if better else 0)
            checked["replaced" if better else "kept"] += 1
        else:
            assert selection.kept == 0

    engine.after_selection.append(check)
    engine.run()
    assert checked["replaced"] == engine.replacements > 0
    assert checked["kept"] == engine.rejections > 0
    assert engine.acceptance.evaluations == 2 * len(problem.samples)
    assert len({tuple(sample.tolist()) for sample in problem.samples}) == len(problem.samples)


def _resumable(strategy=PlusLambda, **kwargs) -> PlusLambda:
    return strategy(
        Resampled(size=10, batches=7),
        children=4,
        initial_parents=2,
        epochs=3,
        streams=Streams.derive(11),
        rate=Constant(0.3),
        power=Constant(0.5),
        adaptation=SuccessRule(window=3),
        reevaluation_events=32,
        **kwargs,
    )


@pytest.mark.parametrize(("strategy", "extra"), [(PlusLambda, {}), (Hybrid, {"lr": 0.05})])
def test_resume_with_adaptation_continues_bit_identically(strategy, extra) -> None:
    whole = _resumable(strategy, **extra)
    whole.run()
    first = _resumable(strategy, **extra)
    first.after_step.append(lambda record: first.generation == 10 and first.request_stop())
    first.run()  # stops in the middle of the second epoch
    resumed = _resumable(strategy, **extra)
    state = first.state()
    assert state.strategy["adaptation"] == first.adaptation.state()
    resumed.load_state(state)
    resumed.run()
    assert torch.equal(resumed.elite, whole.elite)
    assert resumed.adaptation == whole.adaptation
    assert (resumed.replacements, resumed.rejections) == (whole.replacements, whole.rejections)
    assert [r["best"] for r in resumed.logbook] == [r["best"] for r in whole.logbook]


class Metered(Resampled):
    """The noisy sphere on a clock that advances one second per evaluate() call and stands
    still otherwise: the loop's evaluation seconds must then count every call."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.calls = 0

    def evaluate(self, genomes: torch.Tensor, batch) -> torch.Tensor:
        self.calls += 1
        return super().evaluate(genomes, batch)


def test_re_evaluations_count_as_evaluation_time_not_loop_overhead() -> None:
    problem = Metered(size=10, batches=20)
    engine = _adaptive(
        problem, power=0.3, epochs=3, reevaluation_events=64, seed=3, clock=lambda: problem.calls
    )
    engine.run()
    assert engine.acceptance.evaluations > 0
    assert engine.eval_seconds == engine.train_seconds == problem.calls


class Examples(Resampled):
    """The noisy sphere scored example by example: a re-evaluation sample is ``events`` noisy
    copies of the optimum, and the fitness on it is the mean of the per-example losses."""

    def sample(self, events: int, generator: torch.Generator) -> torch.Tensor:
        self.samples.append(0.3 * torch.randn(events, self.size, generator=generator))
        return self.samples[-1]

    def example_losses(self, genomes, batch, start: int, stop: int) -> torch.Tensor:
        if batch.dim() == 1:
            return None
        return ((genomes[:, None, :] - batch[None, start:stop]) ** 2).sum(dim=2)

    def evaluate(self, genomes: torch.Tensor, batch) -> torch.Tensor:
        if batch is not None and batch.dim() == 2:
            return self.example_losses(genomes, batch, 0, batch.shape[0]).mean(dim=1)
        return super().evaluate(genomes, batch)


def test_staged_acceptance_decides_early_only_on_a_clear_difference() -> None:
    """With a first stage, a comparison ends there only when the paired differences put the
    challenger 3 standard errors better or worse, and then on that side; otherwise the whole
    sample decides, as without a stage. Never is the elite replaced by one worse on the
    examples the comparison scored."""
    problem = Examples(size=10, batches=20)
    engine = _adaptive(problem, power=0.3, epochs=5, reevaluation_events=64, seed=3)
    engine.acceptance = Reevaluation(problem, 64, engine.stream_key, first=16, z=3.0)
    seen = {"early": 0, "whole": 0}

    def check(selection: Selection) -> None:
        best = int(torch.argmin(selection.fitness))
        if engine.generation == 0 or not best:
            return
        sample = problem.samples[-1]
        pair = torch.stack([selection.candidates[best], selection.candidates[0]])
        losses = problem.example_losses(pair, sample, 0, 64).double()
        difference = losses[0, :16] - losses[1, :16]
        z = float(difference.mean() / (difference.std() / 4))
        accepted = selection.kept == best
        if abs(z) >= 3:
            assert engine.acceptance.last_examples == 16
            assert accepted == (z < 0)
            seen["early"] += 1
        else:
            assert engine.acceptance.last_examples == 64
            assert accepted == bool(losses[0].mean() < losses[1].mean())
            seen["whole"] += 1
        scored = losses[:, : engine.acceptance.last_examples].mean(dim=1)
        assert not accepted or scored[0] < scored[1]

    engine.after_selection.append(check)
    engine.run()
    assert seen["early"] == engine.acceptance.early > 0
    assert seen["whole"] > 0


def test_staged_acceptance_scores_the_whole_sample_without_per_example_losses() -> None:
    problem = Resampled(size=10, batches=5)
    engine = _adaptive(problem, power=0.3, epochs=2, reevaluation_events=64, seed=3)
    engine.acceptance = Reevaluation(problem, 64, engine.stream_key, first=16)
    engine.run()
    assert engine.acceptance.evaluations > 0
    assert engine.acceptance.early == 0


@pytest.mark.parametrize(
    ("first", "z", "message"),
    [(64, 3.0, "first stage must hold 0 to 63"), (-1, 3.0, "first stage"), (8, 0.0, "positive")],
)
def test_staged_acceptance_refuses_a_stage_outside_the_sample(first, z, message) -> None:
    with pytest.raises(ValueError, match=message):
        Reevaluation(Examples(size=4, batches=2), 64, 0, first=first, z=z)
