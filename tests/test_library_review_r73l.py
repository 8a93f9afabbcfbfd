"""What a JAX/Flax reviewer flagged reading the library (session 73), kept from coming back.

``rules`` promises a module the harness reads without JAX, yet imported JAX, ``nodes`` and ``specs`` inside two
functions; ``partition_spec_for`` (logical axes -> PartitionSpec) now lives with the spec checks in ``specs``. A walrus
that rebinds a parameter inside a condition (``mesh is None or mesh.empty and (mesh := entered_mesh()) is None``) made
a reader simulate which value each name held; none is left. Files are read with ``ast``; nothing is imported but the
package.
"""

import ast
from pathlib import Path

import gensbi_sharding as gs
from gensbi_sharding import specs

PACKAGE = Path(gs.__file__).resolve().parent
LIBRARY = sorted(PACKAGE.glob("*.py"))  # the library: the package's top level, not the harness


def functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_rules_imports_nothing_inside_a_function_and_nothing_for_type_checking_only():
    tree = ast.parse((PACKAGE / "rules.py").read_text())
    local = [(fn.name, node.lineno) for fn in functions(tree) for node in ast.walk(fn)
             if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert local == []
    assert "TYPE_CHECKING" not in {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    # and nothing at its top that brings JAX in: the standard library and the package's JAX-free modules only
    top = {(node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
           for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    assert top <= {"dataclasses", "difflib", "sys", "collections", "typing", "gensbi_sharding"}, top
    assert {node.module for node in tree.body if isinstance(node, ast.ImportFrom)
            and node.module.startswith("gensbi_sharding")} <= {"gensbi_sharding.messages"}


def test_partition_spec_for_is_the_spec_modules_and_still_the_packages():
    from jax.sharding import PartitionSpec as P

    import gensbi_sharding.rules as rules

    assert gs.partition_spec_for is specs.partition_spec_for and not hasattr(rules, "partition_spec_for")
    mesh = gs.make_mesh(model_axis=1)
    assert gs.partition_spec_for(("embed", None), (8, 3), "fsdp", mesh) == (P("data", None), None)


def earlier_bindings(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """Each name the function binds outside a comprehension (parameters, assignments, loops, walruses): first line."""
    first = {a.arg: fn.lineno for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    scoped = {id(n) for c in ast.walk(fn) if isinstance(c, (ast.ListComp, ast.SetComp, ast.DictComp,
                                                              ast.GeneratorExp)) for n in ast.walk(c)}
    for node in ast.walk(fn):
        if id(node) in scoped:
            continue
        targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                   if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr)) else [])
        for name in (n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
            first[name.id] = min(first.get(name.id, node.lineno), node.lineno)
    return first


def test_no_library_function_rebinds_a_bound_name_with_a_walrus():
    # A parameter or a name bound on an earlier line, rebound inside a condition; a while loop stepping its own
    # variable (``while (frame := frame.f_back) is not None``) is the idiom, not a rebinding a reader must simulate.
    found = []
    for path in LIBRARY:
        for fn in functions(ast.parse(path.read_text())):
            first = earlier_bindings(fn)
            steps = {id(n) for loop in ast.walk(fn) if isinstance(loop, ast.While) for n in ast.walk(loop.test)}
            for test in (n for n in ast.walk(fn) if isinstance(n, (ast.If, ast.While, ast.IfExp, ast.BoolOp,
                                                                     ast.Compare))):
                for node in (n for n in ast.walk(test) if isinstance(n, ast.NamedExpr)):
                    name, line = node.target.id, node.lineno
                    own_step = id(node) in steps and name in {
                        n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
                    if first.get(name, line) < line and not own_step:
                        found.append(f"{path.name}:{line} {name}")
    assert sorted(set(found)) == []
