#!/usr/bin/env python
"""evogan's GA next to its peers on one harness (issue 17's table; not part of the tests).

Every implementation trains the shipped 2,049-weight regressor on the same 6,000 synthetic
showers (configs/regressor_ga.yaml: 5,000 training, 1,000 test events, evogan's split and
normalisation), on the same minibatch order (batch 128, a fresh permutation per epoch from
one seed), with one thread, in its own subprocess, for a budget of training seconds:

- plain torch loop: elitist (1+8), constant rate (``--rate``, default the GA study's 0.1) and
  power 0.1, one forward per candidate;
- DEAP: the same algorithm through a DEAP toolbox (clone, mutate, evaluate, selBest);
- evogan, constant: the engine with the same constant rate and power as the peers;
- evogan, step schedule: the engine with the GA study's rate decay at epochs 10 and 20 from
  the same rate;
- evogan, default: the engine as configs/regressor_ga.yaml ships it (rate 0.01, the success
  rule on the power, noise-aware acceptance and the least-squares readout start);
- evogan, default with the drawn readout: the same from the GA study's random readout;
- evogan, hybrid: configs/regressor_hybrid.yaml as shipped (the default's GA with one RMSprop
  step of the elite per generation, whose result competes as one more challenger);
- RMSprop (lr 1e-3), plain torch;
- RMSprop, least-squares start: plain torch from the shipped readout start, at lr 1e-4 (at
  1e-3 its first steps throw the start away).

The peers' algorithm rows (constant, step schedule) start from the drawn readout as the peers
do. The least-squares fit is part of the first step and counts as training time.

Propulate is not installed here and is left out. The clock runs only in training steps; the
test MAPE of the current best is measured between steps (geometric spacing, 10% apart) and
gives the seconds to 10% test MAPE. Rounds interleave the implementations (the order rotates
each round), so machine load hits all alike; the table gives medians and [min, max].

    python scripts/bench_peers.py --seconds 90 --rounds 3 [--rate 0.1] [--only NAME ...]
        [--seed K] [--out FILE]

``--seed`` changes the minibatch order, the initial networks and evogan's random streams.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from bench_regressor import CONFIGS, _pct

from evogan.config import load_config
from evogan.regressor.data import RegressorData, epoch_indices, load_and_check, mape
from evogan.regressor.network import (
    RegressorLayout,
    initial_weights,
    pooled_features,
    unflatten,
)
from evogan.regressor.problem import Minibatch, RegressorProblem
from evogan.regressor.readout import ReadoutStart
from evogan.regressor.strategy import build_strategy
from evogan.seeding import torch_generator

SEED = 0
CHILDREN = 8
RATE = POWER = 0.1
TARGET = 0.10
EVOGAN = {  # (config, overrides); "{rate}" is the harness's --rate
    "evogan, constant": (
        "ga",
        [
            "ga.mutation_rate={rate}",
            "ga.rate_schedule=constant",
            "ga.step_adaptation=none",
            "ga.acceptance=minibatch",
            "model.readout=random",
        ],
    ),
    "evogan, step schedule": (
        "ga",
        [
            "ga.mutation_rate={rate}",
            "ga.rate_schedule=step",
            "ga.step_adaptation=none",
            "ga.acceptance=minibatch",
            "model.readout=random",
        ],
    ),
    "evogan, default with the drawn readout": ("ga", ["model.readout=random"]),
    "evogan, default": ("ga", []),
    "evogan, hybrid": ("hybrid", []),
}
RMSPROP = {"RMSprop": (1e-3, False), "RMSprop, least-squares start": (1e-4, True)}
NAMES = ["plain torch loop", "DEAP", *EVOGAN, *RMSPROP]
Setup = tuple[RegressorLayout, RegressorData, RegressorData]
Build = Callable[[Setup, float], tuple[Callable[[], None], Callable[[], torch.Tensor]]]


def minibatches(train: RegressorData) -> Iterator[tuple[int, torch.Tensor]]:
    """(epoch, event indices) of every minibatch, the same order for every implementation."""
    generator = torch_generator(SEED, "bench_peers", "data")
    epoch = 0
    while True:
        for index in epoch_indices(len(train), 128, generator):
            yield epoch, index
        epoch += 1


def plain_forward(layout: RegressorLayout, genome: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The network as plain torch layers, convolution, ReLU, average pooling and linear: the
    peers' forward, as their users write it (evogan's own folds the pooling into the linear
    layer)."""
    linear = {name: view[0] for name, view in unflatten(layout, genome.reshape(1, -1)).items()}
    pooled = pooled_features(layout, genome, x)
    return F.linear(pooled, linear["linear.weight"], linear.get("linear.bias")).squeeze(1)


def fitness(layout: RegressorLayout, genome: torch.Tensor, x, y) -> float:
    with torch.no_grad():
        return float(mape(plain_forward(layout, genome, x), y))


