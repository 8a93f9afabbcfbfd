"""Fusible Threefry bits equal JAX's: known answers, jax.random.bits in every layout, and when not to fuse."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.random import threefry_2x32
from jax.sharding import NamedSharding, PartitionSpec as P

from gensbi_sharding import random_bits
from gensbi_sharding.random_bits import agrees_with_jax, can_fuse, threefry2x32, threefry_bits
from gensbi_sharding.sharding import make_mesh

# Known-answer vectors of Threefry-2x32-20 (Random123's kat_vectors): key, counter, output.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key, counter, expected", KNOWN_ANSWERS)
def test_threefry2x32_known_answers(key, counter, expected):
    u32 = np.uint32
    out = threefry2x32(u32(key[0]), u32(key[1]), jnp.array([counter[0]], jnp.uint32),
                       jnp.array([counter[1]], jnp.uint32))
    assert (int(out[0][0]), int(out[1][0])) == expected


def test_threefry2x32_equals_jax_hash_on_many_counters():
    counters = jax.random.bits(jax.random.key(3), (2, 1000), jnp.uint32)
    key = jnp.array([0xDEADBEEF, 0x12345678], jnp.uint32)
    ours = threefry2x32(key[0], key[1], counters[0], counters[1])
    # JAX's public hash pairs the first half of a flat count array with the second half.
    theirs = threefry_2x32(key, counters.reshape(-1))
    np.testing.assert_array_equal(np.concatenate(ours), np.asarray(theirs))


@pytest.mark.parametrize("bit_width", [8, 16, 32])
@pytest.mark.parametrize("shape", [(1,), (7,), (5, 3), (2, 3, 4)])
def test_bits_equal_jax_random_bits(bit_width, shape):
    for seed in (0, 1, 2**31 - 1):
        key = jax.random.key(seed)
        ours = threefry_bits(jax.random.key_data(key), bit_width, shape)
        theirs = jax.random.bits(key, shape, jnp.dtype(f"uint{bit_width}"))
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_64_bit_draws_equal_jax_random_bits():
    with jax.enable_x64(True):
        key = jax.random.key(11)
        ours = threefry_bits(jax.random.key_data(key), 64, (3, 4))
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(jax.random.bits(key, (3, 4), jnp.uint64)))


@pytest.mark.parametrize("spec", [P(), P("data", None), P(None, "data"), P("model", "data")])
def test_bits_are_the_same_in_every_layout(spec):
    mesh = make_mesh(model_axis=2)
    key = jax.random.key(42)
    draw = jax.jit(lambda k: threefry_bits(k, 32, (16, 24)), out_shardings=NamedSharding(mesh, spec))
    placed = draw(jax.random.key_data(key))
    assert placed.sharding.spec == spec
    np.testing.assert_array_equal(np.asarray(placed), np.asarray(jax.random.bits(key, (16, 24))))


def test_a_fused_draw_has_no_temporaries():
    """The point of fusing: XLA writes the shards directly, with no array-sized scratch."""
    mesh = make_mesh(model_axis=1)
    out = NamedSharding(mesh, P("data", None))
    init = jax.nn.initializers.lecun_normal()
    fused = jax.jit(lambda k: init(jax.random.wrap_key_data(k), (256, 512), jnp.float32), out_shardings=out)
    assert can_fuse(jax.random.key(0), 32, (256, 512))
    key = jax.random.key_data(jax.random.key(0))
    # The same initialiser with its bits from threefry_bits compiles to one loop.
    def ours(k):
        bits = threefry_bits(k, 32, (256, 512))
        uniform = jax.lax.bitcast_convert_type((bits >> 9) | np.uint32(0x3F800000), jnp.float32) - 1.0
        return jax.scipy.special.erfinv(2 * uniform - 1)
    shard_bytes = 256 * 512 * 4 // 8
    plain = fused.lower(key).compile().memory_analysis().temp_size_in_bytes
    fused_temps = jax.jit(ours, out_shardings=out).lower(key).compile().memory_analysis().temp_size_in_bytes
    assert plain >= 2 * shard_bytes  # JAX's rolled hash on CPU keeps its loop state
    assert fused_temps < shard_bytes // 100


def test_can_fuse_only_partitionable_threefry_scalar_keys():
    key = jax.random.key(0)
    assert can_fuse(key, 32, (4, 4))
    assert not can_fuse(jax.random.split(key, 2), 32, (4, 4))          # batched keys
    assert not can_fuse(jax.random.key(0, impl="rbg"), 32, (4, 4))      # another generator
    assert not can_fuse(key, 64, (4,))                                 # 64 bits need x64
    assert not can_fuse(key, 32, (2**16, 2**16))                       # counters past 32 bits
    with jax.threefry_partitionable(False):
        assert not can_fuse(key, 32, (4, 4))


def test_disagreement_with_jax_disables_fusing(monkeypatch):
    agrees_with_jax.cache_clear()
    # Bits of another counter layout (column-major): what a change in JAX's contract would look like.
    monkeypatch.setattr(random_bits, "threefry_bits", lambda key, width, shape: threefry_bits(
        key, width, shape[::-1]).transpose(tuple(reversed(range(len(shape))))))
    try:
        assert not agrees_with_jax(32)
        assert not can_fuse(jax.random.key(0), 32, (4, 4))
    finally:
        agrees_with_jax.cache_clear()
