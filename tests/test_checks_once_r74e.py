"""Work done once per call (r74e).

- ``CheckpointWriter.maybe_save`` looks for a JAX trace once per step: it called ``due`` and ``save``, each looking
  again (three looks on a saving step, two on the others; REVIEW73D #10).
- ``partition_spec_for`` given a rule table as a dict checks its keys and values as ``resolve_rule`` (and
  ``shard_model_by_table``) does: a value naming no mesh axis (an int) was taken until a variable read it, then refused
  in PartitionSpec's words ("PartitionSpec entry 3 names no mesh axis"), naming neither the table entry nor the fix;
  a key no logical axis ({5: 'data'}) was never refused. A mesh axis the mesh lacks, or one named twice, stays a
  fallback (P(), why), as plans warn and test_sharding pins.
In-process, 8 simulated CPU devices (conftest); a tiny Linear.
"""

import jax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding import checkpoint_save
from gensbi_sharding.checkpoint import CheckpointWriter


@pytest.mark.parametrize("step, saved", [(2, True), (3, False)])
def test_maybe_save_looks_for_a_trace_once_per_step(tmp_path, monkeypatch, step, saved):
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: nnx.Linear(4, 2, rngs=nnx.Rngs(0)), mesh, "replicated")
    looked = []
    check = checkpoint_save.refuse_traced
    monkeypatch.setattr(checkpoint_save, "refuse_traced", lambda name, fix: (looked.append(name), check(name, fix)))
    with CheckpointWriter(tmp_path / "checkpoints", every=2, async_save=False) as writer:
        assert writer.maybe_save(step, nnx.state(model), jax.random.key(0)) is saved
        assert looked == ["CheckpointWriter.maybe_save"]
        assert writer.steps() == ([2] if saved else [])


@pytest.mark.parametrize("table, entry", [({"embed": 3}, "{'embed': 3}"), ({"mlp": 3}, "{'mlp': 3}"),
                                          ({5: "data"}, "rule table key 5")])
def test_partition_spec_for_checks_a_dict_table_as_resolve_rule_does(table, entry):
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(ValueError, match="rule table") as refused:
        gs.partition_spec_for(("embed",), (8,), table, mesh)
    assert entry in str(refused.value)
    with pytest.raises(ValueError) as resolved:
        gs.resolve_rule(table)
    assert str(refused.value) == str(resolved.value)


def test_partition_spec_for_a_good_dict_table_is_unchanged():
    mesh = gs.make_mesh(model_axis=2)
    assert gs.partition_spec_for(("embed", "mlp"), (8, 4), {"embed": "data", "mlp": "model"}, mesh) == (
        P("data", "model"), None)
    spec, why = gs.partition_spec_for(("embed",), (8,), {"embed": "tensor"}, mesh)  # absent: replicated, as plans
    assert spec == P() and "absent from the mesh" in why
    spec, why = gs.partition_spec_for(("embed",), (8,), {"embed": ("data", "data")}, mesh)
    assert spec == P() and "maps to mesh axis 'data' twice" in why
