"""docs/library.md's claims a user of the library alone leans on when writing a step of their own (session 73, u)."""

import inspect
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.activations import ACTIVATION_NAMES
from faults_helpers import REPO

LIBRARY = (REPO / "docs" / "library.md").read_text()


def _cell(heading: str) -> str:
    """The text under ``### heading`` in docs/library.md, up to the next heading."""
    return LIBRARY.split(f"### {heading}\n")[1].split("\n#")[0]


def test_batch_helpers_are_shown_with_the_arguments_they_take():
    # Typed from docs/library.md: `check_batch_divisible(batch, mesh)` raised "missing 1 required positional argument:
    # 'what'", and `pad_for_mesh(batch, mesh)` (the name reads as padding a batch) was refused: it takes a row count.
    # The page showed both, shard_sample_init and replicate by name alone.
    head = _cell("shard_batch, shard_sample_init, replicate, pad_for_mesh, check_batch_divisible, nearest_batch_sizes")
    for name in ("shard_batch", "shard_sample_init", "replicate", "pad_for_mesh", "check_batch_divisible",
                 "nearest_batch_sizes"):
        shown = re.search(rf"`{name}\(([^)]*)\)", head)
        assert shown, f"{name} shown without its arguments"
        params = [p.name + ("=None" if p.default is None else "") for p in inspect.signature(getattr(gs, name)).parameters.values()]
        assert [a.strip() for a in shown[1].split(",")] == params, name
    mesh = gs.make_mesh(model_axis=2)
    assert gs.pad_for_mesh(13, mesh) == (16, 13) and "`pad_for_mesh(13, mesh)` is `(16, 13)`" in head


def test_constrain_names_every_activation_name_it_takes_and_the_mesh_it_needs():
    # Writing an attention step: the page said `constrain(x, names, partition_axis)` and never which names; a
    # rule's logical axes ("embed", "heads") were the guess, and only "heads" is one. Traced without an active mesh
    # it constrained nothing (warned), which the page did not say.
    cell = _cell("PartitionAxis.for_rule, constrain")
    assert [name for name in ACTIVATION_NAMES if f'`"{name}"`' not in cell] == []
    assert "mesh_context(mesh)" in cell and "mesh=mesh" in cell
    with pytest.raises(ValueError, match="unknown activation name 'embed'"):
        gs.constrain(jnp.ones((8, 4)), ("batch", "embed"), gs.PartitionAxis(), mesh=gs.make_mesh())


def test_compiled_report_keys_are_the_ones_the_page_names():
    # The page said "per-device memory ... and the collectives": a user printing the result met a dict whose keys
    # they had to discover by printing it.
    cell = _cell("compiled_report")
    report = gs.compiled_report(jax.jit(lambda x: x * 2).lower(jnp.ones(8)).compile())
    assert [key for key in report if f'`"{key}"`' not in cell] == []
    assert [key for key in report["memory"] if f"`{key}`" not in cell] == []
    assert {"all-reduce", "all-gather", "reduce-scatter"} <= set(report["collectives"])
    assert all(f"`{op}`" in cell for op in ("all-reduce", "all-gather", "reduce-scatter"))


def test_sharding_of_one_layout_printed_two_ways_compares_by_is_equivalent_to():
    # Checking placements with sharding_of after a few steps: the embedding's P('model', None) came back
    # P('model',) from the jitted step, and `==` between them is False. The page now says so and names the compare.
    assert "is_equivalent_to" in _cell("sharding_of, describe, mesh_init_simulate")

    class Emb(nnx.Module):
        def __init__(self, rngs):
            self.table = nnx.Param(jnp.ones((8, 4)), **gs.axes("vocab", "embed"))

    mesh = gs.make_mesh(model_axis=2)
    model = Emb(nnx.Rngs(0))
    with pytest.warns(gs.ExperimentalRuleWarning):
        gs.shard_model(model, mesh, "tensor")
    placed = gs.sharding_of(model)["table"]
    stepped = nnx.jit(lambda m: m.table[...] * 1.0)(model).sharding
    assert placed.spec == jax.sharding.PartitionSpec("model", None)
    assert placed.is_equivalent_to(stepped, 2)


@pytest.mark.slow
def test_library_md_activations_example_runs_as_printed(tmp_path):
    # The new section's script, copied into a file and run in a fresh interpreter: its last comment is its output.
    block = next(b for b in re.findall(r"```python\n(.*?)```", LIBRARY, re.S) if "class Attention(nnx.Module)" in b)
    printed = block.rstrip().splitlines()[-1].removeprefix("# ")
    (tmp_path / "step.py").write_text(block)
    proc = subprocess.run([sys.executable, "step.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == printed
    assert "ShardingFallbackWarning" not in proc.stderr


@pytest.mark.slow  # ~1.3 s: Orbax's first save
def test_a_writer_built_without_every_saves_nothing_in_maybe_save_as_the_page_says(tmp_path):
    # Typed: `with CheckpointWriter(dir) as writer:` and `writer.maybe_save(step, ...)` each step: 50 steps, no
    # checkpoint, no word (every defaults to 0). The page showed every=N only; it now says what 0 does.
    from gensbi_sharding.checkpoint import CheckpointWriter

    cell = _cell("The checkpoint module: CheckpointWriter, maybe_save, save, restore")
    assert "`every` defaults to 0, and `maybe_save` of a writer built without it saves nothing" in cell
    state = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    with CheckpointWriter(tmp_path / "ckpt", async_save=False) as writer:
        assert [writer.maybe_save(step, state, jax.random.key(step)) for step in (1, 10, 20)] == [False] * 3
        assert writer.steps() == []
        with pytest.raises(TypeError, match=r"jax.random.wrap_key_data\(key\)"):
            writer.save(1, state, jax.random.PRNGKey(0))


def test_the_page_says_which_functions_default_rule_to_replicated():
    # Typed `abstract_state_for(factory, mesh2)` for a restore target, the rule forgotten: every array came back
    # whole on every device, no warning (the default). The page showed `rule` as if required.
    from gensbi_sharding.checkpoint import abstract_state_for

    cell = _cell("init_sharded, abstract_sharded, init_optimizer_sharded")
    for f in (gs.init_sharded, gs.abstract_sharded, gs.init_optimizer_sharded, gs.shard_model, gs.plan_shardings,
              abstract_state_for):
        assert inspect.signature(f).parameters["rule"].default == "replicated", f.__name__
        assert f"`{f.__name__}" in cell, f.__name__
    assert '`rule` defaults to `"replicated"`' in cell
