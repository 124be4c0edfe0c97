"""Every link of the docs and the README resolves, and every docs page the code cites exists.

Links are checked as MkDocs resolves them: relative to the page, to a file that exists, and to
a heading of it when they name an anchor (slugs as Python-Markdown's toc makes them). Code,
configs, scripts and tests cite pages as ``docs/...md`` paths from the repository root.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from tests.conftest import REPO

DOCS = REPO / "docs"
PAGES = [*sorted(DOCS.rglob("*.md")), REPO / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CITING = ("evogan", "scripts", "configs", "tests")
GENERATED = {DOCS / "reference" / f"{name}.md" for name in ("cli", "config", "api")}
"""Pages docs/hooks/reference.py adds at build time (the strict build checks links into them)."""


def unfenced(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def prose(text: str) -> str:
    """The text outside fenced blocks and code spans, where a link is a link."""
    return re.sub(r"`[^`\n]*`", "", unfenced(text))


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("**", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    """Heading anchors of a page, with ``_1``, ``_2`` for repeated headings as MkDocs makes."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*$", unfenced(page.read_text()), flags=re.M):
        base, number = slug(heading), 0
        name = base
        while name in found:
            number += 1
            name = f"{base}_{number}"
        found.add(name)
    return found


def test_every_relative_link_of_the_docs_and_readme_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(prose(page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)}: {target}"
            if dest in GENERATED:
                continue
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif page.is_relative_to(DOCS) and not dest.is_relative_to(DOCS):
                broken.append(f"{where} (outside docs/, which the site cannot link)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_docs_page_the_code_cites_exists() -> None:
    missing = sorted(
        f"{path.relative_to(REPO)}: {cited}"
        for folder in CITING
        for path in (REPO / folder).rglob("*")
        if path.is_file() and path.suffix in (".py", ".yaml", ".sh", ".sbatch", ".c")
        for cited in re.findall(r"docs/\w[\w/.-]*?\.md", path.read_text(errors="replace"))
        if not (REPO / cited).is_file()
    )
    assert not missing, "docs pages cited but missing:\n" + "\n".join(missing)
