"""The docs site: its generated reference covers every config key (each with a description)
and every command and option, and ``mkdocs build --strict`` succeeds (this is how CI builds it)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evogan.cli import build_parser
from evogan.commands.reference import api_markdown, cli_markdown
from evogan.config import TASKS, task_config
from evogan.config.reference import Key, config_keys, config_markdown
from tests.conftest import REPO


def keys_of(task: str) -> dict[str, Key]:
    return {key.path: key for key in config_keys(task_config(task))}


def test_every_config_key_has_a_one_line_description() -> None:
    missing = [
        f"{task}: {key.path}"
        for task in TASKS
        for key in config_keys(task_config(task))
        if not key.description.strip() or "\n" in key.description
    ]
    assert not missing, "config keys without a one-line Field(description=...):\n" + "\n".join(
        missing
    )


def test_config_keys_carry_type_default_and_allowed_values() -> None:
    regressor, gan, search = keys_of("regressor"), keys_of("gan3d"), keys_of("search")
    rate = regressor["ga.mutation_rate"]
    assert (rate.type, rate.default, rate.allowed) == ("float", "`0.1`", "> 0, <= 1")
    assert regressor["migration.topology"].allowed == "`ring`, `random`, `full`, `matrix`"
    assert regressor["migration.every"].default == "`10`"
    assert search["ga.migration.every"].default == "`1`"  # the search GA's own section default
    assert search["ga.migration.policy"].default == "`replace_worst`"
    group = gan["trainer.group_size"]
    assert (group.type, group.allowed) == ("int or str or null", "> 0 or `node` or null")
    assert gan["data.ecal_scale"].allowed == "> 0 or null"
    filters = gan["spec.generator[].filters"]
    assert (filters.type, filters.default) == ("int", "required")
    assert gan["spec.generator[].kernel"].allowed == "each > 0"
    assert gan["spec"].section is not None and gan["spec"].default == "required"
    assert search["space"].allowed == "at least 1 item(s)"
    assert search["spec"].default == "`null`"
    assert "spec.loss_weights.width" in search


def test_the_config_page_has_a_row_for_every_key_of_every_task() -> None:
    page = config_markdown()
    for task in TASKS:
        section = page.split(f"## `task: {task}`")[1].split("\n## ")[0]
        absent = [path for path in keys_of(task) if f"| `{path}` |" not in section]
        assert not absent, f"task {task}: keys missing from the config page: {absent}"


def parser_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command of the parser, walked here independently of the page's renderer."""
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(parser_commands(sub, (*path, name)))
    return found


def test_the_cli_page_lists_every_command_and_option() -> None:
    page = cli_markdown()
    sections = dict(re.findall(r"^## `evogan([^`]*)`\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    walked = parser_commands(build_parser())
    assert {("data", "synth"), ("generate",), ("search",), ("report",)} <= set(walked)
    for path, parser in walked.items():
        heading = "".join(f" {word}" for word in path)
        assert heading in sections, f"evogan{heading} has no section on the CLI page"
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            names = action.option_strings or [action.metavar or action.dest]
            for name in names:
                assert f"`{name}" in sections[heading] or f"`[{name}]" in sections[heading], (
                    f"{name} of evogan{heading} is missing from the CLI page"
                )


def test_the_api_page_documents_every_exported_name() -> None:
    import evogan

    blocks = re.findall(r"^::: (\S+)$", api_markdown(), re.M)
    exported = {name for name in evogan.__all__ if not name.startswith("__")}
    assert {block.rpartition(".")[2] for block in blocks} == exported
    assert len(blocks) == len(exported)


def test_generated_pages_are_not_committed_in_docs() -> None:
    """The hook adds them to the build; a copy in docs/ would go stale."""
    for page in ("cli", "config", "api"):
        assert not (REPO / "docs" / "reference" / f"{page}.md").exists()


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed: pip install -e '.[docs]' (the test extra includes it)",
)
@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)]
    done = subprocess.run(
        [*command, "-f", str(REPO / "mkdocs.yml")], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "evogan data synth" in cli and "--energy-range" in cli
    assert "spec.generator[].filters" in (site / "reference" / "config" / "index.html").read_text()
    assert (
        'id="evogan.engine.strategies.PlusLambda"'
        in (site / "reference" / "api" / "index.html").read_text()
    )
    assert not (REPO / "docs" / "reference").exists()
