"""``describe`` and ``bytes_per_device`` on odd states: host-memory variables, sub-byte dtypes, abstract meshes,
empty arrays, another mesh than the arrays'.

In-process, 8 simulated CPU devices (conftest); tiny modules.
"""

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs


@pytest.mark.parametrize("kind", ["pinned_host", "unpinned_host"])
def test_describe_counts_no_device_bytes_for_a_variable_in_host_memory(devices, kind):
    # Was: a kernel offloaded to host memory (memory_kind "pinned_host", as MaxText offloads optimizer state) counted
    # on every device (64 B each: 96 B with the bias), its row "P('data', None)", as if it took device memory.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 8, rngs=nnx.Rngs(0))  # kernel 256 B, bias 32 B
    gs.shard_model(model, mesh, "replicated")
    model.kernel.set_value(jax.device_put(model.kernel[...], NamedSharding(mesh, P("data", None), memory_kind=kind)))
    assert gs.bytes_per_device(model) == dict.fromkeys(range(8), 32)  # the bias only, on every device
    report = gs.describe(model, mesh)
    assert report.bytes_per_device == dict.fromkeys(range(8), 32)
    assert report.placements == {"bias": "P()", "kernel": f"P('data', None) in {kind}"}
    assert [(v.path, v.nbytes, v.max_device_bytes) for v in report.variables] == [("bias", 32, 32),
                                                                                 ("kernel", 256, 0)]
    assert f"P('data', None) in {kind}" in str(report)
    # A replicated variable in host memory costs no device its bytes: not among the largest replicated.
    model.bias.set_value(jax.device_put(model.bias[...], NamedSharding(mesh, P(), memory_kind=kind)))
    model.kernel.set_value(jax.device_put(model.kernel[...], NamedSharding(mesh, P("data", None))))
    report = gs.describe(model, mesh)
    assert report.largest_replicated == ()
    assert report.bytes_per_device == dict.fromkeys(range(8), 64)  # the kernel's quarter
    # An abstract state planned into host memory (a dry run of an offloaded state): no device bytes either.
    abstract = jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=NamedSharding(mesh, P(), memory_kind=kind))
    assert gs.bytes_per_device({"w": abstract}) == {}


def _abstract_on(mesh, spec):
    """A Linear's state as ``jax.ShapeDtypeStruct`` leaves placed at ``spec`` on ``mesh``'s ``AbstractMesh``."""
    state = nnx.state(nnx.Linear(8, 4, rngs=nnx.Rngs(0)))
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(
        a.shape, a.dtype, sharding=jax.sharding.NamedSharding(mesh.abstract_mesh, spec if a.ndim == 2 else P())),
        state)


def test_a_state_on_an_abstract_mesh_is_counted_on_the_concrete_mesh_given_else_refused_naming_it(devices):
    # Was: describe(state, mesh), describe(state, None) and bytes_per_device(state) all raised JAX's
    # "_device_assignment is not implemented for `jax.sharding.AbstractMesh`", naming no variable and no fix.
    mesh = gs.make_mesh(model_axis=2)
    abstract = _abstract_on(mesh, P("data", "model"))
    placed = jax.tree.map(lambda s: jax.device_put(jnp.zeros(s.shape, s.dtype),
                                                   jax.sharding.NamedSharding(mesh, s.sharding.spec)), abstract)
    report, expected = gs.describe(abstract, mesh), gs.describe(placed, mesh)
    assert report.bytes_per_device == expected.bytes_per_device
    assert report.placements == expected.placements == {"bias": "P()", "kernel": "P('data', 'model')"}
    assert max(report.bytes_per_device.values()) == 4 * 4 + 16  # a (2, 2) float32 shard of the kernel + the bias
    for call in (lambda: gs.describe(abstract, None), lambda: gs.bytes_per_device(abstract),
                 lambda: gs.describe(abstract, gs.make_mesh(model_axis=4))):  # none, or another layout
        with pytest.raises(ValueError, match=r"^bias\S* is placed on an abstract mesh \{'data': 4, 'model': 2\}"
                                             r".*pass its concrete mesh: describe\(node, mesh\)"):
            call()


def test_a_state_of_jax_typeof_values_is_refused_naming_the_variable_not_reported_empty(devices):
    # Was: describe skipped jax.typeof's ShapedArray leaves (a report of 0 leaves, 0 B) and bytes_per_device returned
    # {}: its sharding lists Explicit mesh axes only, so a kernel split over Auto axes would read replicated.
    mesh = gs.make_mesh(model_axis=2)
    placed = jax.tree.map(lambda s: jax.device_put(jnp.zeros(s.shape, s.dtype), jax.sharding.NamedSharding(
        mesh, s.sharding.spec)), _abstract_on(mesh, P("data", "model")))
    typed = jax.tree.map(jax.typeof, placed)
    for call in (lambda: gs.describe(typed, mesh), lambda: gs.describe(typed, None), lambda: gs.bytes_per_device(typed)):
        with pytest.raises(TypeError, match=r"^bias\S* is float32\[4\] \(jax.typeof's\).*pass the arrays, or "
                                            r"jax.ShapeDtypeStruct leaves"):
            call()
    assert gs.describe(placed, mesh).n_leaves == 2  # the arrays themselves: counted