def plain_loop(setup: Setup, rate: float) -> tuple[Callable[[], None], Callable[[], torch.Tensor]]:
    """The (1+8) as a few lines of torch: one forward per candidate."""
    layout, train, _ = setup
    generator = torch.Generator().manual_seed(SEED)
    batches = minibatches(train)
    changed = round(rate * layout.size)
    state = {"elite": None}

    def step() -> None:
        _, index = next(batches)
        x, y = train.x[index], train.y[index]
        if state["elite"] is None:
            population = initial_weights(layout, CHILDREN, generator)
        else:
            population = state["elite"].repeat(CHILDREN + 1, 1)
            for child in population[1:]:
                where = torch.randperm(layout.size, generator=generator)[:changed]
                child[where] += POWER * (2 * torch.rand(changed, generator=generator) - 1)
        scores = [fitness(layout, genome, x, y) for genome in population]
        state["elite"] = population[min(range(len(scores)), key=scores.__getitem__)].clone()

    return step, lambda: state["elite"]


def deap_toolbox(
    setup: Setup, rate: float
) -> tuple[Callable[[], None], Callable[[], torch.Tensor]]:
    """The same (1+8) through DEAP's vocabulary (numpy individuals)."""
    import numpy as np
    from deap import base, creator, tools

    layout, train, _ = setup
    rng = np.random.default_rng(SEED)
    creator.create("PeerFitness", base.Fitness, weights=(-1.0,))
    creator.create("PeerIndividual", np.ndarray, fitness=creator.PeerFitness)
    changed = round(rate * layout.size)

    def mutate(individual):
        where = rng.choice(layout.size, changed, replace=False)
        individual[where] += POWER * rng.uniform(-1, 1, changed).astype(np.float32)
        return (individual,)

    def evaluate(individual, x, y):
        return (fitness(layout, torch.from_numpy(np.asarray(individual)), x, y),)

    toolbox = base.Toolbox()
    toolbox.register("clone", lambda ind: creator.PeerIndividual(np.array(ind)))
    toolbox.register("mutate", mutate)
    toolbox.register("select", tools.selBest)
    batches = minibatches(train)
    generator = torch.Generator().manual_seed(SEED)
    first = initial_weights(layout, CHILDREN, generator).numpy()
    state = {"population": [creator.PeerIndividual(row) for row in first]}

    def step() -> None:
        _, index = next(batches)
        x, y = train.x[index], train.y[index]
        population = state["population"]
        for individual, score in zip(
            population, toolbox.map(lambda ind: evaluate(ind, x, y), population), strict=True
        ):
            individual.fitness.values = score
        elite = toolbox.select(population, 1)[0]
        children = [toolbox.mutate(toolbox.clone(elite))[0] for _ in range(CHILDREN)]
        state["population"] = [elite, *children]
        state["elite"] = elite

    return step, lambda: torch.from_numpy(np.asarray(state["elite"]))


def evogan_engine(config: str, overrides: list[str]) -> Build:
    """evogan's strategy as the shipped ``config`` builds it (with ``overrides``), its steps
    driven with the harness's minibatches."""

    def build(setup: Setup, rate: float) -> tuple[Callable[[], None], Callable[[], torch.Tensor]]:
        layout, train, _ = setup
        lines = [f"seed={SEED}", *(line.format(rate=rate) for line in overrides)]
        cfg = load_config(CONFIGS[config], lines)
        problem = RegressorProblem(
            layout,
            train,
            batch_size=128,
            eval_block=cfg.ga.eval_block,
            readout=ReadoutStart.from_config(cfg.model),
        )
        strategy = build_strategy(cfg, problem)
        batches = minibatches(train)

        def step() -> None:
            epoch, index = next(batches)
            strategy.step(Minibatch(train.x, index, train.y.index_select(0, index)), epoch)

        return step, lambda: strategy.elite

    return build


def rmsprop(lr: float, fitted: bool) -> Build:
    """RMSprop on the MAPE loss, plain torch (the peers' ``rate`` does not apply); ``fitted``
    starts from the shipped least-squares readout, fitted in the first step."""

    def build(setup: Setup, rate: float) -> tuple[Callable[[], None], Callable[[], torch.Tensor]]:
        del rate
        layout, train, _ = setup
        generator = torch.Generator().manual_seed(SEED)
        weights = torch.nn.Parameter(initial_weights(layout, 1, generator)[0])
        optimizer = torch.optim.RMSprop([weights], lr=lr)
        batches = minibatches(train)
        start = ReadoutStart.from_config(load_config(CONFIGS["ga"]).model) if fitted else None

        def step() -> None:
            nonlocal start
            if start is not None:
                with torch.no_grad():
                    weights.copy_(start.apply(layout, weights.reshape(1, -1), train, generator)[0])
                start = None
            _, index = next(batches)
            optimizer.zero_grad(set_to_none=True)
            mape(plain_forward(layout, weights, train.x[index]), train.y[index]).backward()
            optimizer.step()

        return step, lambda: weights.detach()

    return build


