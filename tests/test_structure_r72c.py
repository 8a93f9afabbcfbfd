"""Issue 11's structural items, checked over the harness and the scripts too (``ast``: nothing is imported but
``units``, ``config`` and ``factory_keywords``, which import no JAX).

``test_import_graph.py`` checks the library's public-API rule and the private-name rule for the package; it never
read ``launch.py`` or ``sample.py``, and kept ``jax._src``, ``jax.extend`` and ``ctypes`` out of the library only.
Beside those: the harness wrote its integer check by hand in six modules (``isinstance(v, int) and not
isinstance(v, bool)``, two of them as private ``_is_int`` helpers, one refusing NumPy integers the others took), called
a model's factory in three (``state.builder``, ``state_check``'s strict check, ``memory_check``'s estimate, each
dropping ``("name", "init")`` from ``cfg.model`` by hand, as three more modules did), and ``models.simformer`` took
``compute_dtype`` from ``models.flux1``: a helper two models share, inside one of them.
"""

import ast
import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "gensbi_sharding" / "harness"
SOURCES = sorted((ROOT / "gensbi_sharding").rglob("*.py")) + [ROOT / "launch.py", ROOT / "sample.py"]
NAMES = sorted(path.relative_to(ROOT).as_posix() for path in SOURCES)


@functools.cache
def trees() -> dict[str, ast.Module]:
    """Every source file's syntax tree, parsed on first use: at import, every collection (each xdist worker's, a
    run of one other file) paid ~0.45 s for it."""
    return {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(), filename=str(path)) for path in SOURCES}


def harness_trees() -> dict[str, ast.Module]:
    return {name: tree for name, tree in trees().items() if name.startswith("gensbi_sharding/harness/")}
FORBIDDEN = ("jax._src", "jax.extend", "ctypes")


