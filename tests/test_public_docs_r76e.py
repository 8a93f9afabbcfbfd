"""The public docstrings against the developers' standard: what a function returns, and every error a user meets.

(a) Every public function or method whose own body returns a value has a numpy ``Returns`` (or ``Yields``) section.
(b) Each bad call below, as a library user would make it, raises the exception type listed, and that type is named in
    the ``Raises`` section of the function called, so a new error path cannot go undocumented. The table came from
    trying each public function with a wrong type, a mesh without the axis, an indivisible size, a non-array leaf...
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding import checkpoint
from test_docstrings import _ClassInit, _public_callables, _section  # the numpy sections as test_docstrings reads them


def _public_functions():
    """test_docstrings' public functions and methods, without its classes checked by their ``__init__``."""
    return ((name, fn) for name, fn in _public_callables() if not isinstance(fn, _ClassInit))


def _returns_a_value(fn) -> bool:
    """Whether ``fn``'s own body (not a nested function's) has ``return <value>`` (``return None`` is no value)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False


RETURNING = sorted((n, f) for n, f in _public_functions() if _returns_a_value(f))


def test_the_returning_functions_are_found():
    names = {n for n, _ in RETURNING}
    assert len(RETURNING) > 40
    assert {"gensbi_sharding.shard_batch", "gensbi_sharding.describe", "gensbi_sharding.PartitionAxis.for_rule",
            "gensbi_sharding.checkpoint.CheckpointWriter.latest"} <= names
    assert "gensbi_sharding.shard_model" not in names  # places in place, returns None


@pytest.mark.parametrize("name,fn", RETURNING, ids=[n for n, _ in RETURNING])
def test_a_function_returning_a_value_has_a_returns_section(name, fn):
    doc = inspect.getdoc(fn)
    section = _section(doc, "Returns") or _section(doc, "Yields")
    assert section is not None and section.strip(), f"{name} returns a value but has no numpy 'Returns' section"


class Block(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(4, 8, rngs=rngs, kernel_init=gs.partitioned(nnx.initializers.lecun_normal(),
                                                                           ("embed", "mlp")))


class Other(nnx.Module):
    def __init__(self, rngs):
        self.down = nnx.Linear(8, 2, rngs=rngs)


@pytest.fixture(scope="module")
def mesh(devices):
    return gs.make_mesh(model_axis=2)


@pytest.fixture(scope="module")
def devices():
    return jax.devices()


def _enter(context):
    with context:
        pass


def _writer_due(tmp_path, step):
    with checkpoint.CheckpointWriter(tmp_path / "checkpoints") as writer:
        writer.due(step)


def _in_jit(fn):
    jax.jit(lambda x: (fn(x), x)[1])(jnp.ones(3))


MISSING = "/nonexistent/gensbi_sharding_r76e/run"
# (documented function, bad call (mesh, tmp_path) -> anything, exception type it raises); the calls a user makes.
BAD_CALLS = [
    ("shard_batch", lambda m, t: gs.shard_batch(np.ones((7, 3)), m), ValueError),  # 7 rows, data-parallel size 4
    ("shard_batch", lambda m, t: gs.shard_batch(np.ones((8, 3)), "mesh"), TypeError),
    ("shard_batch", lambda m, t: gs.shard_batch({"a": np.ones(8), "b": np.ones(16)}, m), ValueError),
    ("shard_batch", lambda m, t: gs.shard_batch(Block(nnx.Rngs(0)), m), TypeError),
    ("shard_batch", lambda m, t: gs.shard_batch({"s": np.array(["a"] * 8)}, m), TypeError),  # no JAX dtype
    ("shard_sample_init", lambda m, t: gs.shard_sample_init(np.ones((7, 3)), m), ValueError),
    ("shard_sample_init", lambda m, t: gs.shard_sample_init(np.ones((8, 3)), 3), TypeError),
    ("replicate", lambda m, t: gs.replicate(np.ones(3), "mesh"), TypeError),
    ("replicate", lambda m, t: gs.replicate(Block(nnx.Rngs(0)), m), TypeError),
    ("batch_axes", lambda m, t: gs.batch_axes(None), TypeError),
    ("batch_size_divisor", lambda m, t: gs.batch_size_divisor("mesh"), TypeError),
    ("check_batch_divisible", lambda m, t: gs.check_batch_divisible(np.ones(7), m, "train"), ValueError),
    ("check_batch_divisible", lambda m, t: gs.check_batch_divisible(np.ones(8), "mesh", "train"), TypeError),
    ("pad_for_mesh", lambda m, t: gs.pad_for_mesh(-1, m), ValueError),
    ("pad_for_mesh", lambda m, t: gs.pad_for_mesh(7, "mesh"), TypeError),
    ("nearest_batch_sizes", lambda m, t: gs.nearest_batch_sizes(7, 0), ValueError),
    ("nearest_batch_sizes", lambda m, t: gs.nearest_batch_sizes("7", 4), TypeError),
    ("input_partition_spec", lambda m, t: gs.input_partition_spec("mesh"), TypeError),
    ("host_to_global_array", lambda m, t: gs.host_to_global_array(np.ones((8, 3))), ValueError),  # no mesh active
    ("host_to_global_array", lambda m, t: gs.host_to_global_array(np.ones((8, 3)), mesh=m, check_processes="no"),
     TypeError),
    ("make_mesh", lambda m, t: gs.make_mesh(model_axis=3), ValueError),  # 8 devices
    ("make_mesh", lambda m, t: gs.make_mesh("cpu"), TypeError),
    ("resolve_mesh", lambda m, t: gs.resolve_mesh("nope"), ValueError),
    ("resolve_mesh", lambda m, t: gs.resolve_mesh({"data": 4, "model": 2}), ValueError),
    ("mesh_context", lambda m, t: _enter(gs.mesh_context("mesh")), TypeError),
    ("check_model_groups_local", lambda m, t: gs.check_model_groups_local("mesh"), TypeError),
    ("resolve_rule", lambda m, t: gs.resolve_rule("nope"), ValueError),
    ("resolve_rule", lambda m, t: gs.resolve_rule({"nope": "data"}), ValueError),
    ("partition_spec_for", lambda m, t: gs.partition_spec_for(("embed", "mlp"), (8, 8), "tensor", "mesh"), TypeError),
    ("partition_spec_for", lambda m, t: gs.partition_spec_for(("embed", "mlp"), (8, 8), "nope", m), ValueError),
    ("partitioned", lambda m, t: gs.partitioned(3, ("embed",)), TypeError),
    ("logical_axes_of", lambda m, t: gs.logical_axes_of(np.ones(3)), TypeError),
    ("plan_shardings", lambda m, t: gs.plan_shardings(Block(nnx.Rngs(0)), "mesh"), TypeError),
    ("plan_shardings", lambda m, t: gs.plan_shardings(Block(nnx.Rngs(0)), m, "nope"), ValueError),
    ("plan_shardings", lambda m, t: gs.plan_shardings(3, m), TypeError),
    ("place", lambda m, t: gs.place(Block(nnx.Rngs(0)), "plan"), TypeError),
    ("place", lambda m, t: gs.place(Block(nnx.Rngs(0)), gs.plan_shardings(Other(nnx.Rngs(0)), m)), ValueError),
    ("shard_model", lambda m, t: gs.shard_model(Block(nnx.Rngs(0)), "mesh"), TypeError),
    ("shard_model", lambda m, t: gs.shard_model(Block(nnx.Rngs(0)), m, "nope"), ValueError),
    ("shard_model", lambda m, t: gs.shard_model(3, m), TypeError),
    ("shard_model_by_table", lambda m, t: gs.shard_model_by_table(Block(nnx.Rngs(0)), m, {"embed": 3}), ValueError),
    ("shard_model_by_table", lambda m, t: gs.shard_model_by_table(3, m, {}), TypeError),
    ("init_sharded", lambda m, t: gs.init_sharded(3, m), ValueError),
    ("init_sharded", lambda m, t: gs.init_sharded(lambda: 3, m), TypeError),
    ("init_sharded", lambda m, t: gs.init_sharded(lambda: Block(nnx.Rngs(0)), m, "nope"), ValueError),
    ("abstract_sharded", lambda m, t: gs.abstract_sharded(lambda: 3, m), TypeError),
    ("abstract_sharded", lambda m, t: gs.abstract_sharded(lambda: Block(nnx.Rngs(0)), "mesh"), TypeError),
    ("abstract_sharded", lambda m, t: gs.abstract_sharded(lambda: Block(nnx.Rngs(0)), m, "nope"), ValueError),
    ("init_optimizer_sharded", lambda m, t: gs.init_optimizer_sharded(3, optax.adam(1e-3)), TypeError),
    ("init_optimizer_sharded", lambda m, t: gs.init_optimizer_sharded(Block(nnx.Rngs(0)), 3), TypeError),
    ("init_optimizer_sharded", lambda m, t: gs.init_optimizer_sharded(Block(nnx.Rngs(0)), optax.adam(1e-3), "nope"),
     ValueError),
    ("describe", lambda m, t: gs.describe(3, m), TypeError),
    ("describe", lambda m, t: gs.describe(Block(nnx.Rngs(0)), m, top=-1), ValueError),
    ("bytes_per_device", lambda m, t: _in_jit(gs.bytes_per_device), TypeError),  # a traced leaf
    ("partition_specs", lambda m, t: gs.partition_specs(np.ones(3)), TypeError),
    ("sharding_of", lambda m, t: gs.sharding_of(3), TypeError),
    ("mesh_init_simulate", lambda m, t: gs.mesh_init_simulate(0, np.ones((5, 4)), 0, 1), ValueError),
    ("compiled_report", lambda m, t: gs.compiled_report(3), ValueError),
    ("constrain", lambda m, t: gs.constrain(np.ones((8, 4)), ("batch", None), "mesh"), TypeError),
    ("constrain", lambda m, t: gs.constrain(np.ones((8, 4)), ("batch",), gs.PartitionAxis(), m), ValueError),
    ("PartitionAxis.for_rule", lambda m, t: gs.PartitionAxis.for_rule("nope", m), ValueError),
    ("PartitionAxis.for_rule", lambda m, t: gs.PartitionAxis.for_rule("tensor", "mesh"), TypeError),
    ("PartitionAxis.resolve", lambda m, t: gs.PartitionAxis(batch_axis="dp").resolve(m), ValueError),
    ("PartitionAxis.resolve", lambda m, t: gs.PartitionAxis().resolve("mesh"), TypeError),
    ("Plan.sharding", lambda m, t: gs.plan_shardings(Block(nnx.Rngs(0)), m).sharding("up/kernal"), KeyError),
    ("Plan.fallback_message", lambda m, t: gs.plan_shardings(Block(nnx.Rngs(0)), m).fallback_message(-1),
     ValueError),
    ("Plan.abstract_state", lambda m, t: gs.plan_shardings(Block(nnx.Rngs(0)), m).abstract_state(3), TypeError),
    ("checkpoint.abstract_state_for", lambda m, t: checkpoint.abstract_state_for(3, m), TypeError),
    ("checkpoint.abstract_state_for", lambda m, t: checkpoint.abstract_state_for(Block(nnx.Rngs(0)), m, "nope"),
     ValueError),
    ("checkpoint.find_checkpoint", lambda m, t: checkpoint.find_checkpoint(MISSING), FileNotFoundError),
    ("checkpoint.find_checkpoint", lambda m, t: checkpoint.find_checkpoint(3), TypeError),
    ("checkpoint.committed_steps", lambda m, t: checkpoint.committed_steps(3), TypeError),
    ("checkpoint.committed_steps", lambda m, t: checkpoint.committed_steps(""), ValueError),
    ("checkpoint.saved_config", lambda m, t: checkpoint.saved_config(MISSING), FileNotFoundError),
    ("checkpoint.saved_config", lambda m, t: checkpoint.saved_config(3), TypeError),
    ("checkpoint.saved_info", lambda m, t: checkpoint.saved_info(MISSING), FileNotFoundError),
    ("checkpoint.step_damage", lambda m, t: checkpoint.step_damage(3), TypeError),
    ("checkpoint.restore", lambda m, t: checkpoint.restore(MISSING, nnx.state(Block(nnx.Rngs(0)))),
     FileNotFoundError),
    ("checkpoint.restore", lambda m, t: checkpoint.restore(3, nnx.state(Block(nnx.Rngs(0)))), TypeError),
    ("checkpoint.CheckpointWriter", lambda m, t: checkpoint.CheckpointWriter(3), TypeError),
    ("checkpoint.CheckpointWriter", lambda m, t: checkpoint.CheckpointWriter(t / "c", every=-1), ValueError),
    ("checkpoint.CheckpointWriter.due", lambda m, t: _writer_due(t, -1), ValueError),
]


def _documented(target: str):
    """The object ``target`` names: ``"shard_batch"`` in ``gensbi_sharding``, ``"checkpoint.restore"`` there."""
    obj = gs
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_public_function_is_tried():
    tried = {target.split(".")[-1] if target.startswith("checkpoint.") else target.split(".")[0]
             for target, _, _ in BAD_CALLS}
    functions = {name for name in gs.__all__ if inspect.isfunction(getattr(gs, name))}
    functions |= {name for name in checkpoint.__all__ if inspect.isfunction(getattr(checkpoint, name))}
    assert functions - tried == set(NEVER_RAISING)


# Public functions no bad input makes raise, and why (their docstrings say what happens instead).
NEVER_RAISING = {"axes": "any entry is kept: a plan replicates the variable and names it in the fallback warning"}


def test_axes_keeps_a_bad_entry_for_the_plan_to_warn_about(mesh):
    class Odd(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.ones((8, 8)), **gs.axes("embed", 3))

    assert gs.axes("embed", 3) == {"out_sharding": ("embed", 3), "eager_sharding": False}
    plan = gs.plan_shardings(Odd(), mesh, "tensor")
    assert plan.specs == {"w": jax.sharding.PartitionSpec()}
    assert "annotation entry 3 (int) is no logical axis name" in plan.fallbacks["w"]


@pytest.mark.parametrize("target,call,error", BAD_CALLS,
                         ids=[f"{target}-{i}" for i, (target, _, _) in enumerate(BAD_CALLS)])
def test_a_bad_call_raises_a_documented_type(target, call, error, mesh, tmp_path):
    with pytest.raises(Exception) as raised:
        call(mesh, tmp_path)
    assert type(raised.value) is error, f"{target}: {type(raised.value).__name__}: {raised.value}"
    section = _section(inspect.getdoc(_documented(target)), "Raises")
    assert section is not None and error.__name__ in section, (
        f"{target} raises {error.__name__} ({raised.value}) but its Raises section does not list it: {section!r}")


def test_step_damage_names_a_bad_argument_and_the_fix():
    """Was pathlib's "argument should be a str or an os.PathLike object ..., not 'int'", naming neither."""
    with pytest.raises(TypeError, match=r"step_dir=3: pass a str or os.PathLike, e.g. step_dir='checkpoints/8'"):
        checkpoint.step_damage(3)
