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


FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def _alternatives(entry: str) -> list[str]:
    """An entry's commands: its parts at ` | ` outside brackets (`[--limit N | --sample N]` is one)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(entry):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth == 0 and entry.startswith(" | ", i):
            parts.append(entry[start:i])
            start = i + 3
    return [*parts, entry[start:]]


def _synopsis_flags() -> dict[str, set[str]]:
    """The flags docs/using.md's synopsis names for each command (`run`, `steer check`): its block
    read as entries (a line with its indented continuations), an entry's ` | ` alternatives each
    a command; a named group (BACKEND OPTIONS, TASK OPTION FLAGS) adds its own entry's flags
    where a command names it."""
    block = (REPO / "docs" / "using.md").read_text().split("```sh\n", 1)[1].split("```", 1)[0]
    entries: list[str] = []
    for line in block.splitlines():
        if line[:1].isspace() and entries:
            entries[-1] += " " + line.strip()
        elif line.strip():
            entries.append(line.strip())
    groups = {m.group(1): e[m.end():] for e in entries if (m := re.match(r"([A-Z][A-Z ]*[A-Z])\b", e))}
    out: dict[str, set[str]] = {}
    for piece in (p for e in entries if e.startswith("econeval") for p in _alternatives(e)):
        words = piece.removeprefix("econeval ").split()
        name = " ".join(w for w in words[:2] if re.fullmatch(r"[a-z][a-z-]*", w))
        body = piece + "".join(text for group, text in groups.items() if group in piece)
        out.setdefault(name, set()).update(FLAG.findall(body))
    return out


def test_every_flag_the_help_lists_is_in_the_synopsis_of_docs_using():
    """Every option `--help` lists for a command (its long form, or its only form) is in
    docs/using.md's synopsis line of that command: a flag added without docs fails here."""
    import click

    from econeval import cli as cli_module

    cli_module._add_registered_commands()  # the benchmarks' and plugins' command groups (`steer`)

    def leaves(cmd: click.Command, path: tuple[str, ...] = ()):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from leaves(sub, (*path, name))
        else:
            yield " ".join(path), cmd

    documented = _synopsis_flags()
    missing = {}
    for name, cmd in leaves(cli_module.cli):
        # an option is documented by any of its forms (`-M` for -M/--model-option)
        options = [p.opts + p.secondary_opts for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
        got = documented.get(name, set())
        lacking = [max(forms, key=len) for forms in options if not set(forms) & got]
        if lacking:
            missing[name] = lacking
    assert {"run", "gate", "compare", "report", "export", "steer check"} <= set(documented)
    assert not missing, missing
