"""The campaign directory: config, candidate table, per-candidate runs, summary, resume.

Layout::

    CAMPAIGN/config.yaml          resolved search config (base spec inline)
    CAMPAIGN/campaign.json        world size, backend, sessions (start times, resumes)
    CAMPAIGN/table/WRITER.jsonl   one line per finished candidate, appended by one writer
                                  process each (island leader, or the study owner)
    CAMPAIGN/candidates/ID/       the candidate's training runs (member-T/)
    CAMPAIGN/islands/*.json       GA island state after each generation (atomic)
    CAMPAIGN/study.journal        Optuna study (JournalFileBackend; optuna-dashboard opens it),
                                  for a GA or PBT campaign a mirror of the table
                                  (evogan.search.journal)
    CAMPAIGN/summary.json         best candidates, counts, busy time, throughput; every
                                  session's own figures and campaign totals; ``final``

A table line is written with one ``write`` on a file opened with ``O_APPEND`` and synced before
the campaign moves on, so a kill leaves every finished candidate and at most a torn last line
(skipped on reading). One writer per file means no two processes append to the same file,
which keeps that guarantee on parallel file systems too. ``--resume`` keeps every candidate the
table holds and re-runs the ones that were in flight.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from evogan.config.base import dump, read_yaml, validate
from evogan.config.search import SearchConfig
from evogan.distributed.launcher import resume_line
from evogan.errors import ConfigError, EvoganError
from evogan.gan3d.model.spec import load_spec
from evogan.store import RunDir, read_metrics
from evogan.store.metrics import append_synced
from evogan.store.state_files import read_state, repair_torn_tail, require_keys, torn_tail

CONFIG = "config.yaml"
MANIFEST = "campaign.json"
SUMMARY = "summary.json"
TABLE = "table"
STUDY = "study.journal"
MANIFEST_FIX = (
    'restore it from a backup, or write {"backend": B, "world_size": N, "sessions": []} into '
    "it: B the backend of its config.yaml, N the mpirun -n it ran on"
)
# Config parts a resumed campaign must share with the one it continues (candidates may grow).
FIXED = (
    "seed",
    "backend",
    "ranks_per_group",
    "spec",
    "space",
    "data",
    "trainer",
    "budget",
    "fitness",
    "ga",
    "optuna",
    "pruning",
    "pbt",
)


def resolve_base(config: SearchConfig, config_path: Path | None = None) -> SearchConfig:
    """The config with its base spec inline (a stored campaign needs no other file)."""
    if config.spec is not None:
        return config
    path = Path(config.base)
    tried = [path]
    if not path.is_file() and config_path is not None and not path.is_absolute():
        tried.append(Path(config_path).parent / path)
        path = tried[-1]
    if not path.is_file():
        missing = f"{tried[0]} does not exist"
        if len(tried) > 1:
            missing = f"neither {tried[0]} nor {tried[1]} exists"
        raise ConfigError(
            f"base = {config.base!r} must be a spec YAML file, but {missing}; give its path "
            "from the search config's folder, or an absolute one"
        )
    raw = config.model_dump(mode="json")
    spec = load_spec(path, data=raw["data"])
    raw.update(base=None, spec=spec.model_dump(mode="json"))
    return validate(SearchConfig, raw, source=str(config_path or "search config"))


def _with_defaults(stored: Any, default: Any) -> Any:
    """``stored`` (a section of a stored config) with the keys added since it was written, at
    any depth, taken from ``default``."""
    if isinstance(stored, dict) and isinstance(default, dict):
        return {
            **default,
            **{key: _with_defaults(v, default.get(key)) for key, v in stored.items()},
        }
    return stored


def worst_for_null(values: list[float | None]) -> list[float]:
    """Objectives read back from JSON: null stood for inf (the worst value)."""
    return [math.inf if v is None else float(v) for v in values]


class Campaign:
    """A campaign directory; the world rank that creates it is the only one writing config."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls, config: SearchConfig, world_size: int, path: Path | None) -> Campaign:
        run = RunDir.create("search", config.campaign.root, config.campaign.name, path)
        campaign = cls(run.path)
        run.write_config(dump(config))
        campaign._write_manifest(
            {"backend": config.backend, "world_size": world_size, "sessions": []}
        )
        return campaign

    @classmethod
    def open(cls, path: Path, config: SearchConfig, world_size: int) -> Campaign:
        """An existing campaign to resume, checked against ``config`` and the rank count."""
        campaign = cls(path)
        if not (campaign.path / CONFIG).is_file() or not (campaign.path / MANIFEST).is_file():
            raise EvoganError(
                f"{path} is not a search campaign (no {CONFIG} / {MANIFEST}); "
                "pass the directory a previous `evogan search` wrote"
            )
        stored = read_yaml(campaign.path / CONFIG)
        given = config.model_dump(mode="json")
        defaults = SearchConfig.model_construct().model_dump(mode="json")
        for key in FIXED:  # a key added after the campaign started: its default was in force
            old = _with_defaults(stored.get(key, defaults.get(key)), defaults.get(key))
            if old != given.get(key):
                raise EvoganError(
                    f"{path} was started with a different {key}; resume it with its own config: "
                    f"{resume_line('search', campaign.path)}"
                )
        manifest = campaign.manifest()
        require_keys(campaign.path / MANIFEST, manifest, ("world_size",), MANIFEST_FIX)
        if config.backend in ("ga", "pbt") and manifest["world_size"] != world_size:
            what = "GA islands" if config.backend == "ga" else "PBT workers"
            raise EvoganError(
                f"{path} ran its {what} on {manifest['world_size']} ranks and must be resumed "
                f"on as many: mpirun -n {manifest['world_size']} (got {world_size})"
            )
        campaign._check_candidates(config)
        campaign.check_journal()
        RunDir(campaign.path).write_config(dump(config))
        return campaign

    def _check_candidates(self, config: SearchConfig) -> None:
        """``candidates`` may grow on resume but not drop below the candidates trained."""
        from evogan.search.summary import trained

        done = len(trained(self.rows()))
        if config.backend != "pbt" and config.candidates < done:
            raise ConfigError(
                f"candidates = {config.candidates} is not allowed: {self.path} has {done} "
                f"trained already; resume with candidates >= {done} (or leave it as it was)"
            )

    # ------------------------------------------------------------------ manifest
    def manifest(self) -> dict[str, Any]:
        return read_state(self.path / MANIFEST, MANIFEST_FIX)

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        RunDir(self.path).write_json(MANIFEST, manifest)

    def start_session(self, world_size: int) -> int:
        """Record a (re)start; returns the session number (0 for a fresh campaign)."""
        manifest = self.manifest()
        sessions = manifest.setdefault("sessions", [])
        sessions.append(
            {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "ranks": world_size}
        )
        self._write_manifest(manifest)
        return len(sessions) - 1

    def check_journal(self) -> None:
        """Before the Optuna journal is appended to again: a last line torn by a killed append
        is cut off (the whole file kept beside it, and said so); damage before the last line
        is refused in one line."""
        path = self.path / STUDY
        if not path.is_file():
            return
        backend = self.manifest().get("backend")
        if backend in ("ga", "pbt"):
            fix = "delete it: the campaign rebuilds it from its table on resume"
        else:
            fix = (
                "restore it from a backup, or delete it to go on with a new study (the table "
                "keeps every finished candidate; the sampler starts without their history)"
            )
        offset = torn_tail(path, fix)
        if offset is not None:
            backup = repair_torn_tail(path, offset)
            print(
                f"evogan: note: {path} ended in a torn line (an append cut off by a kill); kept "
                f"the file as {backup.name} and cut that line off",
                file=sys.stderr,
                flush=True,
            )

    # ------------------------------------------------------------------ table
    def table_file(self, writer: str) -> Path:
        return self.path / TABLE / f"{writer}.jsonl"

    def append(self, writer: str, row: dict[str, Any]) -> None:
        """Add one finished candidate: a single O_APPEND write, synced before returning."""
        append_synced(self.table_file(writer), row, kind="candidate")

    def rows(self) -> list[dict[str, Any]]:
        """Every complete table line of every writer, in order of finishing."""
        folder = self.path / TABLE
        rows: list[dict[str, Any]] = []
        if folder.is_dir():
            for path in sorted(folder.glob("*.jsonl")):
                rows.extend(read_metrics(path))
        for row in rows:  # strict JSON wrote the worst fitness (inf) as null
            if row.get("fitness") is None:
                row["fitness"] = math.inf
            row["objectives"] = worst_for_null(row.get("objectives") or [])
        return sorted(rows, key=lambda r: (r.get("elapsed_s", 0.0), r["id"]))

    def finished(self) -> dict[str, dict[str, Any]]:
        """Rows by candidate id (the last one wins if a candidate was ever written twice)."""
        return {row["id"]: row for row in self.rows()}

    def elapsed_offset(self) -> float:
        """Campaign time already spent by earlier sessions (latest finish in the table)."""
        return max((row.get("elapsed_s", 0.0) for row in self.rows()), default=0.0)

    def candidate_dir(self, candidate: str) -> Path:
        return self.path / "candidates" / candidate

    def summary(self) -> dict[str, Any]:
        """The summary.json so far ({} before the first session ends)."""
        path = self.path / SUMMARY
        if not os.path.lexists(path):
            return {}
        fix = (
            "restore it from a backup, or delete it: the next session writes it anew from the "
            "table (without the earlier sessions' figures)"
        )
        return read_state(path, fix)

    def write_summary(self, summary: dict[str, Any]) -> Path:
        """Write this session's ``summary`` merged with the earlier sessions' (kept in
        ``sessions``, never overwritten), campaign totals from the table, and ``final``."""
        from evogan.search.summary import merge_sessions

        started = self.manifest().get("sessions", []) if (self.path / MANIFEST).is_file() else []
        merged = merge_sessions(summary, self.summary(), self.rows(), started)
        return RunDir(self.path).write_json(SUMMARY, merged)

    def write_final(self, final: dict[str, Any]) -> Path:
        """Set ``final`` (the significance test) in summary.json atomically; later summaries
        keep it."""
        summary = self.summary()
        summary["final"] = final
        return RunDir(self.path).write_json(SUMMARY, summary)
