"""Which generator files form an ensemble: run directories expanded, duplicates counted once,
runs of different specs or data refused, members that would not see the same noise refused.

A data-parallel run writes one generator per rank (``RUN/generators/rank-NNNNN.h5``) and a
``best_model.h5`` that may be a byte-identical copy of one of them; counting both would give an
ensemble of K + 1 from K ranks. Members are therefore identified by the SHA-256 of their bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import yaml

from evogan.errors import EvoganError
from evogan.gan3d.model.spec import GanSpec
from evogan.store.rundir import BEST_MODEL, CONFIG

GENERATORS = "generators"  # the per-rank generator folder of a gan3d run


def digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def expand(path: Path) -> list[Path]:
    """A run directory's per-rank generators (its generator when it has none); a file as is;
    a directory of runs (a search candidate's members) each run's."""
    from evogan.gan3d.model.model_file import find_generator, runs_below

    if not path.is_dir():
        return [find_generator(path)]
    ranks = sorted((path / GENERATORS).glob("*.h5"))
    if ranks:
        return ranks
    if not (path / BEST_MODEL).is_file() and len(runs := runs_below(path)) > 1:
        return [member for run in runs for member in expand(run)]
    return [find_generator(path)]


def unique_members(paths: Sequence[Path]) -> tuple[list[Path], list[str]]:
    """``paths`` without byte-identical repeats (the first mention kept), and a note for each
    file dropped."""
    seen: dict[str, Path] = {}
    kept, notes = [], []
    for path in paths:
        key = digest(path)
        if key in seen:
            if path.resolve() != seen[key].resolve():
                notes.append(f"{path} is byte-identical to {seen[key]}: counted once")
            continue
        seen[key] = path
        kept.append(path)
    return kept, notes


def run_of(path: Path) -> Path | None:
    """The run directory holding a generator file (the nearest parent with a config)."""
    for parent in path.resolve().parents:
        if (parent / CONFIG).is_file():
            return parent
    return None


def check_origin(paths: Sequence[Path], specs: Sequence[GanSpec]) -> list[str]:
    """Refuse members of different specs or trained on different data; note several runs."""
    first = specs[0].model_dump(mode="json")
    for path, spec in zip(paths[1:], specs[1:], strict=True):
        if spec.model_dump(mode="json") != first:
            raise EvoganError(
                f"ensemble members must share one spec: {path} is {spec.name!r}, {paths[0]} is "
                f"{specs[0].name!r}; pass generators of one architecture"
            )
    runs = {run for run in (run_of(p) for p in paths) if run is not None}
    data = {}
    for run in sorted(runs):
        config = yaml.safe_load((run / CONFIG).read_text(encoding="utf-8")) or {}
        data[run] = repr(config.get("data")) if isinstance(config, dict) else "None"
    if len(set(data.values())) > 1:
        names = ", ".join(str(r) for r in sorted(runs))
        raise EvoganError(
            f"ensemble members must be trained on the same data; the runs {names} differ in "
            f"their data section; pass generators of runs on one data set"
        )
    if len(runs) > 1:
        names = ", ".join(str(r) for r in sorted(runs))
        return [f"ensemble mixes {len(runs)} runs of spec {specs[0].name!r}: {names}"]
    return []


def check_compatible(specs: Sequence[GanSpec]) -> None:
    """Members must read the same latent (size, conditioning) and make the same shape."""
    first = specs[0]
    key = (first.latent_size, first.conditioning, tuple(first.output_shape))
    for index, spec in enumerate(specs[1:], start=2):
        other = (spec.latent_size, spec.conditioning, tuple(spec.output_shape))
        if other != key:
            raise EvoganError(
                f"ensemble member {index} ({spec.name}) must share latent size, conditioning and "
                f"output shape with member 1 ({first.name}) to see the same noise; got "
                f"{other[0]}/{other[2]} vs {key[0]}/{key[2]}"
            )
