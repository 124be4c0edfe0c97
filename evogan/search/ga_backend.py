"""GA backend: islands of rank groups, each running a (mu + lambda) GA over architectures.

Architecture genomes are dicts of genes whose every evaluation is a training, so this GA asks
for one candidate at a time and is told its row (:class:`ArchitectureGA`), repairing or
rejecting genomes that do not build; weight genomes have the vectorised engine of
:mod:`evogan.engine`.

An island is ``ranks_per_group`` consecutive ranks that train every candidate together; its
leader owns the population. The island runtime is :class:`evogan.islands.session.
IslandSession` (communicators, stop agreement, migration set-up), as for the regressor GA.
Islands never wait for each other: migrants (genomes with their evaluations, so they are never
trained twice) travel in ``async`` mode, and SIGTERM is agreed among the leaders without
blocking. With ``pruning`` on, a child stops at a rung when it is worse than the best
``1/reduction_factor`` of the scores recorded there on its island (:mod:`evogan.search.rungs`).
World rank 0 mirrors the table into an Optuna journal (:mod:`evogan.search.journal`). Each
island writes its state
after every generation; a resumed island regenerates the interrupted generation from the saved
random state and takes the candidates the table already holds instead of training them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deap import base, creator, tools

from evogan.distributed.mpi import MPI
from evogan.distributed.signals import StopFlag
from evogan.distributed.tags import Tag
from evogan.islands.migration import best_first, make_topology, replace_worst
from evogan.islands.session import IslandSession
from evogan.search.campaign import worst_for_null
from evogan.search.follow import follow_candidates
from evogan.search.journal import mirror_table
from evogan.search.rungs import RungHistory
from evogan.search.scheduler import Session, refused_row, run_job, serve_leader
from evogan.search.space import Genome
from evogan.seeding import numpy_generator
from evogan.store import RunDir
from evogan.store.state_files import require_keys

HUGE = 1e300  # stands in for inf in NSGA-II crowding distances (inf - inf is NaN)
ATTEMPTS = 50  # draws per child before a duplicate or unrepairable genome is accepted


class ArchitectureGA:
    """Ask/tell GA over architectures on one island: :meth:`ask` gives the next job, :meth:`tell`
    its row."""

    def __init__(
        self,
        session: Session,
        island: int,
        quota: int,
        migrate: Callable[[ArchitectureGA], None] | None = None,
    ) -> None:
        self.session = session
        self.migrate = migrate
        self.config = session.config
        self.island = island
        self.quota = quota
        self.rng = numpy_generator(self.config.seed, "search", "island", island)
        self.generation = 0
        self.population: list[dict[str, Any]] = []  # {"id", "genome", "objectives"}
        self.pending: list[dict[str, Any]] = []
        self.told: list[dict[str, Any]] = []
        self.evaluated = 0  # trained candidates (rows) of this island so far
        self.seen: set[str] = set()
        self.state_name = f"islands/island-{island:03d}.json"

    # ------------------------------------------------------------ state
    def restore(self) -> bool:
        """Continue from the saved state; False when the island has none yet."""
        path = self.session.campaign.path / self.state_name
        if not path.is_file():
            return False
        fix = "restore it from a backup of the campaign; the island cannot continue without it"
        state = RunDir(self.session.campaign.path).read_json(self.state_name, fix)
        keys = ("generation", "population", "evaluated", "seen", "rng", "counters")
        require_keys(path, state, keys, fix)
        self.generation = state["generation"]
        self.population = state["population"]
        for member in self.population:
            member["objectives"] = worst_for_null(member["objectives"])
        self.evaluated = state["evaluated"]
        self.seen = set(state["seen"])
        self.rng.bit_generator.state = state["rng"]
        for name, value in state["counters"].items():
            self.session.counters[name] = value
        return True

    def _save(self) -> None:
        state = {
            "generation": self.generation,
            "population": self.population,
            "evaluated": self.evaluated,
            "seen": sorted(self.seen),
            "rng": self.rng.bit_generator.state,
            "counters": self.session.counters,
        }
        RunDir(self.session.campaign.path).write_json(self.state_name, state)

    # ------------------------------------------------------------ ask / tell
    def ask(self, finished: dict[str, dict[str, Any]], record) -> dict[str, Any] | None:
        """The next candidate to train, or None when the island's quota is spent. Candidates
        the table already holds (a resumed generation) are told at once, not returned."""
        while True:
            if not self.pending and not self.told:
                if self.evaluated >= self.quota:
                    return None
                self.pending = self._next_generation(record)
            if not self.pending:
                self._close_generation()
                continue
            job = self.pending.pop(0)
            done = finished.get(job["id"])
            if done is not None and done["genome"] == self.session.space.active(job["genome"]):
                self.tell(done)
                continue
            if done is not None:  # a different genome under this id: keep both rows apart
                job["id"] = f"{job['id']}r{self.session.number}"
            return job

    def tell(self, row: dict[str, Any]) -> None:
        self.told.append(row)
        self.evaluated += 1
        if not self.pending:
            self._close_generation()

    def _close_generation(self) -> None:
        children = [
            {"id": r["id"], "genome": r["genome_full"], "objectives": r["objectives"]}
            for r in self.told
        ]
        self.population = self._select(self.population + children, self.config.ga.population)
        self.told = []
        self.generation += 1
        if self.migrate is not None:
            self.migrate(self)
        self._save()  # after migration: a resumed island breeds from the same population

    def _next_generation(self, record) -> list[dict[str, Any]]:
        """Jobs of the next generation: random genomes first (island 0's first the base spec's,
        with ``start_from_base``), then children of the population."""
        ga = self.config.ga
        first = self.generation == 0 and not self.population
        size = ga.population if first else ga.offspring
        size = min(size, self.quota - self.evaluated)
        jobs = []
        for k in range(size):
            job_id = f"i{self.island:02d}g{self.generation:03d}c{k:02d}"
            if first and k == 0 and self.island == 0 and self.config.start_from_base:
                genome, parents, repaired = self.session.space.base_genome(), [], False
            else:
                genome, parents, repaired = self._valid_genome(first, job_id, record)
            self.seen.add(self.session.space.key(genome))
            jobs.append(
                {
                    "id": job_id,
                    "island": self.island,
                    "generation": self.generation,
                    "parents": parents,
                    "repaired": repaired,
                    "genome": genome,
                    **self._inheritance(parents),
                }
            )
        return jobs

    def _inheritance(self, parents: list[str]) -> dict[str, str]:
        """``inherit_from``: the first parent, when it trained fine (shapes are checked when
        its weights are copied; a mismatch trains from scratch)."""
        if not self.config.ga.inherit_weights or not parents:
            return {}
        parent = next((m for m in self.population if m["id"] == parents[0]), None)
        ok = parent is not None and all(v < HUGE for v in parent["objectives"])
        return {"inherit_from": parents[0]} if ok else {}

    def _valid_genome(self, first: bool, job_id: str, record) -> tuple[Genome, list[str], bool]:
        """A genome that builds: invalid ones are repaired or rejected (recorded, counted)."""
        space, ga = self.session.space, self.config.ga
        genome: Genome = {}
        parents: list[str] = []
        for attempt in range(ATTEMPTS):
            genome, parents = self._draw(first)
            reason = space.check(genome)
            repaired = False
            if reason is not None:
                self.session.count("invalid")
                if ga.invalid == "repair":
                    fixed = space.repair(genome)
                    if fixed is not None:
                        genome, repaired = fixed, True
                        self.session.count("repaired")
                if not repaired:
                    self.session.count("rejected")
                    rejected = {
                        "id": f"{job_id}x{attempt:02d}",
                        "island": self.island,
                        "generation": self.generation,
                        "parents": parents,
                        "genome": genome,
                    }
                    record(refused_row(self.session, rejected, reason))
                    continue
            if space.key(genome) in self.seen and attempt < ATTEMPTS - 1:
                self.session.count("duplicates_redrawn")
                continue
            return genome, parents, repaired
        return space.default(), [], False

    def _draw(self, first: bool) -> tuple[Genome, list[str]]:
        space, ga = self.session.space, self.config.ga
        if first:
            return space.sample(self.rng), []
        a = self._tournament()
        if self.rng.random() < ga.crossover and len(self.population) > 1:
            b = self._tournament()
            child, _ = space.crossover(a["genome"], b["genome"], self.rng)
            return space.mutate(child, self.rng, ga.gene_mutation), [a["id"], b["id"]]
        return space.mutate(a["genome"], self.rng, ga.gene_mutation), [a["id"]]

    def _tournament(self) -> dict[str, Any]:
        """Best of ``tournament`` random members (the population is kept best first)."""
        picks = self.rng.integers(len(self.population), size=self.config.ga.tournament)
        return self.population[int(picks.min())]

    def _select(self, members: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
        """Best ``size`` members, best first: by fitness, or NSGA-II with two objectives."""
        if not members or len(members[0]["objectives"]) == 1:
            order = best_first([m["objectives"][0] for m in members], size)
            return [members[i] for i in order]
        individuals = []
        for index, member in enumerate(members):
            ind = creator.SearchIndividual([index])
            ind.fitness.values = tuple(min(v, HUGE) for v in member["objectives"])
            individuals.append(ind)
        chosen = tools.selNSGA2(individuals, min(size, len(individuals)))
        return [members[ind[0]] for ind in chosen]

    # ------------------------------------------------------------ migration
    def emigrants(self, k: int) -> list[dict[str, Any]]:
        return self.population[:k]

    def immigrate(self, arrived: list[dict[str, Any]]) -> None:
        """Migrants replace the worst members; their evaluations travel with them."""
        if not arrived or not self.population:
            return
        fitness = [m["objectives"][0] for m in self.population]
        kept, _ = replace_worst(
            self.population, fitness, arrived, [m["objectives"][0] for m in arrived]
        )
        self.population = self._select(kept, len(kept))
        self.session.count("immigrants", len(arrived))


def _ensure_deap_types(objectives: int) -> None:
    """DEAP's creator types for NSGA-II (created once per process, minimised objectives)."""
    if not hasattr(creator, "SearchFitness"):
        creator.create("SearchFitness", base.Fitness, weights=(-1.0,) * objectives)
        creator.create("SearchIndividual", list, fitness=creator.SearchFitness)


