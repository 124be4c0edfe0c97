"""torch imports with the cyclic garbage collector paused once evogan is imported
(:mod:`evogan.startup`), and is left as torch's own import would leave it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _fresh(code: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


PROBE = """
import gc, json, sys
{before}
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(1))
import torch
print(json.dumps({{
    "collections": len(collections),
    "enabled": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
    "loader": type(torch.__loader__).__name__,
    "spec_loader": type(torch.__spec__.loader).__name__,
    "resources": __import__("importlib.resources").resources.files("torch").joinpath(
        "version.py").is_file(),
}}))
"""


@pytest.mark.slow
def test_torch_imports_without_a_collection_and_keeps_its_own_loader() -> None:
    plain = _fresh(PROBE.format(before=""))
    paused = _fresh(PROBE.format(before="import evogan"))
    assert plain["collections"] > 10 and plain["frozen"] == 0  # what the pause saves
    assert paused["collections"] == 0 and paused["frozen"] > 100_000
    assert paused["enabled"] and paused["loader"] == plain["loader"] == "SourceFileLoader"
    assert paused["spec_loader"] == "SourceFileLoader" and paused["resources"]


@pytest.mark.slow
def test_a_collector_switched_off_by_the_caller_stays_off() -> None:
    paused = _fresh(PROBE.format(before="gc.disable(); import evogan"))
    assert not paused["enabled"]
