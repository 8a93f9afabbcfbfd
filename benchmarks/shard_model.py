"""Placement cost of ``shard_model`` against the published reference, ``gensbi.sharding.shard_model``.

A >= 64M-parameter float32 model on 8 simulated CPU devices, a (4, 2) mesh, each rule.
Fresh, identical, unplaced copies of the model are placed by ours and by GenSBI's
``shard_model`` (the ``gensbi`` extra) in alternating order (ours first in even trials,
the reference first in odd ones), after a warm-up of each. For each call the table
shows the median wall time and the median peak resident memory above the resident
memory before the call (Linux ``VmHWM``, reset per call through ``/proc/self/clear_refs``),
and for ours the cost of a second call on the already-placed model, which must keep
the very same buffers. The time target is judged at the size it is set for (>= 64M
parameters) only: a smaller model's placement is mostly per-call overhead.

Run: ``.venv/bin/python benchmarks/shard_model.py [--trials 6] [--layers 16 --width 2048]``
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

# This checkout's package, not whichever copy the environment has installed (another clone, a
# non-editable install): the numbers must be of the code beside this script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli_args import fit_console, jax_platform, model_fits, new_parser, positive_int  # noqa: E402
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

import gensbi_sharding as gs  # noqa: E402
from gensbi_sharding.harness.units import format_bytes  # noqa: E402

try:
    from gensbi.sharding import shard_model as reference_shard_model  # noqa: E402
except ImportError:  # pragma: no cover
    raise SystemExit("the reference needs the gensbi extra: pip install -e '.[gensbi]'") from None


#: The parameters the time target is set for (the defaults build 67.1M); below, a ratio of times judges nothing.
TARGET_PARAMS = 64_000_000


class Stack(nnx.Module):
    """``layers`` square kernels of ``width`` (annotated embed x mlp) and their biases."""

    def __init__(self, layers: int, width: int):
        keys = jax.random.split(jax.random.key(0), layers)
        self.kernels = nnx.List([
            nnx.Param(jax.random.normal(k, (width, width), jnp.float32), **gs.axes("embed", "mlp"))
            for k in keys])
        self.biases = nnx.List([nnx.Param(jnp.zeros((width,), jnp.float32), **gs.axes("mlp"))
                                for _ in range(layers)])


def leaves(model: Stack) -> list[jax.Array]:
    return [var.get_value() for _, var in nnx.to_flat_state(nnx.state(model))]


def resident_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def measured(place, model: Stack, mesh, rule: str) -> tuple[float, float]:
    """Wall seconds and peak resident MB above the start of one placement (values ready)."""
    gc.collect()  # the previous trial's placed copies (NNX modules hold cycles) are freed first
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets VmHWM to the current resident size
    before = resident_kb("VmRSS")
    start = time.perf_counter()
    place(model, mesh, rule)
    jax.block_until_ready(leaves(model))
    # /proc's "kB" are KiB: in MB (1e6 bytes), as the model's size is printed ("(269 MB)"), not MiB.
    return time.perf_counter() - start, (resident_kb("VmHWM") - before) * 1024 / 1e6


def main() -> int:
    parser = new_parser(__doc__)
    jax_platform(parser)  # before jax.devices(): a JAX_PLATFORMS JAX cannot start, named
    parser.add_argument("--layers", type=positive_int, default=16, help="Linear layers of width x width")
    parser.add_argument("--width", type=positive_int, default=2048, help="features of each layer")
    parser.add_argument("--trials", type=positive_int, default=6, help="timed calls per rule and way; medians shown")
    args = parser.parse_args()
    model_fits(parser, 4 * args.layers * args.width * (args.width + 1), f"--layers {args.layers} --width {args.width}",
               "pass a smaller --layers or --width (the defaults, 16 and 2048, build 269 MB)")
    warnings.simplefilter("ignore")  # the experimental-rule warnings, once per call

    base = Stack(args.layers, args.width)
    jax.block_until_ready(leaves(base))
    n_params = sum(x.size for x in leaves(base))
    mesh = gs.make_mesh(model_axis=2)
    # The count itself (in millions, --layers 1 --width 64's 4,160 reads "0.0M float32 parameters (0 MB)")
    print(f"{n_params:,} float32 parameters ({format_bytes(4 * n_params)}), "
          f"{len(jax.devices())} devices, mesh {dict(mesh.shape)}, medians of {args.trials} alternating trials")
    print()
    print("| rule | ours (s) | reference (s) | ratio | ours peak (MB) | reference peak (MB) "
          "| second call (s) | same buffers |")
    print("|---|---|---|---|---|---|---|---|")
    ways = {"ours": gs.shard_model, "reference": reference_shard_model}
    fast, same_all = True, True
    for rule in gs.RULES:
        for place in ways.values():  # warm-up: allocator pools and caches for both
            measured(place, nnx.clone(base), mesh, rule)
        times = {way: [] for way in ways}
        peaks = {way: [] for way in ways}
        second, same = [], True
        for trial in range(args.trials):
            order = list(ways) if trial % 2 == 0 else list(ways)[::-1]
            for way in order:
                # nnx.clone shares base's unplaced buffers: every trial moves the same arrays.
                model = nnx.clone(base)
                seconds, peak = measured(ways[way], model, mesh, rule)
                times[way].append(seconds)
                peaks[way].append(peak)
                if way == "ours":
                    before = leaves(model)
                    second.append(measured(gs.shard_model, model, mesh, rule)[0])
                    same &= all(a is b for a, b in zip(before, leaves(model)))
                model = before = None  # free this trial's placed copies
        ours, ref = statistics.median(times["ours"]), statistics.median(times["reference"])
        fast &= ours / ref <= 1.10
        same_all &= same
        print(f"| {rule} | {ours:.3f} | {ref:.3f} | {ours / ref:.2f} | {statistics.median(peaks['ours']):.0f} | "
              f"{statistics.median(peaks['reference']):.0f} | {statistics.median(second):.4f} | {same} |")
    print()
    if n_params < TARGET_PARAMS:  # at --width 8 the timings are per-call overhead: no target judged
        print(f"time target not judged: {n_params:,} parameters, under the {TARGET_PARAMS / 1e6:.0f}M it is "
              "set for (a placement this small is mostly per-call overhead; the defaults, --layers 16 --width 2048, "
              "judge it); same buffers on a second call:", "met" if same_all else "NOT met")
        return 0 if same_all else 1
    print("targets (ours / reference <= 1.10 for every rule, same buffers on a second call):",
          "met" if fast and same_all else "NOT met")
    return 0 if fast and same_all else 1


if __name__ == "__main__":
    fit_console()  # a console without UTF-8: a table's character escaped, never an UnicodeEncodeError
    sys.exit(main())
