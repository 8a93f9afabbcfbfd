"""Placement cost of ``shard_model`` against a bare per-leaf ``jax.device_put`` loop.

A >= 64M-parameter float32 model on 8 simulated CPU devices, a (4, 2) mesh, each
rule. Fresh, identical, unplaced copies of the model are placed alternately by
``shard_model`` and by a bare loop that calls ``jax.device_put`` leaf by leaf with
the same target shardings, after a warm-up; the table reports medians of the
trials and their ratio, and the cost of a second ``shard_model`` call on the
already-placed model (which must keep the very same buffers).

Run: ``.venv/bin/python benchmarks/shard_model.py [--trials 7] [--layers 16 --width 2048]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402

from gensbi_sharding import RULES, axes, make_mesh, partition_spec_for, shard_model  # noqa: E402
from gensbi_sharding.sharding import logical_axes_of  # noqa: E402


class Stack(nnx.Module):
    """``layers`` square kernels of ``width`` (annotated embed x mlp) and their biases."""

    def __init__(self, layers: int, width: int):
        keys = jax.random.split(jax.random.key(0), layers)
        self.kernels = nnx.List([
            nnx.Param(jax.random.normal(k, (width, width), jnp.float32), **axes("embed", "mlp"))
            for k in keys])
        self.biases = nnx.List([nnx.Param(jnp.zeros((width,), jnp.float32), **axes("mlp"))
                                for _ in range(layers)])


def fresh_copy(base: Stack) -> Stack:
    # Arrays are immutable: the clone shares the unplaced buffers of ``base``, so every
    # trial starts from the same single-device arrays and placement really moves them.
    return nnx.clone(base)


def bare_loop(model: Stack, mesh, rule: str) -> list[jax.Array]:
    table = dict(RULES[rule])
    out = []
    for _, var in nnx.to_flat_state(nnx.state(model)):
        value = var.get_value()
        names = None if rule == "replicated" else logical_axes_of(var)
        spec, _ = partition_spec_for(names, value.shape, table, mesh)
        out.append(jax.device_put(value, NamedSharding(mesh, spec)))
    return out


def leaves(model: Stack) -> list[jax.Array]:
    return [var.get_value() for _, var in nnx.to_flat_state(nnx.state(model))]


def place_and_read(model: Stack, mesh, rule: str) -> list[jax.Array]:
    shard_model(model, mesh, rule)
    return leaves(model)


def timed(fn) -> float:
    start = time.perf_counter()
    result = fn()
    jax.block_until_ready(result)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--trials", type=int, default=7)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the experimental-rule warning, once per call

    base = Stack(args.layers, args.width)
    jax.block_until_ready(leaves(base))
    n_params = sum(x.size for x in leaves(base))
    mesh = make_mesh(model_axis=2)
    print(f"{n_params / 1e6:.1f}M float32 parameters ({n_params * 4 / 1e6:.0f} MB), "
          f"{len(jax.devices())} devices, mesh {dict(mesh.shape)}, median of {args.trials} trials")
    print()
    print("| rule | shard_model (s) | bare device_put loop (s) | ratio | second call (s) | second / first | same buffers |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    for rule in RULES:
        def run_shard_model():
            model = fresh_copy(base)
            shard_model(model, mesh, rule)
            return model

        # Warm-up: compile nothing, but fill allocator pools and caches for both paths.
        jax.block_until_ready(leaves(run_shard_model()))
        jax.block_until_ready(bare_loop(fresh_copy(base), mesh, rule))
        ours, bare, second, same = [], [], [], True
        for _ in range(args.trials):
            model = fresh_copy(base)
            ours.append(timed(lambda m=model: place_and_read(m, mesh, rule)))
            before = leaves(model)
            second.append(timed(lambda m=model: place_and_read(m, mesh, rule)))
            same &= all(a is b for a, b in zip(before, leaves(model)))
            # Drop this trial's placed copies before the next: 8 replicas of 269 MB add up.
            model = before = None
            bare.append(timed(lambda c=fresh_copy(base): bare_loop(c, mesh, rule)))
        m_ours, m_bare, m_second = map(statistics.median, (ours, bare, second))
        ratio, rel_second = m_ours / m_bare, m_second / m_ours
        ok &= ratio <= 1.10 and rel_second <= 0.05 and same
        print(f"| {rule} | {m_ours:.3f} | {m_bare:.3f} | {ratio:.2f} | {m_second:.4f} | "
              f"{rel_second:.1%} | {same} |")
    print()
    print("targets (ratio <= 1.10, second / first <= 5%, same buffers):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
