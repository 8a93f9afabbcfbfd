"""Peak memory and wall time of ``init_sharded`` against eager construction + ``shard_model``.

Each way of building the model runs in its own fresh process on 8 simulated CPU
devices; the child measures its peak resident memory (``ru_maxrss``) and the
wall time from the first constructor call until every array is ready, then
hashes every variable so the parent can check the ways agree bit for bit. The
model is the registered residual MLP; the default (width 2048, depth 8,
mlp_ratio 4) holds 16 kernels of 2048 x 8192, about 1.07 GB of float32.

Ways: ``eager`` (``factory()`` then ``shard_model``), ``sharded``
(``init_sharded``), and with ``--naive`` a single ``jax.jit`` of the whole
constructor with output shardings (the approach ``init_sharded`` improves on).
Each way runs ``--repeats`` times in fresh processes, interleaved; the table shows
medians and the range of the peaks: the eager peak varies from run to run (its
transfers are asynchronous, and how much of the unplaced model is still resident
when the last copy lands varies). ``init_sharded``'s peak is the process after JAX
started plus the model's shards plus its compiled programs, and varies little.

Run: ``.venv/bin/python benchmarks/init.py [--width 2048 --depth 8] [--rule fsdp --model-axis 1]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

N_DEVICES = 8


def child(args: argparse.Namespace) -> None:
    os.environ["JAX_PLATFORMS"] = "cpu"
    import hashlib
    import resource
    import warnings

    import jax

    jax.config.update("jax_num_cpu_devices", N_DEVICES)
    import numpy as np
    from flax import nnx
    from jax.sharding import NamedSharding

    from gensbi_sharding.harness.registry import get_model
    from gensbi_sharding.init import init_sharded
    from gensbi_sharding.sharding import RULES, _path_str, make_mesh, plan_shardings, shard_model

    warnings.simplefilter("ignore")
    mesh = make_mesh(model_axis=args.model_axis)
    jax.block_until_ready(jax.numpy.zeros(8) + 1)  # start the backend before the baseline
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def factory():
        return get_model("mlp")(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), width=args.width,
                                depth=args.depth, mlp_ratio=args.mlp_ratio)

    start = time.perf_counter()
    if args.child == "eager":
        model = factory()
        shard_model(model, mesh, args.rule)
    elif args.child == "sharded":
        model = init_sharded(factory, mesh, args.rule)
    else:  # naive: the whole constructor in one program
        abstract = nnx.eval_shape(factory)
        graphdef, state = nnx.split(abstract)
        specs, _ = plan_shardings(abstract, mesh, dict(RULES[args.rule]),
                                  honor_annotations=args.rule != "replicated")
        flat = list(nnx.to_flat_state(state))

        def build():
            return [v.get_value() for _, v in nnx.to_flat_state(nnx.split(factory())[1])]

        out = [NamedSharding(mesh, specs[_path_str(p)]) for p, _ in flat]
        for (_, var), value in zip(flat, jax.jit(build, out_shardings=out)()):
            var.set_value(value)
        model = nnx.merge(graphdef, state)
    jax.block_until_ready(nnx.state(model))
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    digest, total = hashlib.sha256(), 0
    for path, var in sorted(nnx.to_flat_state(nnx.state(model)), key=lambda kv: _path_str(kv[0])):
        value = var.get_value()
        digest.update(_path_str(path).encode() + str(value.sharding.spec).encode())
        digest.update(np.asarray(value).tobytes())
        total += value.nbytes
    print(json.dumps(dict(way=args.child, wall_s=wall, peak=peak, base=base, model_bytes=total,
                          digest=digest.hexdigest())))


def run_child(way: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", way, "--width", str(args.width),
           "--depth", str(args.depth), "--mlp-ratio", str(args.mlp_ratio), "--rule", args.rule,
           "--model-axis", str(args.model_axis)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{way} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def median_run(runs: list[dict]) -> dict:
    """Median wall time and peak of repeated runs of one way, with the peaks' range."""
    digests = {r["digest"] for r in runs}
    out = dict(runs[0], wall_s=statistics.median(r["wall_s"] for r in runs),
               peak=statistics.median(r["peak"] for r in runs),
               base=statistics.median(r["base"] for r in runs),
               peak_min=min(r["peak"] for r in runs), peak_max=max(r["peak"] for r in runs))
    out["digest"] = digests.pop() if len(digests) == 1 else "runs disagree"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--mlp-ratio", type=int, default=4)
    parser.add_argument("--rule", default="fsdp")
    parser.add_argument("--model-axis", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per way; medians shown")
    parser.add_argument("--naive", action="store_true", help="also time one jit of the whole constructor")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    ways = ["eager", "sharded"] + (["naive"] if args.naive else [])
    runs = {way: [] for way in ways}
    for _ in range(args.repeats):  # interleaved, so a busy spell of the machine hits every way
        for way in ways:
            runs[way].append(run_child(way, args))
    results = [median_run(runs[way]) for way in ways]
    eager = results[0]
    gb = 1e9
    print(f"mlp width={args.width} depth={args.depth} mlp_ratio={args.mlp_ratio}: "
          f"{eager['model_bytes'] / gb:.2f} GB float32; rule {args.rule!r} on "
          f"({N_DEVICES // args.model_axis}, {args.model_axis}), {N_DEVICES} simulated CPU devices")
    print(f"medians of {args.repeats} fresh process(es) per way; peak = ru_maxrss, base = after JAX start")
    print(f"{'way':<8} {'wall s':>8} {'peak GB':>8} {'(min-max)':>11} {'above base GB':>14} "
          f"{'peak ratio':>11} {'wall ratio':>11}  same values")
    for r in results:
        above = (r["peak"] - r["base"]) / gb
        spread = f"{r['peak_min'] / gb:.2f}-{r['peak_max'] / gb:.2f}"
        print(f"{r['way']:<8} {r['wall_s']:>8.2f} {r['peak'] / gb:>8.2f} {spread:>11} {above:>14.2f} "
              f"{r['peak'] / eager['peak']:>11.2f} {r['wall_s'] / eager['wall_s']:>11.2f}  "
              f"{'yes' if r['digest'] == eager['digest'] else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
