"""Which workflow wrote a directory, read from its stored config (``task``), so that ``compare``
and ``report`` refuse what they cannot draw in one line instead of drawing empty figures."""

from __future__ import annotations

from pathlib import Path

import yaml
from matplotlib import colormaps

from evogan.errors import EvoganError

DESCRIPTIONS = {
    "regressor": "a regressor run (evogan evolve / evogan train)",
    "gan3d": "a 3DGAN training run (evogan train)",
    "search": "a search campaign (evogan search)",
}


def run_task(path: Path) -> str:
    """The ``task`` of the config stored in a run directory."""
    config = path / "config.yaml"
    if not config.is_file():
        raise EvoganError(f"{path} has no config.yaml, so the workflow that wrote it is unknown")
    try:
        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise EvoganError(f"{config} is not readable YAML: {type(exc).__name__}") from None
    task = raw.get("task") if isinstance(raw, dict) else None
    if not isinstance(task, str):
        raise EvoganError(f"{config} names no task, so the workflow that wrote it is unknown")
    return task


def refuse(path: Path, task: str, command: str, accepts: tuple[str, ...], other: str) -> None:
    """Raise unless ``task`` is one that ``command`` draws; the line names both and the way out."""
    if task in accepts:
        return
    what = DESCRIPTIONS.get(task, f"a run of task {task!r}")
    wanted = " and ".join(DESCRIPTIONS[t].split(" (")[0].removeprefix("a ") + "s" for t in accepts)
    raise EvoganError(f"{path} is {what}; evogan {command} draws {wanted}; {other}")


def run_labels(paths: list[Path]) -> list[str]:
    """Labels that tell the runs apart in legends and tables: each directory's name, with as
    many parent folders as it takes where names repeat (``c3/member-0``, ``c7/member-0``).
    A directory given twice is refused: it would be drawn twice under one label."""
    resolved = [path.resolve() for path in paths]
    for index, path in enumerate(resolved):
        if path in resolved[:index]:
            first, again = paths[resolved.index(path)], paths[index]
            same = f"{first} and {again} are the same directory"
            if first == again:
                same = f"{first} is given twice"
            raise EvoganError(f"{same}; give each directory once")
    depths = [1] * len(paths)
    while True:
        named = zip(resolved, depths, strict=True)
        labels = ["/".join(path.parts[-depth:]) for path, depth in named]
        repeated = {label for label in labels if labels.count(label) > 1}
        if not repeated:
            return labels
        depths = [depth + (label in repeated) for depth, label in zip(depths, labels, strict=True)]


def run_colours(count: int) -> list[tuple[float, float, float, float]]:
    """One distinct colour per run: tab10, tab20 for up to 20 runs, then evenly along turbo."""
    if count <= 20:
        palette = colormaps["tab10" if count <= 10 else "tab20"]
        return [palette(index) for index in range(count)]
    return [colormaps["turbo"](index / (count - 1)) for index in range(count)]
