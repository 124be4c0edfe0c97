"""Re-training finished candidates: the campaign's final significance test, and the
reproduction of one member's score.

A candidate is selected on a few short trainings, so part of its lead is luck. The final step
re-trains the ``final.top`` best candidates and the base spec with ``final.retrain_seeds`` fresh
seeds each (derived from the campaign seed, never the members' seeds, the same for every
architecture), at the campaign's budget and from scratch (inherited weights would not be an
equal budget), scores each training with the campaign's :class:`Scorer`, and asks the one-sided
Mann-Whitney U test whether the candidate's scores lie below the baseline's. A failed training
(NaN, timeout, error) is a real outcome: it scores worst (``evogan.physics.WORST_SCORE``) and
is listed. Trainings are spread over the rank groups of the job; world rank 0 writes the result
into summary.json as ``final``.

Each finished training leaves ``outcome.json`` (its seed, budget and score) in its directory,
and a later run of the step takes it instead of training again: a step stopped by a signal
(agreed between trainings; the trainings running then finish first) keeps what it finished, and
a ``final.retrain_seeds`` raised on resume trains only the new seeds.

:func:`reproduce_member` re-trains one member of a table row with its recorded seed (and its
parent's weights, for an inheriting child) and scores it: ``evogan report CAMPAIGN --reproduce
ID:M``, the ``reproduce`` command of every table row.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from evogan.config.base import validate
from evogan.config.search import SearchConfig
from evogan.distributed.comm import split_layout
from evogan.distributed.mpi import MPI
from evogan.distributed.signals import StopAgreement, StopFlag, catch_stop_signals
from evogan.errors import EvoganError, RunStopped
from evogan.gan3d.model.spec import GanSpec
from evogan.gan3d.training.modes import mode_for
from evogan.logs import labelled_stdout
from evogan.physics import WORST_SCORE
from evogan.progress import hushed
from evogan.search.campaign import CONFIG, Campaign
from evogan.search.evaluation import Evaluation
from evogan.search.fitness import evaluate
from evogan.search.scheduler import job_config
from evogan.search.scoring import Scorer
from evogan.search.significance import ALPHA, holm, mann_whitney_less, verdict
from evogan.search.space import Space
from evogan.search.summary import best_rows
from evogan.seeding import derive_seed
from evogan.store import atomic_write
from evogan.store.state_files import read_state

BASELINE = "baseline"
FINAL_DIR = "final"
OUTCOME = "outcome.json"


def final_seeds(config: SearchConfig) -> list[int]:
    """Fresh training seeds of the final step: reproducible, and apart from the member seeds
    (those carry the selection's luck)."""
    count = config.final.retrain_seeds
    return [derive_seed(config.seed, "search", "final", s) % 2**31 for s in range(count)]


def campaign_config(path: Path) -> SearchConfig:
    """The config a campaign directory was run with (base spec inline)."""
    file = Path(path) / CONFIG
    if not file.is_file():
        raise EvoganError(f"{path} is not a search campaign (no {CONFIG})")
    return validate(SearchConfig, yaml.safe_load(file.read_text()), source=str(file))


def final_entries(
    config: SearchConfig, rows: list[dict[str, Any]]
) -> list[tuple[str, GanSpec, dict[str, Any] | None]]:
    """(id, spec, table row) of the top candidates, then the baseline (the base spec)."""
    space = Space(config.space, config.spec)
    top = best_rows(rows, config.final.top)
    return [(row["id"], space.spec(row["genome"]), row) for row in top] + [
        (BASELINE, config.spec, None)
    ]


def current_final(campaign: Campaign, config: SearchConfig) -> dict[str, Any] | None:
    """summary.json's ``final`` when it tested today's top candidates with today's seeds."""
    final = campaign.summary().get("final")
    if not final:
        return None
    ids = [entry[0] for entry in final_entries(config, campaign.rows())][:-1]
    tested = [c["id"] for c in final.get("candidates", [])]
    return final if tested == ids and final.get("seeds") == final_seeds(config) else None


def open_scorer(config: SearchConfig, world: MPI.Comm) -> Scorer:
    """Collective: the Scorer on every rank, rank 0 first (it makes or checks the data once)."""
    scorer = Scorer(config) if world.rank == 0 else None
    world.Barrier()
    return scorer if scorer is not None else Scorer(config)


def run_final(
    config: SearchConfig,
    campaign: Campaign,
    world: MPI.Comm,
    resume_command: str,
    scorer: Scorer | None = None,
) -> dict[str, Any] | None:
    """Collective on ``world``: the final step; its ``final`` dict on every rank (None when
    ``final.top`` is 0). A ``final`` that already tested today's top candidates with today's
    seeds is kept (the trainings are deterministic: a resume that changed nothing re-runs
    nothing). A stop signal on any rank ends the step between trainings with
    :class:`RunStopped` carrying ``resume_command``; the finished trainings are kept."""
    if config.final.top == 0:
        return None
    kept = world.bcast(current_final(campaign, config) if world.rank == 0 else None, root=0)
    if kept is not None:
        return kept
    scorer = open_scorer(config, world) if scorer is None else scorer
    start = time.perf_counter()
    rows = world.bcast(campaign.rows() if world.rank == 0 else None, root=0)
    entries, seeds = final_entries(config, rows), final_seeds(config)
    layout = split_layout(world, config.ranks_per_group, None)
    group, groups = layout.island, world.size // config.ranks_per_group
    jobs = [(e, s) for e in range(len(entries)) for s in range(len(seeds))]
    workdirs = {(e, s): campaign.path / FINAL_DIR / entries[e][0] / f"seed-{s}" for e, s in jobs}
    mine = world.bcast(_saved_outcomes(workdirs, seeds, config) if world.rank == 0 else None)
    if world.rank == 0:
        done = f", {len(mine)} of {len(jobs)} kept from an earlier run" if mine else ""
        print(
            f"search: final test: re-training {len(entries) - 1} candidate(s) and the base spec "
            f"with {len(seeds)} fresh seed(s) each on {groups} group(s){done}",
            flush=True,
        )
    todo = [job for job in jobs if job not in mine][layout.island_index :: groups]
    label = f"[final group {layout.island_index}] "
    with labelled_stdout(label) if group.rank == 0 else nullcontext():
        for job, outcome in _trainings(
            config, entries, seeds, todo, workdirs, world, group, scorer
        ):
            mine[job] = outcome
    parts = world.gather(mine if group.rank == 0 else {}, root=0)
    layout.free()
    outcomes = {key: value for part in parts or [] for key, value in part.items()}
    if world.bcast(len(outcomes) < len(jobs), root=0):  # only a stop leaves trainings undone
        raise RunStopped(resume_command)
    final = None
    if world.rank == 0:
        final = build_final(config, entries, seeds, outcomes, time.perf_counter() - start)
        campaign.write_final(final)
        for line in final_lines(final):
            print(f"search: final: {line}", flush=True)
    return world.bcast(final, root=0)


def _trainings(
    config: SearchConfig,
    entries: list[tuple[str, GanSpec, dict[str, Any] | None]],
    seeds: list[int],
    todo: list[tuple[int, int]],
    workdirs: dict[tuple[int, int], Path],
    world: MPI.Comm,
    group: MPI.Comm,
    scorer: Scorer,
) -> Iterator[tuple[tuple[int, int], tuple[float, str]]]:
    """Collective on ``world``: this group's trainings ``todo``, each saved as it ends, until
    all are done or a stop signal on any rank is agreed (then between two trainings)."""
    flag = StopFlag()
    agreement = StopAgreement(world, flag, "async")
    with catch_stop_signals(flag):
        for job in todo:
            if group.allreduce(flag.raised or agreement.poll(), op=MPI.LOR):
                break  # the local flag first: the agreement learns of a signal a round late
            (e, s), workdir = job, workdirs[job]
            outcome = _retrain(config, entries[e][1], group, workdir, scorer, seeds[s])
            if group.rank == 0:
                _save_outcome(workdir, seeds[s], config, outcome)
            yield job, outcome
        agreement.finish()  # all ranks done, or a stop agreed by all
    agreement.close()


def _saved_outcomes(
    workdirs: dict[tuple[int, int], Path], seeds: list[int], config: SearchConfig
) -> dict[tuple[int, int], tuple[float, str]]:
    """(score, failure) of each re-training an earlier run finished with this seed and budget."""
    budget = config.budget.model_dump(mode="json")
    outcomes = {}
    keys = ("seed", "budget", "score", "failure")
    for (e, s), workdir in workdirs.items():
        if not (workdir / OUTCOME).is_file():
            continue
        try:
            saved = read_state(workdir / OUTCOME, "this re-training runs again", keys)
        except EvoganError as exc:
            print(f"search: note: {exc}", flush=True)
            continue
        if saved.get("seed") == seeds[s] and saved.get("budget") == budget:
            outcomes[(e, s)] = (float(saved["score"]), str(saved["failure"]))
    return outcomes


def _save_outcome(
    workdir: Path, seed: int, config: SearchConfig, outcome: tuple[float, str]
) -> None:
    record = {
        "seed": seed,
        "budget": config.budget.model_dump(mode="json"),
        "score": outcome[0],
        "failure": outcome[1],
    }
    atomic_write(workdir / OUTCOME, json.dumps(record) + "\n")


def _retrain(
    config: SearchConfig, spec: GanSpec, group: MPI.Comm, workdir: Path, scorer: Scorer, seed: int
) -> tuple[float, str]:
    """Collective on ``group``: one training with ``seed``; its score (the mean over the members
    it yields) and "" or why it failed (then the score is the worst)."""
    with hushed():
        result = evaluate(config, spec, group, workdir, scorer, seeds=[seed])
    if result.status != "ok" or not math.isfinite(result.score_mean):
        return WORST_SCORE, f"{result.status}: {result.reason}"
    return result.score_mean, ""


def _stats(scores: list[float]) -> dict[str, float]:
    values = np.asarray(scores, dtype=np.float64)
    sem = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return {"mean": float(values.mean()), "sem": float(sem)}


def build_final(
    config: SearchConfig,
    entries: list[tuple[str, GanSpec, dict[str, Any] | None]],
    seeds: list[int],
    outcomes: dict[tuple[int, int], tuple[float, str]],
    wall_s: float,
) -> dict[str, Any]:
    """summary.json's ``final``: per entry its per-seed scores, failures, mean and standard
    error; per candidate the one-sided Mann-Whitney U p-value against the baseline."""
    blocks = []
    for e, (name, _spec, row) in enumerate(entries):
        scores = [outcomes[(e, s)][0] for s in range(len(seeds))]
        failed = [
            {"seed": seeds[s], "reason": outcomes[(e, s)][1]}
            for s in range(len(seeds))
            if outcomes[(e, s)][1]
        ]
        block = {"id": name, "scores": scores, "failed": failed, **_stats(scores)}
        if row is not None:
            block.update(campaign_fitness=row["fitness"], genome=row["genome"])
        blocks.append(block)
    baseline, candidates = blocks[-1], blocks[:-1]
    for block in candidates:
        test = mann_whitney_less(block["scores"], baseline["scores"])
        block.update(u=test.u, p_value=test.p, method=test.method)
    for block, adjusted in zip(candidates, holm([b["p_value"] for b in candidates]), strict=True):
        block.update(p_holm=adjusted, better=adjusted < ALPHA)
    return {
        "test": "one-sided Mann-Whitney U: candidate scores lower than the baseline's",
        "correction": f"Holm over the {len(candidates)} candidate(s) tested",
        "alpha": ALPHA,
        "retrain_seeds": len(seeds),
        "seeds": seeds,
        "budget": config.budget.model_dump(mode="json"),
        "worst_score": WORST_SCORE,
        "candidates": blocks[:-1],
        "baseline": baseline,
        "wall_s": wall_s,
    }


def final_lines(final: dict[str, Any]) -> list[str]:
    """One line per tested candidate, for the campaign's log."""
    base = final["baseline"]
    return [
        f"{c['id']} {c['mean']:.4f} +- {c['sem']:.4f} vs baseline {base['mean']:.4f} +- "
        f"{base['sem']:.4f} over {final['retrain_seeds']} seeds: better than baseline: "
        f"{verdict(c)}"
        for c in final["candidates"]
    ]


def reproduce_member(
    path: Path, target: str, world: MPI.Comm, out: Path | None = None
) -> tuple[float, float | None]:
    """Collective on ``world``: re-train member M of candidate ID (``target`` = "ID:M") with its
    recorded seed and score it; (score now, score in the table or None) on every rank."""
    campaign, config = Campaign(path), campaign_config(path)
    candidate, _, member_text = target.partition(":")
    row = campaign.finished().get(candidate)
    if row is None:
        raise EvoganError(
            f"--reproduce {target}: {candidate!r} is not a candidate of {path}; "
            f"evogan report {path} --out DIR lists the best with their --reproduce commands"
        )
    record = Evaluation.from_row(row)
    member = int(member_text) if member_text.isdigit() else -1
    if not 0 <= member < len(record.member_seeds):
        known = len(record.member_seeds)
        raise EvoganError(
            f"--reproduce must be ID:MEMBER of a trained candidate of {path} with recorded "
            f"member seeds (MEMBER below {known}), got {target!r}"
        )
    ranks = len(row["ranks"])
    if world.size != ranks:
        raise EvoganError(
            f"{candidate} was trained on {ranks} rank(s); reproduce it with mpirun -n {ranks} "
            f"(got {world.size})"
        )
    per_training = mode_for(config.trainer).members(ranks)
    training = member // per_training
    parent = row.get("inherit_from")
    workdir = (out or campaign.path / "reproduce") / candidate
    with hushed():
        result = evaluate(
            job_config(config, row),
            Space(config.space, config.spec).spec(row["genome"]),
            world,
            workdir,
            open_scorer(config, world),
            parent=None if parent is None else campaign.candidate_dir(parent),
            seeds=[record.seeds[training]],
            first=training,
        )
    scores = result.member_scores or [math.nan] * per_training
    recorded = record.member_scores[member : member + 1]  # none for a failed candidate
    table = recorded[0] if recorded and math.isfinite(recorded[0]) else None
    return scores[member % per_training], table