def imported_modules(tree: ast.Module) -> list[tuple[str, list[str], int]]:
    """``(module, names, line)`` of every import in ``tree``, function-level ones too."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", [alias.name for alias in node.names], node.lineno))
    return found


@pytest.mark.parametrize("name", NAMES)
def test_no_internal_api_in_the_package_nor_the_scripts(name):
    tree = trees()[name]
    bad = [(module, line) for module, names, line in imported_modules(tree)
           if module.startswith(FORBIDDEN) or any(f"{module}.{n}".startswith(FORBIDDEN) for n in names)]
    # Orbax's private completion marker, read by hand once (issue 11): Orbax's own completeness checks instead
    marker = [node.lineno for node in ast.walk(tree)
              if isinstance(node, ast.Constant) and isinstance(node.value, str) and "commit_success" in node.value]
    assert (bad, marker) == ([], [])


@pytest.mark.parametrize("script", ["launch.py", "sample.py"])
def test_the_scripts_import_no_private_name_of_the_package(script):
    private = [(module, n, line) for module, names, line in imported_modules(trees()[script])
               if module.startswith("gensbi_sharding") for n in names if n.startswith("_")]
    assert private == []


def hand_written_int_checks(tree: ast.Module) -> list[int]:
    """Lines of ``isinstance(v, int...)`` next to ``isinstance(v, bool)`` on the same ``v`` in one expression, of a
    lone ``isinstance(v, int...)`` (which lets ``True`` through) or ``type(v) is int`` (which refuses ``np.int64``),
    and of functions named ``is_int`` / ``_is_int``: an integer check written again."""
    def checks(node):
        return [(ast.dump(c.args[0]), ast.dump(c.args[1])) for c in ast.walk(node) if isinstance(c, ast.Call)
                and isinstance(c.func, ast.Name) and c.func.id == "isinstance" and len(c.args) == 2]

    def integer(kind):  # an integer type alone (int | float, str | int: other checks)
        return any(w in kind for w in ("'int'", "integer", "Integral")) and not any(
            w in kind for w in ("'float'", "'number'", "'str'"))

    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in ("is_int", "_is_int")]
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp):
            found = checks(node)
            subjects_bool = {s for s, kind in found if "'bool'" in kind}
            if any(s in subjects_bool and integer(kind) for s, kind in found):
                lines.append(node.lineno)
    for node in ast.walk(tree):
        lone = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                and len(node.args) == 2 and integer(ast.dump(node.args[1])))
        typed = (isinstance(node, ast.Compare) and isinstance(node.left, ast.Call)
                 and isinstance(node.left.func, ast.Name) and node.left.func.id == "type"
                 and any(isinstance(c, ast.Name) and c.id == "int" for c in node.comparators))
        if lone or typed:
            lines.append(node.lineno)
    return sorted(set(lines))


@pytest.mark.slow  # walks every harness module's tree: ~1-3 s on 2 cores (its detector's test stays fast)
def test_the_harness_checks_integers_in_one_place():
    found = {name: lines for name, tree in harness_trees().items() if (lines := hand_written_int_checks(tree))}
    assert set(found) == {"gensbi_sharding/harness/units.py"}  # units.is_int, the one (its def and its body)
    assert len(found["gensbi_sharding/harness/units.py"]) == 2


def test_the_one_integer_check_takes_numpy_integers_and_refuses_bools():
    from gensbi_sharding.harness.units import is_int

    assert [is_int(v) for v in (3, 0, -2, np.int64(7), np.uint8(1))] == [True] * 5
    assert [is_int(v) for v in (True, False, np.bool_(True), 3.0, np.float32(2), "3", None, [1])] == [False] * 8


def test_hand_written_int_checks_are_found():
    # the detector above, on the shapes the harness had (loss_history, override_dicts, fitting_values)
    code = ("a = isinstance(w, bool) or not isinstance(w, int | np.integer)\n"
            "b = isinstance(n, int) and not isinstance(n, bool)\n"
            "def _is_int(v):\n    return v\n"
            "c = isinstance(x, bool) or isinstance(y, str)\n"
            "d = not isinstance(v, numbers.Integral) or isinstance(v, bool)\n"
            "e = isinstance(v, (int, float)) and not isinstance(v, bool)\n"  # a number check: not counted
            "f = isinstance(v, int) and v >= 1\n"  # lets True through (flow_sampler's, REVIEW72A)
            "g = type(v) is int\n")  # refuses np.int64
    assert hand_written_int_checks(ast.parse(code)) == [1, 2, 3, 6, 8, 9]


@pytest.mark.slow  # walks every harness module's tree: ~1-2 s on 2 cores
def test_the_model_factory_is_called_in_one_place():
    # The call takes dim_theta, dim_x, rngs and partition_axis (factory_keywords.RUN_KEYWORDS) besides the settings
    calls = {name: [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                    and {"dim_theta", "dim_x", "rngs", "partition_axis"} <= {k.arg for k in n.keywords}]
             for name, tree in harness_trees().items()}
    assert {name for name, lines in calls.items() if lines} == {"gensbi_sharding/harness/factory_keywords.py"}


@pytest.mark.slow  # walks every harness module's tree: ~1-2 s on 2 cores
def test_the_harness_s_model_fields_are_said_once():
    from gensbi_sharding.harness.config import HARNESS_FIELDS, ModelConfig

    assert HARNESS_FIELDS == tuple(f.name for f in dataclasses.fields(ModelConfig)) == ("name", "init")
    said = {name for name, tree in harness_trees().items() for n in ast.walk(tree) if isinstance(n, ast.Tuple)
            and [getattr(e, "value", None) for e in n.elts] == ["name", "init"]}
    assert said == {"gensbi_sharding/harness/config.py"}


def test_model_settings_are_the_factory_keywords_of_the_model_section():
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.factory_keywords import model_settings

    section = OmegaConf.create({"name": "flux1", "init": "eager", "axes_dim": [8, 0], "depth": 2})
    settings = model_settings(section)
    assert settings == {"axes_dim": [8, 0], "depth": 2}
    assert type(settings["axes_dim"]) is list  # a plain list, as the factory is called with
    assert model_settings({"name": "mlp", "width": 16}) == {"width": 16}


def test_model_modules_share_helpers_only_through_common():
    models = {name: tree for name, tree in harness_trees().items()
              if name.startswith("gensbi_sharding/harness/models/")}
    across = [(name, module, line) for name, tree in models.items() for module, _, line in imported_modules(tree)
              if module.startswith("gensbi_sharding.harness.models.")
              and module != "gensbi_sharding.harness.models.common"
              and not name.endswith("__init__.py")]
    assert across == []


def private_patches(tree: ast.Module) -> set[tuple[str, str]]:
    """``(module alias, name)`` of each ``monkeypatch.setattr(module, "_name", ...)`` whose module is one of the
    package's (imported as ``from gensbi_sharding... import module``) or a ``"gensbi_sharding..._name"`` target."""
    ours = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("gensbi_sharding") for alias in node.names}
    ours |= {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names if alias.name.startswith("gensbi_sharding")}
    found = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("setattr", "patch", "object") and node.args):
            continue
        first, second = node.args[0], node.args[1] if len(node.args) > 1 else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith(
                "gensbi_sharding") and first.value.rpartition(".")[2].startswith("_"):
            found.add(tuple(first.value.rsplit(".", 1)))
        elif isinstance(first, ast.Name) and first.id in ours and isinstance(second, ast.Constant) \
                and isinstance(second.value, str) and second.value.startswith("_") \
                and not second.value.startswith("__"):
            found.add((first.id, second.value))
    return found


