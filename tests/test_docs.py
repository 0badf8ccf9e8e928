"""The README stays short and its reference lives in docs/: every relative link between them
names a file that exists, and an anchor names one of that file's headings."""

import re

from conftest import REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    out = set()
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return out


def test_the_readme_is_short_and_every_link_between_it_and_docs_works():
    readme = REPO / "README.md"
    assert len(readme.read_text().splitlines()) <= 250
    pages = [readme, *sorted((REPO / "docs").glob("*.md"))]
    assert len(pages) > 5
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text()):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken
    linked = {m.partition("#")[0] for m in LINK.findall(readme.read_text())}
    assert {f"docs/{p.name}" for p in pages[1:]} <= linked  # the README names every reference page
