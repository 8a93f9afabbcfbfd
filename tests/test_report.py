"""describe / mesh_init_simulate on hand-checkable models; compiled_report on real train steps."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from gensbi_sharding import abstract_sharded, compiled_report
from gensbi_sharding.compiled import collectives_in_hlo, hlo_shape_bytes
from gensbi_sharding.harness.models.mlp import make_mlp
from gensbi_sharding.harness.train import make_step_functions
from gensbi_sharding import init_optimizer_sharded, init_sharded
from gensbi_sharding import describe, mesh_init_simulate
from gensbi_sharding import (ExperimentalRuleWarning, ShardingFallbackWarning, axes, make_mesh,
                                      mesh_context, shard_batch, shard_model)


def splittable(rngs):
    """Linear(4, 16) annotated ("in", "embed"): every array splits under fsdp on 8 devices."""
    return nnx.Linear(4, 16, rngs=rngs, kernel_metadata=axes("in", "embed"), bias_metadata=axes("embed"))


class WithBareParams(nnx.Module):
    def __init__(self, rngs):
        self.layer = splittable(rngs)
        self.big = nnx.Param(jnp.zeros((10, 10)))
        self.small = nnx.Param(jnp.zeros((3,)))


def placed(node, mesh, rule):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (ExperimentalRuleWarning, ShardingFallbackWarning))
        shard_model(node, mesh, rule)
    return node


def test_linear_counts_leaves_scalars_and_bytes():
    report = describe(nnx.Linear(4, 3, rngs=nnx.Rngs(0)), None)
    assert (report.n_leaves, report.n_scalars, report.total_bytes) == (2, 15, 60)
    assert report.mesh is None and report.largest_replicated == ()
    assert sum(report.bytes_per_device.values()) == 60  # one device holds it all
    assert {v.path: v.shape for v in report.variables} == {"bias": (3,), "kernel": (4, 3)}


def test_scalar_variables_are_left_out_and_sizes_read_in_units():
    # Branches no test ran: a variable holding a Python number is no array (not a leaf of the report), and a
    # size of 1,000 B or more reads in KB.
    class WithCount(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.zeros((1000,)))
            self.count = nnx.Variable(3)

    report = describe(WithCount(), None)
    assert (report.n_leaves, report.total_bytes, [v.path for v in report.variables]) == (1, 4000, ["w"])
    assert "state: 1 leaves, 1,000 scalars, 4.0 KB; per device max 4.0 KB" in str(report)


def test_fsdp_bytes_per_device_are_total_over_data_size():
    mesh = make_mesh(model_axis=1)
    report = describe(placed(splittable(nnx.Rngs(0)), mesh, "fsdp"), mesh)
    assert (report.n_leaves, report.n_scalars, report.total_bytes) == (2, 80, 320)
    assert report.bytes_per_device == {d.id: 40 for d in jax.devices()}  # 320 / 8
    assert report.max_bytes_per_device == 40
    assert report.placements == {"bias": "P('data')", "kernel": "P(None, 'data')"}
    assert report.largest_replicated == ()


def test_abstract_model_is_described_from_its_shardings():
    mesh = make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        concrete = describe(init_sharded(lambda: splittable(nnx.Rngs(0)), mesh, "fsdp"), mesh)
        abstract = describe(abstract_sharded(lambda: splittable(nnx.Rngs(0)), mesh, "fsdp"), mesh)
    assert abstract.bytes_per_device == concrete.bytes_per_device == {d.id: 80 for d in jax.devices()}
    assert abstract.placements == concrete.placements
    assert (abstract.n_leaves, abstract.n_scalars, abstract.total_bytes) == (2, 80, 320)


def test_largest_replicated_names_unannotated_params():
    mesh = make_mesh(model_axis=1)
    report = describe(placed(WithBareParams(nnx.Rngs(0)), mesh, "fsdp"), mesh, top=1)
    assert report.largest_replicated == (("big", 400),)
    assert describe(placed(WithBareParams(nnx.Rngs(0)), mesh, "fsdp"), mesh).largest_replicated == \
        (("big", 400), ("small", 12))
    # Nothing is split under "replicated": no rule is missing an annotation.
    assert describe(placed(WithBareParams(nnx.Rngs(0)), mesh, "replicated"), mesh).largest_replicated == ()


def test_mesh_summary_and_table():
    mesh = make_mesh(model_axis=2)
    report = describe(placed(splittable(nnx.Rngs(0)), mesh, "fsdp"), mesh)
    summary = report.mesh
    assert summary.axis_names == ("data", "model") and summary.axis_sizes == {"data": 4, "model": 2}
    assert (summary.n_devices, summary.devices_per_process, summary.n_processes) == (8, 8, 1)
    assert summary.data_parallel_size == 4
    text = str(report)
    assert "mesh data=4 x model=2: 8 devices, 8 per process" in text
    assert "2 leaves, 80 scalars, 320 B" in text
    assert "kernel" in text and "P(None, 'data')" in text and "80 B" in text


def test_describe_rejects_negative_top():
    with pytest.raises(ValueError, match="top must be a non-negative integer, got -1"):
        describe(nnx.Linear(2, 2, rngs=nnx.Rngs(0)), None, top=-1)


def test_mesh_init_simulate_example():
    out = mesh_init_simulate(0, jnp.ones((5, 4)), 3, 4)
    assert out.shape == (3,) and out.dtype == jnp.float32
    np.testing.assert_array_equal(out, [3.0, 4.0, 2.0])
    # mesh_axes is reported as given, even when it matches no device count; ints are cast.
    np.testing.assert_array_equal(mesh_init_simulate(np.int64(7), np.ones((2, 6)), 5.0, 3), [5.0, 3.0, 2.0])


@pytest.mark.parametrize("args, match", [((0, jnp.float32(1.0), 3, 4), "at least one axis"),
                                         ((0, jnp.ones((5, 4)), 0, 4), "features must be a positive"),
                                         (("a", jnp.ones((5, 4)), 3, 4), "seed must be castable")])
def test_mesh_init_simulate_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        mesh_init_simulate(*args)


def test_hlo_shapes_and_collectives_are_parsed():
    assert hlo_shape_bytes("f32[8,16]{1,0}") == 512
    assert hlo_shape_bytes("(bf16[4]{0}, pred[3]{0}, s4[3]{0}, token[])") == 8 + 3 + 2
    # Bytes are those one device sends (assertions changed with the count from result bytes, 256/256/16, when the
    # review found them adding unlike numbers): a group of 4 here, of the header's 8 where XLA names none.
    text = "\n".join([
        "HloModule jit_f, entry_computation_layout={()->f32[]}, num_partitions=8",
        "  %all-reduce.1 = f32[16,4]{1,0} all-reduce(f32[16,4]{1,0} %p), channel_id=1, "
        "replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=%add",
        "  %ags = (f32[2,4]{1,0}, f32[16,4]{1,0}) all-gather-start(f32[2,4]{1,0} %q), replica_groups=[2,4]<=[8], "
        "dimensions={0}",
        "  %agd = f32[16,4]{1,0} all-gather-done((f32[2,4]{1,0}, f32[16,4]{1,0}) %ags)",
        "  ROOT %t = (f32[2]{0}, f32[2]{0}) all-to-all(f32[2]{0} %a, f32[2]{0} %b), dimensions={0}",
        "  %add.3 = f32[16,4]{1,0} add(f32[16,4]{1,0} %all-reduce.1, f32[16,4]{1,0} %agd)",
    ])
    found = collectives_in_hlo(text)
    assert found["all-reduce"] == {"count": 1, "bytes": 2 * 3 * 256 // 4}
    assert found["all-gather"] == {"count": 1, "bytes": 3 * 256 // 4}
    assert found["all-to-all"] == {"count": 1, "bytes": 7 * 16 // 8}
    assert found["reduce-scatter"] == found["collective-permute"] == {"count": 0, "bytes": 0}


def test_ragged_and_broadcast_collectives_and_dynamic_shapes_are_counted():
    # Was: ragged-all-to-all (MoE token routing, as jax.lax.ragged_all_to_all lowers) and collective-broadcast were
    # not counted, and a bounded dynamic shape (f32[<=8]) counted 0 bytes: now at its bound, an upper bound.
    text = "\n".join([
        "  ROOT ragged_all_to_all.1 = f32[4]{0} ragged-all-to-all(shard_map.13, shard_map.14, shard_map.15, "
        "shard_map.16, shard_map.17, shard_map.18), channel_id=1, replica_groups={{0,1}}",  # JAX's HLO, verbatim
        "  %cb = bf16[4,2]{1,0} collective-broadcast(bf16[4,2]{1,0} %p), replica_groups={{0,1}}",
        "  %ar = f32[<=8,2]{1,0} all-reduce(f32[<=8,2]{1,0} %x), to_apply=%add",
    ])
    text = "HloModule jit_f, num_partitions=2\n" + text  # groups of 2: each device sends half, an all-reduce all
    found = collectives_in_hlo(text)
    # Assertions changed from result bytes (16, 16), as above: a group of 2 sends half its result.
    assert found["ragged-all-to-all"] == {"count": 1, "bytes": 8} and found["all-to-all"]["count"] == 0
    assert found["collective-broadcast"] == {"count": 1, "bytes": 8}
    assert found["all-reduce"] == {"count": 1, "bytes": 64}
    assert hlo_shape_bytes("(f32[<=8]{0}, s32[])") == 32 + 4
    with pytest.raises(ValueError, match=r"unbounded dynamic dimension in HLO shape 'f32\[\?,2\]'"):
        hlo_shape_bytes("f32[?,2]")


def compiled_step(rule, build=init_sharded):
    """The compiled train step of a tiny mlp with data parallelism over 8 devices (a (8, 1) mesh)."""
    mesh = make_mesh(model_axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalRuleWarning)
        model = build(lambda: make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), width=16, depth=1,
                                       mlp_ratio=2, time_embed_dim=8), mesh, rule)
    functions, state = make_step_functions(model, init_optimizer_sharded(model, optax.adam(1e-3), rule), mesh)
    batch = shard_batch({"theta": jnp.ones((16, 2)), "x": jnp.ones((16, 3))}, mesh)
    with mesh_context(mesh):
        return functions.train_step.lower(state, batch, jax.random.key(0)).compile()


@pytest.mark.slow
def test_replicated_data_parallel_step_all_reduces_gradients():
    report = compiled_report(compiled_step("replicated"))
    assert report["collectives"]["all-reduce"]["count"] >= 1
    assert report["collectives"]["all-gather"]["count"] == 0
    # The gradients of all (replicated) parameters are summed over the 8 devices: 1394
    # float32 scalars in this mlp ((2 + 3 + 8) * 16 + 16 + 1104 + 32 + 16 * 2 + 2).
    assert report["collectives"]["all-reduce"]["bytes"] >= 4 * 1394
    memory = report["memory"]
    assert memory["argument_bytes"] > 0 and memory["output_bytes"] > 0
    assert memory["total_bytes"] == (memory["argument_bytes"] + memory["output_bytes"]
                                     + memory["temp_bytes"] - memory["alias_bytes"])


@pytest.mark.slow
def test_fsdp_step_all_gathers_parameters():
    # Lowered from abstract state (abstract_sharded): the dry run allocates no parameters.
    fsdp = compiled_report(compiled_step("fsdp", build=abstract_sharded))
    replicated = compiled_report(compiled_step("replicated", build=abstract_sharded))
    assert fsdp["collectives"]["all-gather"]["count"] >= 1
    assert fsdp["collective_bytes"] > 0
    # Split parameters and moments: less state per device than the replicated step.
    assert fsdp["memory"]["argument_bytes"] < replicated["memory"]["argument_bytes"]


def test_compiled_report_rejects_non_programs():
    with pytest.raises(ValueError, match="expected a compiled program"):
        compiled_report(lambda: None)


def test_unknown_hlo_types_and_backends_without_memory_analysis():
    # Guards no test showed: an element type XLA adds later is named, not counted as 0 bytes; a backend whose
    # memory_analysis is not implemented gives memory None, the collectives still counted.
    with pytest.raises(ValueError, match=r"unknown HLO element type 'q9x' in shape '\(f32\[2\], q9x\[3\]\)'"):
        hlo_shape_bytes("(f32[2], q9x[3])")

    class NoMemoryAnalysis:
        def as_text(self):
            return "  %r = f32[4]{0} all-reduce(f32[4]{0} %p), replica_groups={{0,1}}, to_apply=%add"

        def memory_analysis(self):
            raise NotImplementedError

    report = compiled_report(NoMemoryAnalysis())
    assert report["memory"] is None and report["collective_bytes"] == 16
    assert report["collectives"]["all-reduce"] == {"count": 1, "bytes": 16}


def test_a_one_device_mesh_is_counted_in_the_singular():
    """Was "mesh data=1 x model=1: 1 devices, 1 per process (1 process(es)), ...". """
    mesh = make_mesh(jax.devices()[:1], model_axis=1)
    text = str(describe(placed(splittable(nnx.Rngs(0)), mesh, "fsdp"), mesh).mesh)
    assert text == "mesh data=1 x model=1: 1 device, 1 per process (1 process), data-parallel size 1"


def test_every_report_names_a_variable_by_one_path():
    """Was: bytes_per_device named the variable describe calls "kernel" "kernel/value" (its errors the only place it
    names one), a pytree value's leaf "stats/value/mean"."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    from gensbi_sharding import bytes_per_device, partition_specs, sharding_of
    model = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    model.stats = nnx.BatchStat({"mean": jnp.zeros(3)})
    assert [v.path for v in describe(model, None).variables] == ["bias", "kernel", "stats/mean"]
    assert list(partition_specs(model)) == list(sharding_of(model)) == ["bias", "kernel", "stats/mean"]
    abstract = make_mesh(model_axis=2).abstract_mesh
    typeof = jax.typeof(jnp.zeros((2, 3)))
    unplaced = jax.ShapeDtypeStruct((2, 3), jnp.float32, sharding=NamedSharding(abstract, P()))
    for leaf, error, words in ((typeof, TypeError, r" is float32\[2,3\] \(jax.typeof's\)"),
                               (unplaced, ValueError, " is placed on an abstract mesh")):
        for path, variable in (("kernel", nnx.Param(leaf)), ("stats/mean", nnx.BatchStat({"mean": leaf}))):
            broken = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
            setattr(broken, path.split("/")[0], variable)  # a variable, or one leaf of a variable's pytree value
            reports = ((bytes_per_device, path), (lambda node: describe(node, None), path),
                       (lambda node: bytes_per_device({"model": node}), f"model/{path}"))  # a pytree holding it
            for report, named in reports:
                with pytest.raises(error, match=f"^{named}{words}"):
                    report(broken)