def run_ga(session: Session, world: MPI.Comm, flag: StopFlag) -> bool:
    """Run this rank's island to its quota; returns whether a stop signal ended it early."""
    config = session.config
    _ensure_deap_types(1 + int(config.fitness.second_objective != "none"))
    islands = IslandSession(world, config.ranks_per_group, agreement="async", flag=flag)
    index, count = islands.island_index, islands.island_count
    quota = config.candidates // count + int(index < config.candidates % count)
    session.group = index
    try:
        show = world.rank == 0
        with (
            follow_candidates(session.campaign, config.candidates, show),
            mirror_table(session, show),
        ):
            if islands.is_leader:
                stopped = _lead_island(session, islands, quota)
            else:
                stopped = serve_leader(session, islands)
    finally:
        islands.close()
    return stopped


def _lead_island(session: Session, islands: IslandSession, quota: int) -> bool:
    config, index = session.config, islands.island_index
    writer = f"island-{index:03d}"
    finished = session.campaign.finished()

    def record(row: dict[str, Any]) -> None:
        if row["id"] not in finished:  # a resumed generation re-meets its rejected genomes
            session.campaign.append(writer, row)

    mig = config.ga.migration
    migration = None
    if mig.migrants > 0:
        rng = numpy_generator(config.seed, "search", "migration", index)
        topology = make_topology(mig.topology, mig.migrants)
        migration = islands.start_migration(topology, "async", rng, int(Tag.SEARCH_MIGRANT))

    def migrate(ga: ArchitectureGA) -> None:
        if migration is not None and ga.generation % mig.every == 0:
            migration.send(ga.emigrants(mig.migrants))
            ga.immigrate(migration.receive())

    ga = ArchitectureGA(session, index, quota, migrate)
    ga.restore()
    history = RungHistory(config.pruning.reduction_factor, config.budget.kind)
    for done in finished.values():  # this island's rung scores of earlier sessions
        if done.get("island") == index:
            history.add_row(done)
    while not islands.agreement.poll():
        job = ga.ask(finished, record)
        if job is None:
            break
        islands.island.bcast(job, root=0)
        decide = history.decider(prunable=job["generation"] > 0)  # children only
        row = run_job(session, islands.island, job, decide=decide)
        row["genome_full"] = job["genome"]
        record(row)
        ga.tell(row)
    islands.island.bcast(None, root=0)
    stopped, _ = islands.finish(False, drain=ga.immigrate)
    return stopped