@pytest.mark.slow
def test_sub_byte_dtypes_count_packed_as_the_device_holds_them(devices):
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax.sharding import NamedSharding, PartitionSpec as P

    from gensbi_sharding import bytes_per_device, compiled_report, describe, make_mesh

    mesh = make_mesh(model_axis=2)
    x = jax.device_put(jnp.ones((16,), jnp.int4), NamedSharding(mesh, P("data")))
    # Was 4 per device (itemsize 1 for int4) while XLA, and compiled_report, count 2.
    assert bytes_per_device(x) == {d: 2 for d in range(8)}
    arg = compiled_report(jax.jit(lambda v: v).lower(x).compile())["memory"]["argument_bytes"]
    assert arg == 2
    holder = nnx.Module()
    holder.w, holder.key = nnx.Param(jnp.ones((5,), jnp.int4)), nnx.Variable(jax.random.split(jax.random.key(0), 4))
    report = describe(holder, None)
    assert {v.path: v.nbytes for v in report.variables} == {"key": 32, "w": 3}  # 5 int4: 20 bits -> 3 B
    assert report.total_bytes == 35
    # float0 (an integer parameter's gradient) and PRNG keys: whole bytes, no error.
    holder.i = nnx.Param(jnp.ones((3,), jnp.int32))
    grads = nnx.grad(lambda m: 0.0, argnums=nnx.DiffState(0, nnx.Param), allow_int=True)(holder)
    got = describe(grads, None)  # was ValueError "unexpected input: dtype=dtype([('float0', 'V')])" mid-fix
    assert {(v.path, v.dtype, v.nbytes) for v in got.variables} == {("i", "[('float0', 'V')]", 0),
                                                                   ("w", "[('float0', 'V')]", 0)}


def test_table_columns_stay_aligned_with_long_dtypes_and_shapes(devices):
    import jax.numpy as jnp
    from flax import nnx

    from gensbi_sharding import describe

    holder = nnx.Module()
    holder.f8, holder.wide = nnx.Param(jnp.ones((2,), jnp.float8_e4m3fn)), nnx.Param(jnp.zeros((1, 2, 3, 4, 0)))
    lines = describe(holder, None).table().splitlines()[2:]
    # Was: "float8_e4m3fn" overflowed the 9-wide dtype column and shifted that row's placement and bytes.
    assert len({line.index("single device") for line in lines[1:]}) == 1
    assert len({len(line) for line in lines}) == 1, lines


def test_empty_arrays_are_not_listed_as_largest_replicated(devices):
    import jax.numpy as jnp
    from flax import nnx

    from gensbi_sharding import describe, init_sharded, make_mesh, partitioned

    class Model(nnx.Module):
        def __init__(self):
            self.lin = nnx.Linear(4, 8, rngs=nnx.Rngs(0),
                                  kernel_init=partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))
            self.empty = nnx.Param(jnp.zeros((0, 5)))

    mesh = make_mesh(model_axis=2)
    with pytest.warns(Warning):
        report = describe(init_sharded(Model, mesh, "fsdp"), mesh)
    # Was (('lin/bias', 32), ('empty', 0)): "largest replicated ... empty (0 B)".
    assert report.largest_replicated == (("lin/bias", 32),)
    assert "empty (0 B)" not in report.table()


def test_describe_on_another_mesh_than_the_arrays_names_both(devices):
    import jax
    from flax import nnx

    from gensbi_sharding import describe, init_sharded, make_mesh

    on, other = make_mesh(jax.devices()[4:]), make_mesh(jax.devices()[:4])
    layer = init_sharded(lambda: nnx.Linear(4, 8, rngs=nnx.Rngs(0)), on, "replicated")
    # Was a report of "mesh data=4 ...: 4 devices" listing 8 devices, "min 0 B".
    with pytest.raises(ValueError, match=r"arrays are on devices \[4, 5, 6, 7\], outside the mesh given \(devices "
                                         r"\[0, 1, 2, 3\]\); pass the mesh they are on, or mesh=None"):
        describe(layer, other)
    assert describe(layer, on).bytes_per_device == {4: 160, 5: 160, 6: 160, 7: 160}


class WithScalars(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(2, 3, rngs=rngs)
        self.temperature = nnx.Variable(3.0)  # Python scalars: state, but no array on any device
        self.calls = nnx.Variable(7)


def test_describe_names_the_python_scalars_it_leaves_out_of_its_table_and_counts(devices):
    # Was: temperature and calls were in no row, no count and no line: the table read as the whole state.
    report = gs.describe(WithScalars(nnx.Rngs(0)), gs.make_mesh(model_axis=2))
    assert report.n_leaves == 2 and set(report.placements) == {"lin/bias", "lin/kernel"}
    assert report.left_out == ("calls (int)", "temperature (float)")
    assert str(report).splitlines()[-1] == "left out, no array (on no device): calls (int), temperature (float)"
    assert "left out" not in str(gs.describe(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), None))


def test_placement_queries_inside_a_jit_refuse_the_traced_state_naming_the_fix(devices):
    # Was: inside nnx.jit, sharding_of gave {"kernel": None, "bias": None}, describe "per device max 0 B" and
    # partition_specs {"bias": "host", ...}, silently.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
    gs.shard_model(model, mesh, "replicated")
    for query in (gs.sharding_of, lambda m: gs.describe(m, mesh), gs.bytes_per_device, gs.partition_specs):
        with pytest.raises(TypeError, match=r"^bias is a traced array under a JAX transformation \(jax.jit, "
                                            r"jax.grad, ...\).*call them outside the transformed function, on the "
                                            r"state it takes or returns"):
            nnx.jit(query)(model)
    assert gs.sharding_of(model)["kernel"] == NamedSharding(mesh, P())  # outside: the placements, as before
    assert gs.describe(model, mesh).max_bytes_per_device == 80
