"""``shard_batch``/``replicate``'s one placing function reads as checks, then refusals, then placing (r73n): the
refusals of where it is called (a shard_map, another active mesh, one process's arrays, Explicit axes with no mesh
active) and the placing (``device_put`` or a pin in a trace, the retry naming a leaf that differs between processes)
are functions of their own, so none of them hides in an ~80-line body."""

import ast
from pathlib import Path

import gensbi_sharding as gs

BATCH = Path(gs.__file__).parent / "batch.py"  # the package imported: on the old code, the old one


def functions() -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.parse(BATCH.read_text()).body if isinstance(node, ast.FunctionDef)}


def length(node: ast.FunctionDef) -> int:
    return node.end_lineno - node.lineno + 1


def test_put_leaves_is_split_into_its_refusals_and_its_placing():
    # Was: one 73-line _put_leaves holding every refusal and the placing.
    found = functions()
    assert length(found["_put_leaves"]) <= 40, length(found["_put_leaves"])
    called = {node.func.id for node in ast.walk(found["_put_leaves"])
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert {"_refuse_placing", "_placed"} <= called
    assert all(length(found[name]) <= 40 for name in ("_refuse_placing", "_placed"))
