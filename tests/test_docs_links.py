"""Every relative link and #anchor in README.md and docs/*.md resolves, and so does every pointer from the
code and configs to a docs/ page or a README section (files read as text, no JAX).

The README was cut to a short form and the long forms moved to docs/*.md, linked from each section;
a heading renamed or a page moved would leave links that open the right page at the top, or none.
Anchors follow GitHub's rule: the heading's rendered text, lower-case, punctuation dropped (but
'-' and '_'), each space a '-', a repeated heading suffixed -1, -2, ...
"""

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!\\)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> list[str]:
    """The page's lines, those inside fenced code blocks blank (a '#' there is a comment, a '[x](y)' no link)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            lines.append("")
            continue
        lines.append("" if fenced else line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's markdown text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    for line in prose(path.read_text()):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            seen.setdefault(base if n == 0 else f"{base}-{n}", 1)
    return set(seen)


def links(path: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(prose(path.read_text()), 1):
        line = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)
        found += [(number, m.group(2)) for m in LINK.finditer(line)]
    return found


def test_slug_follows_githubs_rule():
    assert slug("GenSBI's own models: Flux1 and Simformer") == "gensbis-own-models-flux1-and-simformer"
    assert slug("The install and `make run`") == "the-install-and-make-run"
    assert slug("`benchmarks/shard_model.py`") == "benchmarksshard_modelpy"
    assert slug("Modules, and the history of the library's line counts") == (
        "modules-and-the-history-of-the-librarys-line-counts")


def test_the_pages_have_links_to_check():
    readme = links(ROOT / "README.md")
    assert len(readme) > 40, readme  # the README links each section's long form
    assert any(target.startswith("docs/") and "#" in target for _, target in readme)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for number, target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not this test's business
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        if not dest.exists():
            broken.append(f"{where} (no file {file_part})")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{where} (no heading with anchor #{anchor} in {dest.relative_to(ROOT)})")
    assert broken == [], "\n".join(broken)


# Code and configs that send a user to the docs: each docs/<page>.md#anchor resolves, and each README
# section a message or comment names ("README: A preset of your own", 'the README's "Memory" section')
# is a heading or a bold run-in title there.
SOURCES = [*sorted((ROOT / "gensbi_sharding").rglob("*.py")), *sorted((ROOT / "conf").rglob("*.yaml")),
           *sorted((ROOT / "benchmarks").glob("*.py")), ROOT / "launch.py", ROOT / "sample.py", ROOT / "Makefile"]


def texts(path: Path) -> list[str]:
    """The file's lines; for Python its comments and each string constant whole (a message split over f-string lines)."""
    text = path.read_text()
    if path.suffix != ".py":
        return [" ".join(t.split()) for t in text.splitlines()]
    found = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    tree = ast.parse(text)
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            found.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            found.append(node.value)
    return [" ".join(t.split()) for t in found]


def readme_titles() -> set[str]:
    lines = prose((ROOT / "README.md").read_text())
    titles = {m.group(1) for line in lines if (m := re.match(r"#{1,6}\s+(.*?)\s*$", line))}
    titles |= {m.group(1) for line in lines if (m := re.match(r"\*\*(.+?)\.?\*\*", line))}
    return {t.lower() for t in titles}


def cited_readme_sections(text: str) -> list[str]:
    return re.findall(r"README: ([A-Z][^);\"]*)", text) + re.findall(r"README's \"([^\"]+)\"", text)


@pytest.mark.slow
def test_pointers_from_code_and_configs_resolve():
    titles, broken, count = readme_titles(), [], 0
    for path in SOURCES:
        for text in texts(path):
            where = f"{path.relative_to(ROOT)}: {text[:100]}"
            for page, anchor in re.findall(r"\b(docs/[\w-]+\.md)(?:#([\w-]+))?", text):
                count += 1
                if not (ROOT / page).exists() or anchor and anchor not in anchors(ROOT / page):
                    broken.append(f"{where} ({page}#{anchor} does not resolve)")
            for title in cited_readme_sections(text):
                count += 1
                if title.strip().lower() not in titles:
                    broken.append(f"{where} (README has no section {title!r})")
    assert count >= 8, count  # the messages naming README sections, the configs' links to docs/
    assert broken == [], "\n".join(broken)


def test_a_stale_pointer_is_caught():
    titles = readme_titles()
    assert "a preset of your own" in titles and "writing your own rule" in titles
    assert cited_readme_sections('README\'s "Memory" section') == ["Memory"] and "memory" not in titles
    assert cited_readme_sections("f(README: A model of your own in the harness)") == [
        "A model of your own in the harness"]
