"""Harness train-step overhead against a minimal hand-written ``nnx.jit`` step.

Same model, same shardings (rule placed by ``shard_model``), same placed batch, one
process. Both steps are compiled first, then timed in blocks, which of them goes first swapped every block; the
table reports median seconds per step and the ratio harness / hand-written
(target <= 1.05), judged at the size it is set for (the defaults' 203,778 parameters, --width 128
--depth 3, or more) only: a smaller model's step is mostly per-call overhead.

Run: ``.venv/bin/python benchmarks/step_overhead.py [--rule tensor --model-axis 2 --blocks 9]``
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
from pathlib import Path

# This checkout's package, not whichever copy the environment has installed (another clone, a
# non-editable install): the numbers must be of the code beside this script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli_args import count, fit_console, jax_platform, model_axis, model_fits, new_parser, positive_int  # noqa: E402
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)

import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

from gensbi_sharding import (RULES, make_mesh, mesh_context, nearest_batch_sizes, replicate, shard_batch,  # noqa: E402
                             shard_model)
from gensbi_sharding.harness.registry import get_model  # noqa: E402
from gensbi_sharding.harness.train import flow_matching_loss, make_step_functions  # noqa: E402


#: The parameters the ratio target is set for (the defaults, --width 128 --depth 3, build 203,778); below, a ratio
#: of per-call overheads judges nothing.
TARGET_PARAMS = 203_778


def build(rule: str, mesh, width: int, depth: int):
    model = get_model("mlp")(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), width=width, depth=depth, mlp_ratio=2)
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    shard_model(model, mesh, rule)
    shard_model(optimizer, mesh, rule)
    return model, optimizer


def alternate(first, second, blocks: int) -> tuple[list[float], list[float]]:
    """``blocks`` timings of each of two zero-argument timers, the order swapped every block.

    ``first`` runs first in even blocks, ``second`` in odd ones (as ``shard_model.py``'s trials): always timing one
    before the other gave whichever ran second a machine the first had just warmed (caches, clock, a neighbour's
    load pattern), a bias the median of blocks keeps.

    Returns
    -------
    tuple of list of float
        ``(first's timings, second's timings)``, each in block order.
    """
    a, b = [], []
    for block in range(blocks):
        if block % 2:
            b.append(second())
            a.append(first())
        else:
            a.append(first())
            b.append(second())
    return a, b


def main() -> int:
    parser = new_parser(__doc__)
    jax_platform(parser)  # before jax.devices(): a JAX_PLATFORMS JAX cannot start, named
    parser.add_argument("--rule", default="tensor", choices=tuple(RULES), help="sharding rule of the model")
    parser.add_argument("--model-axis", type=model_axis(len(jax.devices())), default=2,
                        help="size of the mesh's model axis (of 8 devices)")
    parser.add_argument("--width", type=positive_int, default=128, help="mlp width")
    parser.add_argument("--depth", type=positive_int, default=3, help="mlp depth")
    parser.add_argument("--batch", type=count(example=256), default=256, help="global batch size")
    parser.add_argument("--blocks", type=positive_int, default=9, help="timed blocks per step kind; median shown")
    parser.add_argument("--steps", type=positive_int, default=30, help="steps per block")
    args = parser.parse_args()
    model_fits(parser, 4 * args.depth * 2 * 2 * args.width ** 2, f"--width {args.width} --depth {args.depth}",
               "pass a smaller --width or --depth (the defaults, 128 and 3, build 0.8 MB)")  # its blocks' kernels
    data = len(jax.devices()) // args.model_axis  # the batch's rows are split over the data axis
    if args.batch % data:
        parser.error(f"argument --batch: {args.batch} does not split over the data-parallel size {data} "
                     f"({len(jax.devices())} devices / --model-axis {args.model_axis}); e.g. --batch "
                     f"{nearest_batch_sizes(args.batch, data)[0]}")  # the one rule every batch message uses
    warnings.simplefilter("ignore")
    mesh = make_mesh(model_axis=args.model_axis)
    rng = np.random.default_rng(0)
    batch = shard_batch({"theta": rng.standard_normal((args.batch, 2), np.float32),
                         "x": rng.standard_normal((args.batch, 2), np.float32)}, mesh)
    key = replicate(jax.random.key(0), mesh)

    # The harness: split once, the pure jitted step over the state's arrays (as harness.train.train), donated.
    functions, state = make_step_functions(*build(args.rule, mesh, args.width, args.depth), mesh)
    state = functions.arrays(state)
    with mesh_context(mesh):
        harness_step = functions.train_arrays.lower(state, batch, key).compile()

    # Hand-written: the textbook nnx.jit step on the module objects.
    model, optimizer = build(args.rule, mesh, args.width, args.depth)

    @nnx.jit
    def hand_step(model, optimizer, batch, key):
        step_key = jax.random.fold_in(key, optimizer.step[...])
        loss, grads = nnx.value_and_grad(
            lambda m: flow_matching_loss(m, batch["theta"], batch["x"], step_key))(model)
        optimizer.update(model, grads)
        return loss

    def time_harness():
        nonlocal state
        start = time.perf_counter()
        for _ in range(args.steps):
            state, loss = harness_step(state, batch, key)
        loss.block_until_ready()
        return (time.perf_counter() - start) / args.steps

    def time_hand():
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = hand_step(model, optimizer, batch, key)
        loss.block_until_ready()
        return (time.perf_counter() - start) / args.steps

    with mesh_context(mesh):
        time_harness(), time_hand()  # warm-up (compiles the hand-written step)
        ours, hand = alternate(time_harness, time_hand, args.blocks)
    m_ours, m_hand = statistics.median(ours), statistics.median(hand)
    n_params = sum(leaf.size for leaf in jax.tree.leaves(nnx.state(model, nnx.Param)))
    ratio = m_ours / m_hand
    print(f"mlp width {args.width} depth {args.depth}, batch {args.batch}, rule {args.rule}, "
          f"mesh {dict(mesh.shape)}; median of {args.blocks} block{'s' * (args.blocks != 1)} of {args.steps} "
          f"step{'s' * (args.steps != 1)}")
    print()
    print("| step | s/step |\n|---|---|")
    print(f"| harness (split state, jax.jit, donated) | {m_ours:.5f} |")
    print(f"| hand-written nnx.jit | {m_hand:.5f} |")
    print(f"| ratio harness / hand-written | {ratio:.3f} |")
    print()
    if n_params < TARGET_PARAMS:  # at --width 8 the ratio is of per-call overheads: not judged
        print(f"target not judged: {n_params:,} parameters, under the {TARGET_PARAMS:,} it is set for (a step this "
              "small is mostly per-call overhead; the defaults, --width 128 --depth 3, judge it)")
        return 0
    print("target (ratio <= 1.05):", "met" if ratio <= 1.05 else "NOT met")
    return 0 if ratio <= 1.05 else 1


if __name__ == "__main__":
    fit_console()  # a console without UTF-8: a table's character escaped, never an UnicodeEncodeError
    sys.exit(main())
