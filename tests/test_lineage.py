"""Seed-compressed genomes: a lineage rebuilds exactly the weights it describes."""

from __future__ import annotations

import pytest
import torch

from evogan.config.regressor import RegressorModelConfig
from evogan.engine import Hybrid, PlusLambda, Streams
from evogan.errors import DataError
from evogan.islands.island import Island
from evogan.islands.lineage import Lineage, Rebuilder, rebuild
from evogan.regressor.data import RegressorData
from evogan.regressor.network import RegressorLayout
from evogan.regressor.problem import RegressorProblem
from evogan.regressor.readout import ReadoutStart


def _problem(mutation: str = "add", readout: ReadoutStart | None = None) -> RegressorProblem:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(64, 1, 12, 12, generator=generator)
    energy = x.sum(dim=(1, 2, 3))
    layout = RegressorLayout.from_config(RegressorModelConfig(filters=4, kernel=3), (1, 12, 12))
    data = RegressorData(x, energy / 50, energy)
    return RegressorProblem(layout, data, batch_size=16, mutation=mutation, readout=readout)


def _evolved(problem: RegressorProblem, epochs: int = 6) -> Island:
    strategy = PlusLambda(
        problem, children=6, initial_parents=4, epochs=epochs, streams=Streams.derive(5, 1)
    )
    island = Island(strategy)
    island.run()
    return island


@pytest.mark.parametrize(
    ("mutation", "readout"),
    [
        ("add", None),
        ("replace", None),
        ("add", ReadoutStart(8, 0.1)),
    ],  # a start the GA still improves,
)
def test_lineage_rebuilds_the_elite_bit_for_bit(mutation: str, readout) -> None:
    island = _evolved(_problem(mutation, readout), epochs=6 if readout is None else 20)
    lineage = island.elite_lineage
    assert lineage is not None and len(lineage) > 3  # the elite improved several times
    receiver = _problem(mutation, readout)  # another rank's problem refits the initial draw
    assert torch.equal(rebuild(receiver, lineage), island.strategy.elite)
    elite = island.strategy.elite
    assert torch.equal(rebuild(receiver, Lineage.from_bytes(lineage.to_bytes())), elite)


def test_lineage_bytes_round_trip_and_size() -> None:
    draw = torch.Generator().manual_seed(3)
    lineage = Lineage(7, 8, 3)
    for step in range(600):
        key, generation = (11, 2 * step) if step < 300 else (99, step - 100)  # an immigrant line
        index = int(torch.randint(8, (1,), generator=draw))
        lineage = lineage.child(key, generation, 8, index, 0.1 if step < 100 else 0.01, 0.1)
    assert Lineage.from_bytes(lineage.to_bytes()) == lineage
    assert len(lineage.to_bytes()) < 600  # about 3 bits per surviving-child choice, plus a bit
    known = Lineage(*lineage.root, lineage.mutations[:594])
    delta = lineage.delta_bytes(594)
    assert known.extended(594, delta) == lineage and len(delta) < 16
    assert Lineage(*lineage.root).extended(0, lineage.delta_bytes(0)) == lineage
    assert Lineage.from_bytes(Lineage(1, 2, 0).to_bytes()) == Lineage(1, 2, 0)
    with pytest.raises(DataError, match="lineage record is corrupt"):
        Lineage.from_bytes(b"not a lineage")
    with pytest.raises(DataError, match="arrived out of order"):
        Lineage(*lineage.root).extended(5, delta)


def test_rebuilder_replays_only_new_mutations_of_a_known_prefix() -> None:
    problem = _problem()
    island = _evolved(problem, epochs=3)
    full = island.elite_lineage
    prefix = Lineage(*full.root, full.mutations[:2])
    rebuilder = Rebuilder(problem)
    rebuilder(prefix)
    assert rebuilder.replayed == 2
    assert torch.equal(rebuilder(full), island.strategy.elite)
    assert rebuilder.replayed == len(full)  # 2 + the len(full) - 2 new ones


def test_hybrid_genomes_have_no_lineage() -> None:
    strategy = Hybrid(
        _problem(), steps=1, children=4, initial_parents=2, epochs=1, streams=Streams.derive(1)
    )
    island = Island(strategy)
    island.run()
    assert strategy.gradient_steps > 0 and island.elite_lineage is None
    migrant = island.codec.encode(island.emigrants(), destination=1)[0]
    assert migrant.lineage is None and len(migrant.weights) == 4 * strategy.elite.numel()


def test_migrants_travel_as_deltas_against_the_previous_message() -> None:
    sender, receiver = _evolved(_problem(), epochs=2), _evolved(_problem(), epochs=1)
    first = sender.codec.encode(sender.emigrants(), destination=1)
    assert first[0].base is None  # nothing sent before: the whole lineage
    genome, lineage = receiver.codec.decode(first, source=0)[0]
    assert torch.equal(genome, sender.strategy.elite) and lineage == sender.elite_lineage
    sender.strategy.epochs = 4
    sender.run()  # two more epochs: the elite line grows
    assert sender.elite_lineage.extends(lineage) and len(sender.elite_lineage) > len(lineage)
    second = sender.codec.encode(sender.emigrants(), destination=1)
    assert second[0].base == (0, len(lineage))
    assert second[0].size < len(sender.elite_lineage.to_bytes())
    genome, rebuilt = receiver.codec.decode(second, source=0)[0]
    assert torch.equal(genome, sender.strategy.elite) and rebuilt == sender.elite_lineage


def test_a_diverged_line_travels_as_a_delta_from_the_shared_prefix() -> None:
    sender, receiver = _evolved(_problem(), epochs=2), _evolved(_problem(), epochs=1)
    sent = sender.elite_lineage
    receiver.codec.decode(sender.codec.encode(sender.emigrants(), destination=1), source=0)
    sibling = Lineage(*sent.root, sent.mutations[:2]).child(
        sender.strategy.stream_key, 10**6, 6, 5, 0.1, 0.1
    )
    genome = rebuild(sender.strategy.problem, sibling)
    migrant = sender.codec.encode([(genome, sibling, 0.5)], destination=1)[0]
    assert migrant.base == (0, 2) and migrant.size < len(sibling.to_bytes())
    rebuilt, lineage = receiver.codec.decode([migrant], source=0)[0]
    assert lineage == sibling and torch.equal(rebuilt, genome)


def test_rebuilder_stays_exact_when_its_cache_evicts() -> None:
    problem = _problem()
    full = _evolved(problem, epochs=4).elite_lineage
    small = Rebuilder(problem, cache_bytes=2 * 4 * problem.layout.size)  # two genomes
    for cut in (len(full), 3, len(full) - 1, 1, len(full)):
        prefix = Lineage(*full.root, full.mutations[:cut])
        assert torch.equal(small(prefix), rebuild(problem, prefix))
    assert len(small._cache) <= 2