#: Tests that patch a private name of the package (issue 11: "no test spies on private functions"): none since
#: TYPES72 made the four this round's audit found public (own_observation.draw_posterior,
#: cpu_count.accelerators_installed, summary.record_end/clear_end). Nothing joins them.
KNOWN_PRIVATE_PATCHES: set[tuple[str, str, str]] = set()


@pytest.mark.slow  # parses every test file: ~5-15 s on 2 cores (its detector: test_private_patches_are_found)
def test_no_new_test_patches_a_private_name_of_the_package():
    found = {(path.name, *patch) for path in sorted((ROOT / "tests").glob("test_*.py"))
             for patch in private_patches(ast.parse(path.read_text(), filename=str(path)))}
    assert found <= KNOWN_PRIVATE_PATCHES, sorted(found - KNOWN_PRIVATE_PATCHES)


def test_private_patches_are_found():
    code = ("from gensbi_sharding.harness import cpu_count\nimport os\n"
            "def test(monkeypatch):\n"
            "    monkeypatch.setattr(cpu_count, '_probe', None)\n"
            "    monkeypatch.setattr(cpu_count, 'public', None)\n"
            "    monkeypatch.setattr(os, '_hidden', None)\n"
            "    monkeypatch.setattr('gensbi_sharding.harness.summary._END', [])\n")
    assert private_patches(ast.parse(code)) == {("cpu_count", "_probe"), ("gensbi_sharding.harness.summary", "_END")}


#: The default option of each group whose file restates schema defaults (conf/config.yaml's defaults list), and
#: the models' files that restate them as GenSBI's settings. conf/data/two_moons.yaml is left out: it sets
#: batch_size 1024 and theta_transform none where DataConfig (name two_moons) says 256 and support, the other
#: tasks' values (the fix is the lead's to choose: AUDIT72.findings.md).
RESTATING = {"train/default": "TrainConfig", "eval/default": "EvalConfig", "mesh/dict": "MeshConfig",
             "distributed/none": "DistributedConfig", "activation/rule": "ActivationConfig",
             "model/flux1": "Flux1Config", "model/simformer": "SimformerConfig", "model/mlp": "MLPConfig",
             "model/transformer": "TransformerConfig"}


@pytest.mark.parametrize("option", sorted(RESTATING))
def test_a_default_said_again_in_a_conf_file_is_the_schema_s(option):
    # Defaults live in the schema (harness/config.py); a file that says one again must not say another value, or
    # the schema's default (read by schema_default for advice, by Python users of the dataclasses) is not the run's.
    import yaml

    from gensbi_sharding.harness import config

    schema = getattr(config, RESTATING[option])
    defaults = {f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(schema)}
    said = yaml.safe_load((ROOT / "conf" / f"{option}.yaml").read_text()) or {}
    said.pop("defaults", None)
    assert set(said) <= set(defaults)
    assert {k: v for k, v in said.items() if v != defaults[k]} == {}


