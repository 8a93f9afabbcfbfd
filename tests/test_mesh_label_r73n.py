"""``mesh_label`` lives in ``mesh`` (a mesh's name in messages is the mesh module's job); ``init`` reads it there and no
longer imports ``report``, which it needed for nothing else (r73n)."""

import ast
from pathlib import Path

from jax.sharding import AbstractMesh, AxisType

import gensbi_sharding as gs

LIBRARY = Path(gs.__file__).parent  # the package imported: on old code, the old one


def imported_modules(name: str) -> set[str]:
    tree = ast.parse((LIBRARY / f"{name}.py").read_text())
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}


def test_init_does_not_import_report():
    # Was: init imported gensbi_sharding.report for mesh_label alone.
    assert "gensbi_sharding.report" not in imported_modules("init")
    assert "gensbi_sharding.mesh" in imported_modules("init")


def test_mesh_label_names_a_mesh_by_its_axes_and_devices(devices):
    from gensbi_sharding.mesh import mesh_label  # was in report

    assert mesh_label(gs.make_mesh(model_axis=2)) == "mesh {'data': 4, 'model': 2} (devices [0, 1, 2, 3, 4, 5, 6, 7])"
    abstract = AbstractMesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    assert mesh_label(abstract) == "mesh {'data': 4, 'model': 2}"  # no devices to name
