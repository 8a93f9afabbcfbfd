"""The README's counts of the library's lines, and its 300-line cap per module, against the files.

The README says "No module is over 300 lines. The library is N lines: C of code ..., D of numpy
docstrings"; those numbers went stale as fixes landed (3,284 written, 3,299 there), so they are
read from the README and recounted here (files read as text, nothing imported).
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gensbi_sharding"
MAX_LINES = 300
# A few lines' slack, so that a small fix does not force a README edit; a round's drift does.
TOLERANCE = 10


def count_lines(path: Path) -> dict[str, int]:
    """Lines of ``path`` by kind: docstrings (module, class, function), blank or comment, code."""
    text = path.read_text()
    doc_lines = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                doc_lines.update(range(first.lineno, first.end_lineno + 1))
    counts = {"docstrings": 0, "other": 0, "code": 0}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        kind = "docstrings" if number in doc_lines else "other" if not stripped or stripped.startswith("#") else "code"
        counts[kind] += 1
    return counts


def readme_counts() -> dict[str, int]:
    text = " ".join((ROOT / "README.md").read_text().split())
    total = re.search(r"The library is ([\d,]+) lines: ([\d,]+) of code", text)
    docs = re.search(r"([\d,]+) of numpy docstrings", text)
    assert total and docs, "README.md no longer states the library's line counts in the form this test reads"
    number = lambda s: int(s.replace(",", ""))  # noqa: E731
    return {"total": number(total.group(1)), "code": number(total.group(2)), "docstrings": number(docs.group(1))}


def test_every_module_within_the_line_cap():
    # The benchmark scripts and the entry points are the harness's too (was: the package alone: sbibm.py grew to 320)
    scripts = [*sorted((ROOT / "benchmarks").glob("*.py")), ROOT / "launch.py", ROOT / "sample.py"]
    long = {str(p.relative_to(ROOT)): n for p in [*sorted(PACKAGE.rglob("*.py")), *scripts]
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"modules over {MAX_LINES} lines (the README promises none): {long}"


def library_counts() -> dict[str, int]:
    actual = {"total": 0, "code": 0, "docstrings": 0}
    for path in sorted(PACKAGE.glob("*.py")):  # the library: the package's top level, not the harness
        counts = count_lines(path)
        actual["total"] += sum(counts.values())
        actual["code"] += counts["code"]
        actual["docstrings"] += counts["docstrings"]
    return actual


def test_readme_line_counts_match_the_library():
    actual = library_counts()
    stated = readme_counts()
    off = {k: (stated[k], actual[k]) for k in actual if abs(stated[k] - actual[k]) > TOLERANCE}
    assert off == {}, (
        f"README.md's library line counts are stale (stated, counted): {off}; write "
        f"'The library is {actual['total']:,} lines: {actual['code']:,} of code' and "
        f"'{actual['docstrings']:,} of numpy docstrings'")
    assert actual["code"] > 1000 and actual["docstrings"] > 500  # the count reads real files


def test_no_docs_page_states_other_line_counts():
    # Was: docs/library.md kept a copy of the README's sentence, "The library is 3,465 lines: 2,017 of code (...),
    # 1,018 of numpy docstrings", which went stale beside the README's 916; it now points to the README's.
    actual = library_counts()
    stated = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = " ".join(page.read_text().split())
        for total, code in re.findall(r"The library is ([\d,]+) lines: ([\d,]+) of code", text):
            stated += [(page.name, "total", total), (page.name, "code", code)]
        stated += [(page.name, "docstrings", docs) for docs in re.findall(r"([\d,]+) of numpy docstrings", text)]
    off = [(page, kind, number) for page, kind, number in stated
           if abs(int(number.replace(",", "")) - actual[kind]) > TOLERANCE]
    assert off == [], f"docs pages state stale library line counts (page, kind, stated): {off}; counted: {actual}"


def test_every_module_keeps_its_lines_within_120_characters():
    # The whole package (library, harness, its models), the benchmark scripts and the two scripts a user runs: every
    # file a reader opens (a list of the modules wrapped so far let new long lines in elsewhere).
    files = [*sorted(PACKAGE.rglob("*.py")), *sorted((PACKAGE.parent / "benchmarks").glob("*.py")),
             PACKAGE.parent / "launch.py", PACKAGE.parent / "sample.py"]
    long = {f"{path.relative_to(PACKAGE.parent)}:{number}": len(line) for path in files
            for number, line in enumerate(path.read_text().splitlines(), 1) if len(line) > 120}
    assert long == {}, f"lines over 120 characters: {long}"
