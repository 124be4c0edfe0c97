"""The docs site's generated reference pages of the command line and the Python API: every
command and option read from the ``evogan`` parser itself, every name the package root exports.
``docs/hooks/reference.py`` renders them at build time, so neither page can drift from the
code; the config keys come from :mod:`evogan.config.reference`."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import evogan
from evogan.cli import build_parser

__all__ = ["api_markdown", "cli_markdown", "commands"]

USAGE_WIDTH = 100
"""Columns of the usage blocks (a terminal's width would make the page depend on who built it)."""


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = (), text: str | None = None
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every command under ``parser``, depth first, as (words after ``evogan``, its parser,
    what it does: its description, else its help in the parent); the top level is ``()``."""
    yield path, parser, parser.description or text or ""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name), helps.get(name))


def cli_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The command-line reference page: usage, arguments and options of every command."""
    parser = parser or build_parser()
    lines = [
        "# Command-line reference",
        "",
        "Every `evogan` command with its arguments and options, generated from the command's "
        "own parser (`evogan/cli.py`, `evogan/commands/`) when this site is built; "
        "`evogan COMMAND --help` prints the same (every command takes `-h`, `--help`). The "
        "config keys that `--set KEY=VALUE` takes are in the [config reference](config.md).",
    ]
    for path, sub, text in commands(parser):
        name = " ".join(("evogan", *path))
        lines += ["", f"## `{name}`", ""]
        if text:
            lines += [_sentence(text), ""]
        lines += ["```text", _usage(sub), "```"]
        rows = [_row(sub, action) for action in sub._actions if _shown(action)]
        if rows:
            lines += ["", "| argument | what it is | default |", "|---|---|---|", *rows]
    return "\n".join(lines) + "\n"


def _shown(action: argparse.Action) -> bool:
    """Arguments and options; not the subcommands (each has its section) nor ``--help``."""
    hidden = (argparse._SubParsersAction, argparse._HelpAction)
    return action.help is not argparse.SUPPRESS and not isinstance(action, hidden)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    names = ", ".join(action.option_strings) or _metavar(action)
    if action.option_strings and action.nargs != 0:
        names += f" {_metavar(action)}"
    text = _sentence(argparse.HelpFormatter(parser.prog)._expand_help(action))
    if action.choices:
        text += f" One of: {', '.join(f'`{choice}`' for choice in action.choices)}."
    if action.required and action.option_strings:
        text += " Required."
    cells = [f"`{names}`", text, _default(action)]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _metavar(action: argparse.Action) -> str:
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    words = " ".join(metavar) if isinstance(metavar, tuple) else metavar
    if action.nargs in ("+", "*"):
        return f"{words} ..."
    if action.nargs == "?":
        return f"[{words}]"
    return words


def _default(action: argparse.Action) -> str:
    value = action.default
    if value is None or value is argparse.SUPPRESS or action.nargs == 0 or value == []:
        return ""
    if isinstance(value, list | tuple):
        return "`" + " ".join(map(str, value)) + "`"
    return f"`{value}`"


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def api_markdown() -> str:
    """The Python API reference page: one mkdocstrings block per name of ``evogan.__all__``,
    grouped by the subpackage that defines it."""
    lines = [
        "# Python API reference",
        "",
        "Every name `from evogan import ...` offers, with its signature and docstring, "
        "generated from the code when this site is built; each imports from the package root "
        "(`from evogan import PlusLambda`) as well as from where it is defined.",
    ]
    by_package: dict[str, list[str]] = {}
    for name in evogan.__all__:
        if name.startswith("__"):
            continue
        where = f"{getattr(evogan, name).__module__}.{name}"
        by_package.setdefault(".".join(where.split(".")[:2]), []).append(where)
    for package in sorted(by_package):
        lines += ["", f"## `{package}`"]
        for where in sorted(by_package[package], key=lambda path: path.rpartition(".")[2]):
            lines += ["", f"::: {where}", "    options:", "      heading_level: 3"]
    return "\n".join(lines) + "\n"
