"""Models written with today's Flax NNX idioms (flax 0.12), through the library's workflow on 8 CPU devices."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding import checkpoint


def _values(node):
    """``{"a/b": numpy value}`` of every state leaf of ``node`` (typed keys as their data)."""
    out = {}
    for path, value in nnx.to_flat_state(nnx.state(node)):
        for sub, leaf in jax.tree_util.tree_leaves_with_path(value.get_value()):
            if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
                leaf = jax.random.key_data(leaf)
            out["/".join(map(str, path)) + jax.tree_util.keystr(sub)] = np.asarray(leaf)
    return out


def _assert_same(a, b):
    va, vb = _values(a), _values(b)
    assert va.keys() == vb.keys()
    for key in va:
        assert va[key].dtype == vb[key].dtype and va[key].shape == vb[key].shape, key
        np.testing.assert_array_equal(va[key], vb[key], err_msg=key)


class RefAndHijax(nnx.Module):
    """A mutable-array variable (``ref=True``) and a hijax one beside a plain one, each annotated."""

    def __init__(self, kind, rngs):
        self.w = nnx.Param(jax.random.normal(rngs.params(), (16, 8)), **{kind: True}, **gs.axes("embed", "mlp"))
        self.b = nnx.Param(jnp.arange(8.0), **gs.axes("mlp"))


@pytest.mark.parametrize("kind", ["ref", "hijax"])
@pytest.mark.parametrize("how", ["shard_model", "init_sharded"])
def test_ref_and_hijax_variables_are_placed_built_and_keep_their_kind(tmp_path, kind, how):
    # Was: shard_model on a ref=True variable raised JAX's "Received incompatible devices for jitted computation" (it
    # wrote the placed array into the reference, on its one device), and init_sharded / abstract_sharded raised "mutable
    # array references cannot be returned" (ref) or "'aval_method' object is not callable" (hijax).
    mesh = gs.make_mesh(model_axis=2)
    expected = RefAndHijax(kind, nnx.Rngs(0))
    if how == "shard_model":
        model = RefAndHijax(kind, nnx.Rngs(0))
        gs.shard_model_by_table(model, mesh, dict(gs.RULES["tensor"]))  # a table: not experimental
    else:
        model = gs.init_sharded(lambda: RefAndHijax(kind, nnx.Rngs(0)), mesh, "tensor", warn=False)
    assert getattr(model.w, kind) and not getattr(model.b, kind)  # still a reference / hijax, as factory() built it
    assert gs.sharding_of(model)["w"].spec == P(None, "model") and gs.sharding_of(model)["b"].spec == P("model")
    _assert_same(model, expected)
    abstract = gs.abstract_sharded(lambda: RefAndHijax(kind, nnx.Rngs(0)), mesh, "tensor", warn=False)
    assert abstract.w.get_value().sharding.spec == P(None, "model")
    target = checkpoint.abstract_state_for(lambda: RefAndHijax(kind, nnx.Rngs(1)), gs.make_mesh(model_axis=4), "tensor")
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, model, jax.random.key(0))
    restored = checkpoint.restore(tmp_path, target).state
    assert restored["w"].get_value().sharding.spec == P(None, "model")
    np.testing.assert_array_equal(np.asarray(restored["w"].get_value()), np.asarray(expected.w[...]))


class MeshAxisNamed(nnx.Module):
    """Annotated as Flax's GSPMD guide does: with the mesh's axis names, not logical ones."""

    def __init__(self, rngs):
        self.dot = nnx.Linear(16, 32, rngs=rngs, kernel_init=nnx.with_partitioning(
            nnx.initializers.lecun_normal(), (None, "model"), eager_sharding=False))
        self.w = nnx.Param(jnp.ones((32, 16)), sharding_names=("model", None), eager_sharding=False)


@pytest.mark.parametrize("rule, onto", [("tensor", "(mlp, heads, vocab)"),
                                        ("fsdp", "(none; rule 'tensor' maps 'mlp' onto it)")])
def test_an_annotation_naming_a_mesh_axis_falls_back_naming_the_logical_axes_that_split_it(rule, onto):
    # Was: "unknown logical axis 'model' ... leave it unsplit: a rule table with {'model': None}", advice that splits
    # nothing; and the table {'model': 'model'} was refused with the same advice.
    with pytest.warns(DeprecationWarning):  # sharding_names: Flax's older key, read alike
        plan = gs.plan_shardings(MeshAxisNamed(nnx.Rngs(0)), gs.make_mesh(model_axis=2), rule)
    reason = (f"'model' is a mesh axis, not a logical axis: a rule maps logical axes onto mesh axes; annotate that "
              f"dimension with a logical axis this rule maps onto 'model' {onto}")
    assert plan.fallbacks == {"dot/kernel": reason, "w": reason, "dot/bias": "no annotation"}
    assert plan.specs["dot/kernel"] == P() and plan.specs["w"] == P()
    with pytest.raises(ValueError, match=r"rule table key 'model' is not a logical axis; .*annotate with one mapped "
                                         r"onto 'model' \(none; rule 'tensor' maps 'mlp' onto it\)"):
        gs.resolve_rule({"model": "model"})


class BareArrays(nnx.Module):
    """Flax 0.12 keeps an array attribute as state without a variable: ``buf``, and one in ``nnx.data``'s dict."""

    def __init__(self, where, rngs):
        self.lin = nnx.Linear(4, 8, rngs=rngs)
        if where == "attribute":
            self.buf = jnp.arange(8.0)
        else:
            self.tree = nnx.data({"n": 3, "buf": jnp.arange(8.0)})


@pytest.mark.parametrize("where, name", [("attribute", "buf"), ("nnx.data dict", "tree/buf")])
@pytest.mark.parametrize("call, caller", [
    (lambda f, mesh: gs.shard_model(f(), mesh, "fsdp"), "plan_shardings"),
    (lambda f, mesh: gs.init_sharded(f, mesh, "fsdp"), r"init_sharded \(what the factory returned\)"),
    (lambda f, mesh: gs.abstract_sharded(f, mesh), r"abstract_sharded \(what the factory returned\)"),
    (lambda f, mesh: gs.sharding_of(f()), "sharding_of"),
    (lambda f, mesh: gs.describe(f(), mesh), "describe"),
    (lambda f, mesh: checkpoint.abstract_state_for(f(), mesh), "abstract_state_for"),
])
def test_an_array_held_in_no_variable_is_named_with_the_fix(where, name, call, caller):
    # Was: shard_model left it on one device, silently, and sharding_of, describe, abstract_state_for, init_sharded
    # and abstract_sharded raised AttributeError: "'ArrayImpl' object has no attribute 'get_value'".
    with pytest.raises(TypeError, match=rf"^{caller}: {name} is an array in no nnx.Variable \(this library places "
                                        r"variables\): hold it in one, nnx.Variable\(value\) or a subclass"):
        call(lambda: BareArrays(where, nnx.Rngs(0)), gs.make_mesh(model_axis=2))
