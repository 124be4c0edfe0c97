"""Arguments shared by the commands: ``--set``, ``--run-dir``, the ``--resume`` grammar,
``--precision``, the ``data.*`` settings of commands that read shower files without a config,
the checks of counts, output directories and generator paths."""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evogan.config import load_config
from evogan.config.base import StrictModel, apply_overrides, validate
from evogan.config.data import DataConfig
from evogan.config.resume import extending_keys, load_run_config
from evogan.distributed.failure import launched_ranks, rank0_decides
from evogan.distributed.launcher import resume_line
from evogan.errors import ConfigError, EvoganError
from evogan.logs import hint
from evogan.store.lock import claim
from evogan.store.rundir import check_named_run, check_new_run_dir, check_run_name

CAMPAIGN_MANIFEST = "campaign.json"
"""``evogan.search.campaign.MANIFEST``, named here: importing ``evogan.search`` starts MPI."""
RUNS_TASK = {
    "regressor": "`evogan evolve` (GA, hybrid) or `evogan train` (RMSprop)",
    "gan3d": "`evogan train`",
    "search": "`evogan search`",
}
"""The commands that run each config task, named when another command is given one."""


def require_counts(args: argparse.Namespace, *options: str) -> None:
    """Each named option (``--batch-size``) is a count of at least 1 when given: a one-line
    error else."""
    for option in options:
        value = getattr(args, option.removeprefix("--").replace("-", "_"))
        if value is not None and value < 1:
            raise EvoganError(f"{option} must be at least 1, got {value}")


def require_finite(args: argparse.Namespace, *options: str) -> None:
    """Each named float option (a number or a ``LO HI`` pair) is finite when given: no option
    means infinity, and inf or nan would end in a draw or a format string, not in one line."""
    for option in options:
        value = getattr(args, option.removeprefix("--").replace("-", "_"))
        values = list(value) if isinstance(value, list | tuple) else [value]
        if value is not None and not all(math.isfinite(v) for v in values):
            given = " ".join(f"{v:g}" for v in values)
            raise EvoganError(f"{option} takes finite numbers only, got {given}")


def check_out_dir(out: Path) -> None:
    """Refuse an output directory that cannot be created or written, before any work: a file
    in its place or on its path, or no write permission where it would go. Raises
    ``EvoganError`` (one line)."""
    place = out
    while not place.exists() and place != place.parent:
        place = place.parent
    if place == out and not out.is_dir():
        raise EvoganError(
            f"--out must be a directory, got the file {out}; pass a directory (created if missing)"
        )
    if not place.is_dir():
        raise EvoganError(
            f"--out {out} cannot be created: {place} is a file; pass a directory (created if "
            "missing)"
        )
    if not os.access(place, os.W_OK | os.X_OK):
        raise EvoganError(
            f"--out {out} must be writable: no write permission on {place}; pass a directory "
            "you can write to"
        )


def refuse_campaign(path: Path) -> None:
    """Refuse a search campaign directory where a generator is wanted, in one line naming the
    generator of its best candidate (member 0 of the first row of ``evogan report``): the
    newest generator below a campaign is whichever candidate trained last, not the best."""
    if not (path / CAMPAIGN_MANIFEST).is_file():
        return
    from evogan.gan3d.model.model_file import find_generator
    from evogan.search.campaign import Campaign
    from evogan.search.summary import best_rows

    campaign = Campaign(path)
    best = best_rows(campaign.rows(), 1)
    if not best:
        raise EvoganError(
            f"{path} is a search campaign with no candidate trained to the end with status ok "
            "yet; pass a generator file or a gan3d run directory"
        )
    row = best[0]
    generator = find_generator(campaign.candidate_dir(row["id"]) / "member-0")
    raise EvoganError(
        f"{path} is a search campaign, not a run; pass the generator of its best candidate "
        f"{row['id']} (fitness {row['fitness']:.4g}), {generator}, or another candidate's "
        f"(evogan report {path} --out DIR ranks them)"
    )


