"""Threefry random bits as one elementwise expression, so an initialiser fuses into one loop.

On CPU, JAX lowers the Threefry hash to a rolled loop over whole arrays (small programs,
quick to compile). Inside an initialiser that loop's state is three array-sized ``uint32``
temporaries next to the output: drawing a 67 MB kernel needs 200 MB more while it runs.
Written out round by round, the hash is elementwise in the counters, so XLA fuses counters,
hash and float transform into one loop that writes the output directly, with no
temporaries (and about 3x faster on CPU).

The bits are those of ``jax.random.bits`` with ``jax_threefry_partitionable`` on: element
``i`` (row-major flat index) of a draw is ``t0 ^ t1`` with ``(t0, t1)`` the Threefry-2x32
hash of the counter pair ``(i >> 32, i & 0xffffffff)`` under the key's two words (for
64-bit draws, ``t0 << 32 | t1``; for 8 and 16 bits, the low bits of ``t0 ^ t1``). That is
JAX's documented contract for the flag, not an interface, so ``agrees_with_jax`` checks it
against ``jax.random.bits`` once per bit width before it is relied on.

References
----------
J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw, "Parallel random numbers: as easy as
1, 2, 3", SC '11 (Threefry-2x32, 20 rounds; rotation constants and key-schedule parity).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["threefry2x32", "threefry_bits", "can_fuse", "agrees_with_jax"]

# Threefry-2x32 rotation constants (Salmon et al. 2011, table 4), alternating per 4 rounds.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# Key-schedule parity word of Threefish/Threefry for 32-bit words.
_PARITY = 0x1BD11BDA
_BIT_WIDTHS = (8, 16, 32, 64)


def threefry2x32(key0: jax.Array, key1: jax.Array, x0: jax.Array, x1: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The Threefry-2x32 hash (20 rounds) of counter pairs ``(x0, x1)`` under key ``(key0, key1)``.

    Parameters
    ----------
    key0, key1 : uint32 scalars
    x0, x1 : uint32 arrays of one shape

    Returns
    -------
    (uint32 array, uint32 array), the shape of ``x0``.
    """
    u32 = np.uint32
    keys = (key0, key1, key0 ^ key1 ^ u32(_PARITY))
    x0, x1 = x0 + keys[0], x1 + keys[1]
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = lax.shift_left(x1, u32(r)) | lax.shift_right_logical(x1, u32(32 - r))
            x1 = x1 ^ x0
        # Key injection after every four rounds, with the injection count added to the last word.
        x0 = x0 + keys[(block + 1) % 3]
        x1 = x1 + keys[(block + 2) % 3] + u32(block + 1)
    return x0, x1


def threefry_bits(key_data: jax.Array, bit_width: int, shape: tuple[int, ...]) -> jax.Array:
    """The bits ``jax.random.bits`` draws from a Threefry key (partitionable), fusible by XLA.

    Parameters
    ----------
    key_data : uint32 array of shape (2,)
        ``jax.random.key_data(key)`` of one Threefry key.
    bit_width : int
        8, 16, 32 or 64 (64 needs ``jax_enable_x64``).
    shape : tuple of int
        Fewer than 2**32 elements (see ``can_fuse``).

    Returns
    -------
    Array of ``shape``, dtype ``uint{bit_width}``.
    """
    # The flat index, built from per-dimension iotas so the SPMD partitioner gives each
    # device its own block of counters.
    flat = jnp.zeros(shape, jnp.uint32)
    stride = 1
    for dim in reversed(range(len(shape))):
        flat = flat + lax.broadcasted_iota(jnp.uint32, shape, dim) * np.uint32(stride)
        stride *= shape[dim]
    t0, t1 = threefry2x32(key_data[0], key_data[1], jnp.zeros(shape, jnp.uint32), flat)
    if bit_width == 64:
        return lax.shift_left(t0.astype(jnp.uint64), np.uint64(32)) | t1.astype(jnp.uint64)
    return (t0 ^ t1).astype(jnp.dtype(f"uint{bit_width}"))


def can_fuse(key: jax.Array, bit_width: int, shape: tuple[int, ...]) -> bool:
    """Whether ``threefry_bits`` stands in for ``random_bits(key)`` with these parameters."""
    return (jax.config.jax_threefry_partitionable and key.shape == () and bit_width in _BIT_WIDTHS
            and (bit_width < 64 or jax.config.jax_enable_x64)
            and jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
            and str(jax.random.key_impl(key)) == "threefry2x32"
            and all(isinstance(d, int) for d in shape) and math.prod(shape) < 2**32
            and agrees_with_jax(bit_width))


@functools.cache
def agrees_with_jax(bit_width: int) -> bool:
    """Whether ``threefry_bits`` equals ``jax.random.bits`` on a few keys and shapes (cached)."""
    dtype, shape = jnp.dtype(f"uint{bit_width}"), (3, 5, 7)  # one shape: each costs compiles
    ours = jax.jit(threefry_bits, static_argnums=(1, 2))
    with jax.ensure_compile_time_eval():  # may be first asked while a program is traced
        for seed in (0, 12345, 2**31 - 1):
            key = jax.random.key(seed, impl="threefry2x32")
            if not np.array_equal(np.asarray(ours(jax.random.key_data(key), bit_width, shape)),
                                  np.asarray(jax.random.bits(key, shape, dtype))):
                return False
    return True
