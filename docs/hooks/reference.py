"""MkDocs hook: the reference pages (command line, config keys, Python API) rendered from the
code of this checkout when the site is built. They exist only in the build, never in docs/,
so they cannot go stale; what they say comes from :mod:`evogan.commands.reference` and
:mod:`evogan.config.reference`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # this checkout's evogan, even where another is installed

from evogan.commands.reference import api_markdown, cli_markdown  # noqa: E402
from evogan.config.reference import config_markdown  # noqa: E402

PAGES = {
    "reference/cli.md": cli_markdown,
    "reference/config.md": config_markdown,
    "reference/api.md": api_markdown,
}
"""Where each generated page goes in the site -> what renders it."""


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages to the site's files, before the nav is built from them."""
    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=render()))
    return files
