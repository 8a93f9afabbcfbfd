"""The package's import graph, read with ``ast`` (nothing is imported).

The library (``gensbi_sharding/*.py``) has no import cycle, not even through an import
inside a function; the whole package has no cycle among its module-level imports; no
module imports (or reads) another module's ``_``-names; the library never imports the
harness nor JAX's internals (``jax._src``, ``jax.extend``) or ``ctypes``.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "gensbi_sharding"
FORBIDDEN_IN_LIBRARY = ("jax._src", "jax.extend", "ctypes", f"{PACKAGE}.harness")
NAMEDTUPLE_API = {"_fields", "_replace", "_asdict", "_make", "_field_defaults"}  # public despite the "_"


def parse_package() -> dict[str, ast.Module]:
    modules = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = ast.parse(path.read_text(), filename=str(path))
    return modules


MODULES = parse_package()
LIBRARY = {name for name in MODULES if name.count(".") <= 1 and not name.startswith(f"{PACKAGE}.harness")}


def imports(tree: ast.Module, *, top_level_only: bool) -> list[tuple[str, list[str], int]]:
    """``(module, names imported from it, line)`` for every import of ``tree`` (absolute imports only)."""
    found = []
    for node in tree.body if top_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import at line {node.lineno}: use the package name"
            found.append((node.module, [alias.name for alias in node.names], node.lineno))
    return found


def edges(tree: ast.Module, *, top_level_only: bool) -> set[str]:
    """The package modules ``tree`` imports; ``from pkg import submodule`` is the submodule."""
    out = set()
    for module, names, _ in imports(tree, top_level_only=top_level_only):
        if module.startswith(PACKAGE):
            out.update(f"{module}.{n}" if f"{module}.{n}" in MODULES else module for n in names or [None])
    return out & set(MODULES)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
            if nxt not in state and (cycle := visit(nxt, path + [nxt])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_the_library_has_no_import_cycle_even_through_function_level_imports():
    graph = {name: edges(MODULES[name], top_level_only=False) & LIBRARY for name in LIBRARY}
    assert find_cycle(graph) is None


def test_the_package_has_no_cycle_among_module_level_imports():
    graph = {name: edges(tree, top_level_only=True) for name, tree in MODULES.items()}
    assert find_cycle(graph) is None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_crosses_modules(name):
    tree = MODULES[name]
    imported = [(module, n, line) for module, names, line in imports(tree, top_level_only=False)
                if module.startswith(PACKAGE) for n in names if n.startswith("_") and not n.startswith("__")]
    assert imported == []
    aliases = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
               for alias in node.names
               if (alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}").startswith(PACKAGE)
               or (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE))}
    private_reads = [(node.value.id, node.attr, node.lineno) for node in ast.walk(tree)
                     if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                     and node.value.id in aliases and node.attr.startswith("_") and not node.attr.startswith("__")
                     and node.attr not in NAMEDTUPLE_API]
    assert private_reads == []


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_the_library_uses_public_apis_and_never_the_harness(name):
    bad = [(module, line) for module, _, line in imports(MODULES[name], top_level_only=False)
           if module.startswith(FORBIDDEN_IN_LIBRARY)]
    assert bad == []


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_the_library_imports_no_name_it_never_uses(name):
    # Was: sharding.py imported nodes.named_leaves and never read it (a dependency the import graph showed that was
    # none). A module-level ``from x import y`` is read somewhere in the module, or exported by its ``__all__``.
    tree = MODULES[name]
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    exported = {elt.value for node in tree.body if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets) for elt in getattr(node.value, "elts", [])
        if isinstance(elt, ast.Constant)}
    unused = [alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
              and node.module != "__future__" for alias in node.names
              if (alias.asname or alias.name) not in read | exported]
    assert unused == [], f"{name} imports {unused} and never reads them"


@pytest.mark.slow
def test_every_third_party_package_the_library_imports_is_a_declared_dependency():
    # Was: checkpoint_damage imported tensorstore (its public ocdbt.dump, which older releases lack) with no line in
    # pyproject.toml: only orbax-checkpoint's unpinned requirement brought it, at any version.
    import importlib.metadata
    import sys
    import tomllib

    declared = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in tomllib.loads(
        (ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    imported = {module.split(".")[0] for name in LIBRARY
                for module, _, _ in imports(MODULES[name], top_level_only=False)}
    third_party = sorted(m for m in imported if m not in sys.stdlib_module_names and m != PACKAGE)
    distributions = importlib.metadata.packages_distributions()
    missing = [m for m in third_party if not {d.lower() for d in distributions.get(m, [m])} & declared]
    assert third_party and missing == [], f"imported by the library, not declared in pyproject.toml: {missing}"