def add_precision(parser: argparse.ArgumentParser) -> None:
    """``--precision`` for the commands that run a generator (generate, validate)."""
    parser.add_argument(
        "--precision",
        choices=("float32", "bf16"),
        default="float32",
        help="float32 (default) or bf16: the generator's convolutions on bfloat16 inputs and "
        "weights, about 2x faster on CPUs with AVX512-BF16 or AMX (docs/tutorials/gan.md)",
    )


def hint_precision(args: argparse.Namespace, device: str = "cpu") -> None:
    """On a CPU with bfloat16 arithmetic (AVX512-BF16 or AMX), hint that ``--precision bf16``
    generates about 2x faster than float32 there (on stderr: stdout may hold a report). Call
    it once nothing can refuse the command."""
    from evogan.gan3d.model.precision import bf16_generation_faster_here

    if bf16_generation_faster_here(device, args.precision):
        hint(
            "this CPU has bf16 arithmetic (AVX512-BF16 or AMX): --precision bf16 generates about "
            "2x faster, with scores within 0.01 of float32 (docs/tutorials/gan.md)"
        )


def split_sets(argv: list[str]) -> list[str]:
    """``--set A=1 B=2`` as ``--set A=1 --set B=2``, so one ``--set`` takes several settings:
    argparse gives an option one value, and taking more greedily would swallow a ``CONFIG``
    given after them. A word after a ``--set`` value is one more setting when it holds ``=``
    and does not start with ``-``; ``--`` ends the options."""
    words: list[str] = []
    value_next = in_sets = False
    for at, word in enumerate(argv):
        if word == "--":
            return words + argv[at:]
        if value_next:
            value_next, in_sets = False, True
        elif word == "--set":
            value_next = True
        elif word.startswith("--set="):
            in_sets = True
        elif in_sets and "=" in word and not word.startswith("-"):
            words.append("--set")
        else:
            in_sets = False
        words.append(word)
    return words


def add_config_options(parser: argparse.ArgumentParser, example: str, run_dir_help: str) -> None:
    """``--set KEY=VALUE...`` (several after one, and repeatable) and ``--run-dir DIR``."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override config values, e.g. --set {example} (one --set takes several "
        "KEY=VALUE; a list is --set 'KEY=[a, b]')",
    )
    parser.add_argument("--run-dir", type=Path, help=run_dir_help)


READ_KEYS = ("layout", "ecal_key", "energy_key", "ecal_scale", "detector")
"""The ``data`` keys that say how to read a file (:func:`evogan.data.reader.open_file`); the
detector only where given (otherwise each file's own)."""


class _ReadSettings(StrictModel):
    data: DataConfig = Field(default_factory=DataConfig)


def add_read_options(parser: argparse.ArgumentParser, files: str) -> None:
    """``--set data.KEY=VALUE`` for the :data:`READ_KEYS`, spelled as in a config, so that the
    data errors' "set data.ecal_key" advice works in every command that reads showers."""
    keys = ", ".join(f"data.{key}" for key in READ_KEYS)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="data.KEY=VALUE",
        help=f"how to read {files} where detection falls short, as in a config: {keys} "
        "(one --set takes several)",
    )


def read_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--set data.*`` of :func:`add_read_options` as ``open_files`` keywords, checked as
    a config's ``data`` section is."""
    raw = apply_overrides({}, args.overrides)
    section = raw.get("data", {})
    given = [f"data.{key}" for key in section] if isinstance(section, dict) else ["data"]
    given += [key for key in raw if key != "data"]
    other = [key for key in given if key.removeprefix("data.") not in READ_KEYS]
    if other:
        allowed = ", ".join(f"data.{key}" for key in READ_KEYS)
        raise ConfigError(f"--set {other[0]} is not a read setting; allowed here: {allowed}")
    data = validate(_ReadSettings, raw, source="--set").data
    read = {key: getattr(data, key) for key in READ_KEYS}
    if "detector" not in data.model_fields_set:
        read["detector"] = None
    return read


