"""One benchmark's worker run in this checkout and, optionally, in another, round by round.

A change is measured against the code before it by timing both in fresh subprocesses
(``PYTHONPATH`` set to each checkout's root), alternating which goes first in each round so
that load drifts on a shared machine hit both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench_peers import _spread

REPO = Path(__file__).resolve().parents[1]


def check_against(parser: argparse.ArgumentParser, against: Path | None, rounds: int) -> None:
    """Refuse, through ``parser``, a round count below 1 or a folder without evogan."""
    if rounds < 1:
        parser.error(f"--rounds must be at least 1, got {rounds}")
    if against is not None and not (against / "evogan" / "__init__.py").is_file():
        parser.error(f"--against {against} holds no evogan package; pass a checkout's root")


def run_worker(script: str, root: Path, args: list[str]) -> dict[str, float]:
    """``script --worker ARGS`` with ``root``'s evogan, one thread; the JSON of its last line."""
    environment = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, script, "--worker", *args],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        cwd=root,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def interleaved(
    script: str, against: Path | None, rounds: int, args: list[str] = ()
) -> dict[str, list[dict[str, float]]]:
    """Every round's worker results for ``this`` checkout and, with ``against``, ``that``."""
    roots = {"this": REPO} if against is None else {"this": REPO, "that": against}
    results: dict[str, list[dict[str, float]]] = {key: [] for key in roots}
    for round_ in range(rounds):
        order = list(roots) if round_ % 2 == 0 else list(reversed(roots))
        for key in order:
            results[key].append(run_worker(script, roots[key], list(args)))
            print(f"round {round_ + 1}: {key} done", flush=True)
    return results


def comparison(
    results: dict[str, list[dict[str, float]]],
    names: list[str],
    against: Path | None,
    unit: str,
    form: Callable[[float], str],
) -> list[str]:
    """A markdown table: each case's median [min, max] over rounds, and the ratio of medians."""
    header, rule = f"| case | this checkout, {unit} |", "|---|---|"
    if against is not None:
        header += f" {against}, {unit} | this / that |"
        rule += "---|---|"
    lines = [header, rule]
    for name in names:
        mine = [r[name] for r in results["this"]]
        line = f"| {name} | {_spread(mine, form)} |"
        if against is not None:
            theirs = [r[name] for r in results["that"]]
            ratio = statistics.median(mine) / statistics.median(theirs)
            line += f" {_spread(theirs, form)} | {ratio:.2f} |"
        lines.append(line)
    return lines


def write_json(path: Path | None, lines: list[str], results: dict) -> None:
    if path is not None:
        from evogan.store import atomic_write

        atomic_write(path, json.dumps({"table": lines, "results": results}, indent=1))
