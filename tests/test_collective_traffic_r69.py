"""Collectives as one device's traffic per step: loops counted per iteration, bytes sent by the op's kind and group.

Was: an op in a scanned body counted once whatever the layer count (a review's script: 262,148 bytes at 1, 4 or 16
layers), and "bytes" was each op's result size, which adds unlike things (a reduce-scatter's result is 1/n of
what it moves, an all-reduce's half), so a dry-run sweep ranked rules by numbers that are not bytes moved.
"""

import jax
import numpy as np
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.compiled import collectives_in_hlo


def _scanned_fsdp_report(layers: int) -> dict:
    mesh = gs.make_mesh()  # (8, 1): fsdp gathers each layer's 256 x 256 weights from 8 shards

    def loss(ws, x):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0].sum()

    x = jax.device_put(jnp.ones((64, 256)), NamedSharding(mesh, P("data")))
    ws = jax.device_put(jnp.ones((layers, 256, 256)), NamedSharding(mesh, P(None, "data", None)))
    return gs.compiled_report(jax.jit(loss).lower(ws, x).compile())["collectives"]


@pytest.mark.parametrize("layers", [1, 4])
@pytest.mark.fast_cases(1)
def test_a_collective_in_a_scanned_body_counts_once_per_layer(layers):
    gathered = _scanned_fsdp_report(layers)["all-gather"]
    assert gathered == {"count": layers, "bytes": layers * 256 * 256 * 4 * 7 // 8}


def test_an_all_reduce_sends_what_a_reduce_scatter_and_an_all_gather_of_it_send():
    text = "\n".join([
        "HloModule jit_step, num_partitions=8",
        "  %ar = f32[256]{0} all-reduce(f32[256]{0} %g), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add",
        "  %rs = f32[32]{0} reduce-scatter(f32[256]{0} %g), replica_groups=[1,8]<=[8], dimensions={0}",
        "  %ag = f32[256]{0} all-gather(f32[32]{0} %rs), replica_groups={}, dimensions={0}",
    ])
    found = collectives_in_hlo(text)
    assert found["reduce-scatter"]["bytes"] == found["all-gather"]["bytes"] == 7 * 1024 // 8
    assert found["all-reduce"]["bytes"] == found["reduce-scatter"]["bytes"] + found["all-gather"]["bytes"]


def test_a_group_over_one_mesh_axis_counts_that_axis_devices():
    # JAX 0.12 prints groups by mesh axes; an all-reduce over "data" of a (4, 2) mesh is a group of 4, not 8.
    line = ("  %all-reduce.4 = f32[256,256]{1,0} all-reduce(%dot.10), channel_id=3, "
            "replica_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_0'}, use_global_device_ids=true, to_apply=%add")
    found = collectives_in_hlo("HloModule jit_step, num_partitions=8\n" + line)
    assert found["all-reduce"] == {"count": 1, "bytes": 2 * 3 * 256 * 256 * 4 // 4}


def test_a_gradient_all_reduce_over_the_data_axis_of_a_real_program():
    mesh = gs.make_mesh(model_axis=2)  # (4, 2)
    x = jax.device_put(jnp.ones((16, 128)), NamedSharding(mesh, P("data")))
    w = jax.device_put(jnp.ones((128, 128)), NamedSharding(mesh, P()))
    grad = jax.jit(jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w)))).lower(w, x).compile()
    reduced = gs.compiled_report(grad)["collectives"]["all-reduce"]
    assert reduced["count"] >= 1 and reduced["bytes"] == reduced["count"] * 2 * 3 * 128 * 128 * 4 // 4


def test_a_group_over_part_of_a_mesh_axis_counts_that_part():
    # JAX 0.12 prints a group over a sub-axis as {'x':(1)4}; it was read as all of x (896 bytes for both ops below).
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(8), ("x",))
    a = jax.device_put(jnp.ones((64, 16)), NamedSharding(mesh, P("x")))
    found = gs.compiled_report(jax.jit(lambda a: a.reshape(4, 16, 16).sum(0)).lower(a).compile())["collectives"]
    # each device's 8 x 16 float32 partial sum all-reduced over the 4 devices of its block (f32[8,16] in the HLO,
    # {'x':(1)4}), then the 16 x 16 sum gathered over the 2 blocks ({'x':(4)2})
    assert found["all-reduce"] == {"count": 1, "bytes": 2 * 3 * 512 // 4}
    assert found["all-gather"] == {"count": 1, "bytes": 1024 // 2}