def add_resume_options(parser: argparse.ArgumentParser, config_help: str) -> None:
    """``CONFIG`` (optional), ``--resume RUN`` and ``--force``: one grammar for every command
    that runs long (``evolve``, ``train``, ``search``)."""
    parser.add_argument("config", type=Path, nargs="?", help=f"{config_help} (not with --resume)")
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="RUN",
        help="continue RUN with its own config.yaml (same mpirun -n); --set only for "
        "resume-safe keys (docs/howto/resume.md)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --resume: continue a run that failed or was killed without a clean stop",
    )


def config_for(args: argparse.Namespace, command: str, tasks: dict[str, str]) -> BaseModel:
    """The config a command runs: CONFIG with ``--set``, or (``--resume RUN``) the run's own
    with resume-safe ``--set`` only, after locking RUN on rank 0; checks the task fits."""
    if args.resume is None:
        if args.force:
            raise EvoganError("--force only applies with --resume RUN")
        if args.config is None:
            raise EvoganError(f"evogan {command} needs a CONFIG file, or --resume RUN")
        config = load_config(args.config, args.overrides)
        source = str(args.config)
    else:
        if args.config is not None or args.run_dir is not None:
            raise EvoganError(
                f"--resume {args.resume} continues with the run's own config "
                f"({args.resume / 'config.yaml'}); drop CONFIG/--run-dir and use --set only for "
                "resume-safe keys"
            )
        config = load_run_config(args.resume, args.overrides)
        source = str(args.resume / "config.yaml")
    task = getattr(config, "task", None)
    if task not in tasks:
        instead = f"; a {task} config runs with {RUNS_TASK[task]}" if task in RUNS_TASK else ""
        raise ConfigError(
            f"{source}: task = {task!r} cannot be run by `evogan {command}` "
            f"(allowed: {', '.join(tasks)}){instead}"
        )
    for section in ("run", "campaign"):
        check_run_name(getattr(getattr(config, section, None), "name", None), f"{section}.name")
    return config


def check_new_run(args: argparse.Namespace, config: BaseModel) -> None:
    """Refuse a new run whose directory is taken (``--run-dir``, or ``run.name`` /
    ``campaign.name`` under its root), as rank 0 sees it, before the data are read and torch
    loads; the trainers ask again when they create it."""
    if args.run_dir is not None:
        rank0_decides(lambda: check_new_run_dir(args.run_dir))
        return
    section = "campaign" if hasattr(config, "campaign") else "run"
    named = getattr(config, section, None)
    if named is not None and named.name is not None:
        rank0_decides(lambda: check_named_run(named.root, named.name, f"{section}.name"))


RANK_RECORDS = {
    "gan3d": ("manifest.json", ("world_size",)),
    "regressor": ("manifest.json", ("layout", "world_size")),
    "search": ("campaign.json", ("world_size",)),
}
"""Task -> (file of a run, keys to the rank count it ran on): read before torch and MPI load."""


def claim_resumed(args: argparse.Namespace, command: str, config: BaseModel) -> None:
    """Refuse ``--resume RUN`` on another rank count than RUN ran on (from the launcher's
    environment, before torch and MPI load; the trainers check again for the Python API),
    then lock RUN for this job (rank 0) and refuse a run that must not continue."""
    recorded, ranks = _recorded_ranks(args.resume, config), launched_ranks()
    if recorded is not None and recorded != ranks:
        raise EvoganError(
            f"{args.resume} was run on {recorded} rank(s) and must be resumed on as many; resume "
            f"it with {resume_line(command, args.resume, recorded)} (got {ranks})"
        )
    run, force, extend = args.resume, args.force, bool(args.overrides)
    rank0_decides(
        lambda: claim(run, resume=True, force=force, extend=extend, extending=extending_keys(run))
    )


def _recorded_ranks(run: Path, config: BaseModel) -> int | None:
    """The rank count ``run`` ran on, None where it need not match (an Optuna campaign) or
    cannot be read (the trainer then names what is wrong with the run)."""
    task = getattr(config, "task", None)
    if task not in RANK_RECORDS or getattr(config, "backend", None) == "optuna":
        return None
    name, keys = RANK_RECORDS[task]
    try:
        value: Any = json.loads((run / name).read_text())
        for key in keys:
            value = value[key]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
