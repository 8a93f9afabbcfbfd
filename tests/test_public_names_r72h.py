"""Tests reach the harness through its public names (issue 11: "no test spies on private functions", AUDIT72 B).

``command_checks.config_problem``, ``dry_run.own_data_dims``, ``own_observation.draw_posterior``,
``cpu_count.accelerators_installed`` and ``summary.record_end``/``clear_end`` were private names that tests
imported or patched; they are public now (``__all__``, numpy docstrings), and no test imports a private name of the
package (tests/test_structure_r72c.py checks the patches).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = sorted((ROOT / "tests").glob("test_*.py"))


def private_imports(tree: ast.Module) -> set[tuple[str, str]]:
    """``(module, name)`` of each ``from gensbi_sharding... import _name`` (at any depth: inside a test too)."""
    return {(node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gensbi_sharding")
            for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")}


def test_no_test_imports_a_private_name_of_the_package():
    found = {path.name: imports for path in TESTS
             if (imports := private_imports(ast.parse(path.read_text(), filename=str(path))))}
    assert found == {}


def test_private_imports_are_found():
    tree = ast.parse("from gensbi_sharding.harness.dry_run import own_data_dims, _hidden\n"
                     "from os import _exit\nfrom gensbi_sharding import __version__\n"
                     "def test():\n    from gensbi_sharding.harness.command_checks import _config_problem\n")
    assert private_imports(tree) == {("gensbi_sharding.harness.dry_run", "_hidden"),
                                     ("gensbi_sharding.harness.command_checks", "_config_problem")}


@pytest.mark.parametrize("module, name", [("command_checks", "config_problem"), ("dry_run", "own_data_dims"),
                                          ("own_observation", "draw_posterior"),
                                          ("cpu_count", "accelerators_installed"),
                                          ("summary", "record_end"), ("summary", "clear_end")])
def test_the_names_tests_reach_are_public(module, name):
    import importlib

    harness_module = importlib.import_module(f"gensbi_sharding.harness.{module}")
    # own_observation's __all__ is pinned by tests/test_own_observation.py (the CLI module's API): not listed there
    assert name in harness_module.__all__ and callable(getattr(harness_module, name))
    assert "Returns" in getattr(harness_module, name).__doc__ or "Parameters" in getattr(harness_module, name).__doc__ \
        or name == "clear_end"


def test_the_sweep_s_end_is_recorded_and_cleared_through_the_module_s_functions():
    from gensbi_sharding.harness import summary

    before = summary.sweep_end_written()
    try:
        refused = OSError(28, "No space left on device")
        summary.record_end(refused)
        assert summary.sweep_end_written() == [refused]
        summary.record_end(None)  # a sweep whose jobs left no record
        assert summary.sweep_end_written() == [None]
        summary.clear_end()
        assert summary.sweep_end_written() == []
    finally:
        summary.clear_end()
        for item in before:
            summary.record_end(item)
