"""Peak memory and wall time of ``init_sharded`` against eager construction + ``shard_model``.

Each way of building the model runs in its own fresh process on 8 simulated CPU devices
(interleaved, ``--repeats`` times; the table shows medians). The child measures:

- its peak resident memory (``ru_maxrss``) and the resident memory after JAX started;
- the peak bytes of live arrays on its fullest device (``jax.live_arrays()`` sampled every
  10 ms): on CPU all simulated devices share the host's memory, so the resident peak
  cannot show what one accelerator would have to hold, this column does;
- the wall time from the first constructor call until every array is ready, and the CPU
  time it took (user + system, all threads: steadier than wall time on a shared machine).

It saves every variable (first repeat) so the parent prints the largest difference of
each way to eager values. The model is the registered residual MLP; the default (width
2048, depth 8, mlp_ratio 4) holds 16 kernels of 2048 x 8192, about 1.07 GB of float32.

Ways: ``eager`` (``factory()`` then ``shard_model``), ``sharded`` (``init_sharded``), and
with ``--naive`` one ``jax.jit`` of the whole constructor with the planned output shardings.

Run: ``.venv/bin/python benchmarks/init.py [--repeats 3] [--width 2048 --depth 8] [--rule fsdp --model-axis 1]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

# This checkout's package, not whichever copy the environment has installed (another clone, a
# non-editable install): the numbers must be of the code beside this script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cli_args import fit_console, model_axis, model_fits, new_parser, positive_int, run_bounded  # noqa: E402

N_DEVICES = 8
TIMEOUT_S = 1800  # --timeout's default, the least a stopped run is offered


def child(args: argparse.Namespace) -> None:
    os.environ["JAX_PLATFORMS"] = "cpu"
    import resource
    import warnings

    import jax

    jax.config.update("jax_num_cpu_devices", N_DEVICES)
    import numpy as np
    from flax import nnx

    from gensbi_sharding import init_sharded, make_mesh, plan_shardings, shard_model
    from gensbi_sharding.harness.registry import get_model
    from gensbi_sharding.nodes import path_key

    warnings.simplefilter("ignore")
    mesh = make_mesh(model_axis=args.model_axis)
    jax.block_until_ready(jax.numpy.zeros(8) + 1)  # start the backend before the baseline
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    fullest, done = [0], threading.Event()

    def sample():  # peak bytes of live arrays on the fullest device
        while not done.wait(0.01):
            per_device: dict = {}
            for array in jax.live_arrays():
                shard = int(np.prod(array.sharding.shard_shape(array.shape))) * array.dtype.itemsize
                for device in array.sharding.device_set:
                    per_device[device.id] = per_device.get(device.id, 0) + shard
            fullest[0] = max(fullest[0], *per_device.values(), 0)

    def factory():
        return get_model("mlp")(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), width=args.width,
                                depth=args.depth, mlp_ratio=args.mlp_ratio)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start, cpu_start = time.perf_counter(), time.process_time()
    if args.child == "eager":
        model = factory()
        shard_model(model, mesh, args.rule)
    elif args.child == "sharded":
        model = init_sharded(factory, mesh, args.rule)
    else:  # naive: the whole constructor in one program
        abstract = nnx.eval_shape(factory)
        graphdef, state = nnx.split(abstract)
        plan = plan_shardings(abstract, mesh, args.rule)
        flat = list(nnx.to_flat_state(state))

        def build():
            return [v.get_value() for _, v in nnx.to_flat_state(nnx.split(factory())[1])]

        out = [plan.sharding(path_key(p)) for p, _ in flat]
        for (_, var), value in zip(flat, jax.jit(build, out_shardings=out)()):
            var.set_value(value)
        model = nnx.merge(graphdef, state)
    jax.block_until_ready(nnx.state(model))
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    done.set()
    sampler.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    values = {path_key(p): np.asarray(v.get_value()) for p, v in nnx.to_flat_state(nnx.state(model))}
    if args.save:
        np.savez(args.save, **{k.replace("/", "."): v for k, v in values.items()})
    print(json.dumps(dict(way=args.child, wall_s=wall, cpu_s=cpu, peak=peak, base=base, fullest=fullest[0],
                          model_bytes=sum(v.nbytes for v in values.values()))))


def run_child(way: str, args: argparse.Namespace, save: str | None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", way, "--width", str(args.width),
           "--depth", str(args.depth), "--mlp-ratio", str(args.mlp_ratio), "--rule", args.rule,
           "--model-axis", str(args.model_axis)] + (["--save", save] if save else [])
    done = run_bounded(cmd, timeout_s=args.timeout, least=TIMEOUT_S, what=f"the {way} way", capture_output=True,
                       text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{way} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def largest_difference(path: str, reference: str) -> float:
    import numpy as np

    with np.load(path) as got, np.load(reference) as want:
        return max(float(np.max(np.abs(got[k].astype(np.float64) - want[k]))) if want[k].size else 0.0
                   for k in want.files)


def main() -> int:
    parser = new_parser(__doc__)
    parser.add_argument("--width", type=positive_int, default=2048, help="mlp width")
    parser.add_argument("--depth", type=positive_int, default=8, help="mlp depth")
    parser.add_argument("--mlp-ratio", type=positive_int, default=4, help="hidden width / width")
    parser.add_argument("--rule", default="fsdp", choices=("replicated", "fsdp", "tensor"), help="sharding rule")
    parser.add_argument("--model-axis", type=model_axis(N_DEVICES), default=1, help="size of the mesh's model axis")
    parser.add_argument("--repeats", type=positive_int, default=3, help="fresh processes per way; medians shown")
    parser.add_argument("--naive", action="store_true", help="also time one jit of the whole constructor")
    parser.add_argument("--timeout", type=positive_int, default=TIMEOUT_S,
                        help="seconds each fresh process may run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--save", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    # Its blocks' kernels alone (width x width * mlp_ratio, twice per block); the default is 1.07 GB
    model_fits(parser, 4 * args.depth * 2 * args.mlp_ratio * args.width ** 2,
               f"--width {args.width} --depth {args.depth} --mlp-ratio {args.mlp_ratio}",
               "pass a smaller --width or --depth (the defaults, 2048 and 8, build 1.07 GB)")
    ways = ["eager", "sharded"] + (["naive"] if args.naive else [])
    runs = {way: [] for way in ways}
    with tempfile.TemporaryDirectory() as tmp:
        saved = {way: os.path.join(tmp, f"{way}.npz") for way in ways}
        for repeat in range(args.repeats):  # interleaved, so a busy spell of the machine hits every way
            for way in ways:
                runs[way].append(run_child(way, args, saved[way] if repeat == 0 else None))
        difference = {way: largest_difference(saved[way], saved["eager"]) for way in ways}
    # Sizes in their own unit: a small model (--width 8 --depth 1) read "0.00 GB float32" and a fullest device
    # peak of "0.000" GB, as if it held nothing. Imported after the children ran: the parent needs JAX for nothing else
    from gensbi_sharding.harness.units import format_bytes

    gb = 1e9
    keys = ("wall_s", "cpu_s", "peak", "base", "fullest")
    median = {way: {key: statistics.median(r[key] for r in runs[way]) for key in keys} for way in ways}
    eager = median["eager"]
    print(f"mlp width={args.width} depth={args.depth} mlp_ratio={args.mlp_ratio}: "
          f"{format_bytes(runs['eager'][0]['model_bytes'])} float32; rule {args.rule!r} on "
          f"({N_DEVICES // args.model_axis}, {args.model_axis}), {N_DEVICES} simulated CPU devices")
    print(f"medians of {args.repeats} fresh process(es) per way; resident peak = ru_maxrss, "
          f"base = resident after JAX started ({eager['base'] / gb:.2f} GB)")
    print()
    print("| way | wall (s) | wall ratio | CPU (s) | CPU ratio | resident peak (GB) | peak ratio | above base (GB) "
          "| fullest device peak | largest difference to eager |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for way in ways:
        m = median[way]
        print(f"| {way} | {m['wall_s']:.2f} | {m['wall_s'] / eager['wall_s']:.2f} | {m['cpu_s']:.2f} | "
              f"{m['cpu_s'] / eager['cpu_s']:.2f} | {m['peak'] / gb:.2f} | "
              f"{m['peak'] / eager['peak']:.2f} | {(m['peak'] - m['base']) / gb:.2f} | {format_bytes(m['fullest'])} | "
              f"{difference[way]:.3g} |")
    return 0


if __name__ == "__main__":
    fit_console()  # a console without UTF-8: a table's character escaped, never an UnicodeEncodeError
    sys.exit(main())