def test_one_number_check_with_and_without_the_finite_test():
    # fitting_values and memory_check each wrote their own (int | float, not bool, inf allowed): units.is_number's
    from gensbi_sharding.harness.units import is_number

    assert [is_number(v) for v in (1, 2.5, float("inf"), float("nan"), True, "1", None)] == [True, True] + [False] * 5
    assert [is_number(v, finite=False) for v in (1, 2.5, float("inf"), float("nan"), True, "1")] == [True] * 4 + [
        False] * 2
    found = {name for name, tree in harness_trees().items() for n in ast.walk(tree)
             if isinstance(n, ast.FunctionDef) and n.name in ("is_number", "_is_number")}
    assert found == {"gensbi_sharding/harness/units.py"}


def runtime_edges(tree: ast.Module, modules: set[str]) -> set[str]:
    """The package modules ``tree`` imports at run time, inside functions too (not under ``if TYPE_CHECKING``)."""
    typing_only = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.dump(node.test) for sub in ast.walk(node)}
    out = set()
    for module, names, _ in (item for node in ast.walk(tree) if id(node) not in typing_only
                             for item in imported_modules(ast.Module(body=[node], type_ignores=[]))
                             if isinstance(node, (ast.Import, ast.ImportFrom))):
        if module.startswith("gensbi_sharding"):
            out |= {f"{module}.{n}" if f"{module}.{n}" in modules else module for n in names or [None]}
    return out & modules


def cyclic_parts(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of ``graph`` with more than one node (Kosaraju, iterative)."""
    order, seen = [], set()
    for start in sorted(graph):
        stack = [(start, iter(sorted(graph[start])))] if start not in seen else []
        seen.add(start)
        while stack:
            node, children = stack[-1]
            nxt = next((c for c in children if c not in seen), None)
            if nxt is None:
                order.append(stack.pop()[0])
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(graph[nxt]))))
    reverse = {n: {m for m in graph if n in graph[m]} for n in graph}
    parts, placed = [], set()
    for start in reversed(order):
        if start in placed:
            continue
        part, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node not in placed:
                placed.add(node)
                part.add(node)
                todo += [m for m in reverse[node] if m not in placed]
        if len(part) > 1:
            parts.append(part)
    return parts


#: Harness modules in an import cycle once imports inside functions count (the lazy imports that break a cycle at
#: import time: "it imports this module"). Session 72 counted 84 (one part of 77, through registry's lazy import of
#: harness.models, and one of 7); session 73 moved shared helpers down (processes, check_crash, sweep_stop, job_check,
#: run_record) to 49 in eight parts; session 74 to 25 (CYCLE74.findings.md: factories, model_sections, loss_windows,
#: resume_refusal, model_switch), then to none (CYCLE74B.findings.md: mesh_sizes, checkout_folders, group_values,
#: stopped_step, not_started, job_values, failed_weights, sweep_rerun, console_filter). Issue 11 asks for none: a
#: new cycle fails here; move the shared helper down (or the caller up) rather than importing inside a function.
CYCLIC_MODULES_AT_MOST = 0


@pytest.mark.slow  # walks every module's tree: ~5-15 s on 2 cores (its detector: test_cyclic_parts_finds_them)
def test_function_level_import_cycles_in_the_harness_do_not_grow():
    modules = {("gensbi_sharding." + name.removeprefix("gensbi_sharding/").removesuffix(".py").replace("/", "."))
               .removesuffix(".__init__") for name in trees() if name.startswith("gensbi_sharding/")}
    graph = {m: set() for m in modules}
    for name, tree in trees().items():
        if name.startswith("gensbi_sharding/"):
            module = ("gensbi_sharding." + name.removeprefix("gensbi_sharding/").removesuffix(".py")
                      .replace("/", ".")).removesuffix(".__init__")
            graph[module] = runtime_edges(tree, modules)
    parts = cyclic_parts(graph)
    assert all(m.startswith("gensbi_sharding.harness") for part in parts for m in part)  # the library has none
    assert sum(map(len, parts)) <= CYCLIC_MODULES_AT_MOST, sorted(map(len, parts))


def test_cyclic_parts_finds_them():
    parts = cyclic_parts({"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"e"}, "e": {"d"}})
    assert sorted(map(sorted, parts)) == [["a", "b"], ["d", "e"]]
    assert cyclic_parts({"a": {"b"}, "b": set()}) == []