IMPLEMENTATIONS: dict[str, Build] = {
    "plain torch loop": plain_loop,
    "DEAP": deap_toolbox,
    **{name: evogan_engine(*engine) for name, engine in EVOGAN.items()},
    **{name: rmsprop(lr, fitted) for name, (lr, fitted) in RMSPROP.items()},
}


def worker(name: str, seconds: float, rate: float) -> dict:
    """One implementation for ``seconds`` of training (this process, one thread)."""
    torch.set_num_threads(1)
    cfg = load_config(CONFIGS["ga"])
    setup = load_and_check(cfg, 128, announce=lambda line: None)
    layout, _, test = setup
    step, current = IMPLEMENTATIONS[name](setup, rate)
    trained, steps, check, curve = 0.0, 0, 0.05, []
    while trained < seconds:
        start = time.perf_counter()
        step()
        trained += time.perf_counter() - start
        steps += 1
        if trained >= check or trained >= seconds:
            curve.append((trained, fitness(layout, current(), test.x, test.y)))
            check = trained * 1.1
    reached = next((t for t, value in curve if value <= TARGET), None)
    return {
        "name": name,
        "steps": steps,
        "seconds": trained,
        "per_s": steps / trained,
        "test_mape": curve[-1][1],
        "seconds_to_target": reached,
        "curve": curve,
    }


def _spread(values: list[float], form: Callable[[float], str]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return form(values[0])
    middle = form(statistics.median(values))
    return f"{middle} [{form(min(values))}, {form(max(values))}]"


def table(results: list[dict], seconds: float, rounds: int, rate: float) -> list[str]:
    lines = [
        f"{seconds:g} s of training each, 1 thread, {rounds} interleaved round(s), peers' "
        f"mutation rate {rate:g}; median [min, max]",
        "",
        "| implementation | generations/s | test MAPE at the end | seconds to 10% |",
        "|---|---|---|---|",
    ]
    for name in NAMES:
        mine = [r for r in results if r["name"] == name]
        if not mine:
            continue
        reached = [r["seconds_to_target"] for r in mine if r["seconds_to_target"] is not None]
        to_target = _spread(reached, lambda v: f"{v:.2f}")
        if len(reached) < len(mine):
            to_target += f" ({len(mine) - len(reached)} of {len(mine)} not reached)"
        unit = " steps/s" if name in RMSPROP else ""
        rate = _spread([r["per_s"] for r in mine], lambda v: f"{v:.1f}") + unit
        final = _spread([r["test_mape"] for r in mine], lambda v: _pct(v).replace(".00", ".0"))
        lines.append(f"| {name} | {rate} | {final} | {to_target} |")
    lines += reach_lines(results)
    lines += ["", "Propulate: not installed here, left out."]
    return lines


def reach_lines(results: list[dict]) -> list[str]:
    """Per round, the seconds the hybrid takes to reach the test MAPE that RMSprop from the
    same start ends at, against RMSprop's own first reach (issue 17's hybrid target)."""
    lines = []
    for round_ in sorted({r["round"] for r in results}):
        mine = {r["name"]: r for r in results if r["round"] == round_}
        if "evogan, hybrid" not in mine or "RMSprop, least-squares start" not in mine:
            continue
        curve = mine["RMSprop, least-squares start"]["curve"]
        final = curve[-1][1]
        own = next(t for t, value in curve if value <= final)
        hybrid = mine["evogan, hybrid"]["curve"]
        reached = next((f"{t:.2f} s" for t, value in hybrid if value <= final), "not reached")
        lines.append(
            f"round {round_ + 1}: RMSprop (least-squares start) ends at {_pct(final)}, first "
            f"reached at {own:.2f} s; the hybrid reaches it at {reached}"
        )
    return ["", *lines] if lines else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--rate", type=float, default=RATE, help="mutation rate of the peers' algorithm"
    )
    parser.add_argument("--only", nargs="+", choices=NAMES, default=NAMES)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=None, help="write all results as JSON")
    parser.add_argument("--worker", choices=NAMES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 0 < args.rate <= 1:
        parser.error(f"--rate must be in (0, 1], got {args.rate}")
    globals()["SEED"] = args.seed
    if args.worker:
        print(json.dumps(worker(args.worker, args.seconds, args.rate)))
        return 0
    results = []
    for round_ in range(args.rounds):
        order = args.only[round_ % len(args.only) :] + args.only[: round_ % len(args.only)]
        for name in order:
            command = [sys.executable, __file__, "--worker", name, "--seconds", str(args.seconds)]
            command += ["--rate", str(args.rate), "--seed", str(args.seed)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results.append({**result, "round": round_})
            print(
                f"round {round_ + 1}: {name}: {result['per_s']:.1f}/s, test MAPE "
                f"{_pct(result['test_mape'])}, to 10%: {result['seconds_to_target']}",
                flush=True,
            )
    lines = table(results, args.seconds, args.rounds, args.rate)
    print("\n".join(lines))
    if args.out is not None:
        args.out.write_text(json.dumps({"table": lines, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
