"""tests/conftest.py's ``fast_cases(n)`` misused is refused at collection, naming the test (session 72).

Was: without a number, an ``IndexError`` from inside the hook; on a test without parametrize, nothing at all, so a
test meant to keep a few cases fast silently kept every one.
"""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")


def conftest_and_its_helpers() -> list[Path]:
    """tests/conftest.py and each module of tests/ it imports: copied alone, its import of a helper (abort_reruns)
    failed the copied run before collection (CI of session 75)."""
    names = {alias.name.split(".")[0] for node in ast.walk(ast.parse(CONFTEST.read_text()))
             if isinstance(node, (ast.Import, ast.ImportFrom))
             for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])}
    return [CONFTEST] + [CONFTEST.with_name(f"{name}.py") for name in sorted(names)
                         if CONFTEST.with_name(f"{name}.py").exists()]


@pytest.mark.slow  # starts a pytest process
@pytest.mark.parametrize("decorators, said", [
    ("@pytest.mark.parametrize('case', [0, 1])\n@pytest.mark.fast_cases()", "got fast_cases()"),
    ("@pytest.mark.parametrize('case', [0, 1])\n@pytest.mark.fast_cases('1')", "got fast_cases('1',)"),
    ("@pytest.mark.fast_cases(1)", "got fast_cases(1,) on a plain test"),
])
def test_a_misused_fast_cases_is_refused_naming_the_test(tmp_path, decorators, said):
    for source in conftest_and_its_helpers():
        shutil.copy(source, tmp_path / source.name)
    args = "case" if "parametrize" in decorators else ""
    (tmp_path / "test_misused.py").write_text(f"import pytest\n\n\n{decorators}\ndef test_it({args}):\n    pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-p", "no:randomly", "-o", "markers=fast_cases slow", "test_misused.py"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode != 0
    assert "test_misused.py::test_it" in done.stdout and "fast_cases(n) takes one int n >= 0" in done.stdout
    assert said in done.stdout
