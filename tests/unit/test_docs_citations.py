"""Every document the code and the tests cite is in the repository, down to the section cited.

Why: a docstring that says "see nvcre-contract.md §3.7" is only worth something when a reader of this
repository can open that section. The documents live in `docs/` (or at the top level, like README.md), and
a citation names a section by its number, so the cited heading must exist there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Another project's own file, cited as such ("nccl-tests' PERFORMANCE.md"), not a document of ours.
FOREIGN = frozenset({"PERFORMANCE.md"})
CITATION = re.compile(r"([A-Za-z0-9_-]+\.md)`?((?:\s*(?:,|-|and)?\s*§\d+(?:\.\d+)?)*)")
SECTION = re.compile(r"§(\d+(?:\.\d+)?)")


def sources() -> list[Path]:
    return sorted(
        path for folder in ("nvcre_argo", "tests") for path in (ROOT / folder).rglob("*.py") if path.is_file()
    )


def citations() -> list[tuple[str, str, list[str]]]:
    found = []
    for path in sources():
        for match in CITATION.finditer(path.read_text(encoding="utf-8")):
            if match.group(1) not in FOREIGN:
                found.append((str(path.relative_to(ROOT)), match.group(1), SECTION.findall(match.group(2))))
    return found


def document(name: str) -> Path | None:
    return next((path for path in (DOCS / name, ROOT / name) if path.is_file()), None)


def headings(path: Path) -> set[str]:
    """Section numbers of `## 3.` and `### 3.7 ...` headings."""
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)[. ]", path.read_text(encoding="utf-8"), re.M))


def test_there_are_citations_to_check() -> None:
    assert len(citations()) > 10


@pytest.mark.parametrize(
    ("source", "name", "sections"),
    [pytest.param(*cited, id=f"{cited[0]}:{cited[1]}{''.join(' §' + s for s in cited[2])}") for cited in citations()],
)
def test_a_cited_document_and_section_are_in_the_repository(source: str, name: str, sections: list[str]) -> None:
    path = document(name)
    assert path is not None, f"{source} cites {name}, which is neither in docs/ nor at the top level"
    known = headings(path)
    for section in sections:
        # "§0.4" may name item 4 of the list under "## 0."; a numbered heading or its parent must exist.
        assert section in known or (section.split(".")[0] in known and section.startswith("0.")), (
            f"{source} cites {name} §{section}, which has no such section"
        )
