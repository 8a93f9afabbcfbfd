"""The harness's meshes, rules, mesh configs, plans and activation axes are typed, not ``Any`` (issue 11, AUDIT72 D).

``mesh: Any`` told a reader nothing a ``jax.sharding.Mesh`` would (and hid the functions that also take an
``AbstractMesh`` or None). The real types are imported under ``TYPE_CHECKING``, so launch.py's start still imports
no JAX (tests/test_start_imports.py). Read with ``ast``: no module is imported, nothing here starts JAX.
"""

import ast
import builtins
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "gensbi_sharding" / "harness"
MODULES = {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text()) for path in sorted(HARNESS.rglob("*.py"))}

#: Parameter (and field) names whose type the library or OmegaConf names: Mesh, Rule/RuleTable, DictConfig, Plan,
#: PartitionAxis.
TYPED_NAMES = ("mesh", "rule", "mesh_cfg", "plan", "partition_axis")

#: Modules allowed their listed number of such ``Any`` parameters (none left).
LEFT = {}


def _names(node: ast.AST | None) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _says_any(annotation: ast.AST | None) -> bool:
    """``Any``, or ``Any`` as one member of a union (``X | Any``, ``"Any"``); ``Mapping[str, Any]`` is a type."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _says_any(annotation.left) or _says_any(annotation.right)
    return isinstance(annotation, ast.Name) and annotation.id == "Any"


def any_typed(tree: ast.Module) -> list[tuple[str, int]]:
    """``(name, line)`` of each parameter or class field named in ``TYPED_NAMES`` whose annotation says ``Any``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            found += [(arg.arg, arg.lineno) for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs)
                      if arg.arg in TYPED_NAMES and _says_any(arg.annotation)]
        elif isinstance(node, ast.ClassDef):
            found += [(item.target.id, item.lineno) for item in node.body
                      if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                      and item.target.id in TYPED_NAMES and _says_any(item.annotation)]
    return found


def test_meshes_rules_and_plans_are_not_typed_any():
    # one test over every module (not one per module: ~170 cases of a few ms each, all saying the same)
    found = {name: any_typed(tree) for name, tree in MODULES.items()}
    assert {name: len(f) for name, f in found.items() if f} == LEFT, {name: f for name, f in found.items() if f}


def test_any_typed_parameters_are_found():
    tree = ast.parse("class S:\n    plan: Any\n    mesh: Mesh\n"
                     "def f(mesh: Any, /, rule: Mesh | Any, *, mesh_cfg: 'Any' = None, plan: Plan, other: Any): pass\n"
                     "def g(rule: Mapping[str, Any] | str, mesh: Mesh | None,\n"
                     "      partition_axis: Any | None = None): pass\n")
    assert sorted(any_typed(tree)) == [("mesh", 4), ("mesh_cfg", 4), ("partition_axis", 6), ("plan", 2), ("rule", 4)]


def bound_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level, ``if TYPE_CHECKING:`` imports included, and the builtins."""
    bound = set(dir(builtins))
    for node in tree.body:
        body = node.body if isinstance(node, ast.If) else [node]
        for item in body:
            if isinstance(item, (ast.Import, ast.ImportFrom)):
                bound |= {(a.asname or a.name).split(".")[0] for a in item.names}
            elif isinstance(item, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                bound.add(item.name)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                bound |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return bound


def test_the_types_of_meshes_rules_and_plans_are_imported():
    # With ``from __future__ import annotations`` a misspelt or unimported type would never fail at run time.
    unbound = []
    for name, tree in MODULES.items():
        bound = bound_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                unbound += [(name, arg.arg, n) for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs)
                            if arg.arg in TYPED_NAMES for n in sorted(_names(arg.annotation) - bound)]
    assert unbound == []


def test_unimported_types_are_found():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jax.sharding import Mesh\n"
                     "def f(mesh: Mesh | None, rule: Rule): pass\n")
    bound = bound_names(tree)
    assert "Mesh" in bound and "Rule" not in bound and "None" in bound
