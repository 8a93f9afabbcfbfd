"""What a GPU-sized GenSBI Flux1 costs per device under each rule, before any GPU hour is spent.

``table``: runs the harness's dry run as one multirun (``launch.py -m dry_run=true
model=flux1 ...`` under every rule and ``mesh.model_axis`` 1, 2, 4, 8 on 8 simulated CPU
devices), reads each job's ``metrics.json`` and prints one table ranked by per-device
memory of the compiled step: the parameter + AdamW state bytes each device holds (from
the plan the job used), XLA's compiled memory analysis (arguments, temporaries) and the
bytes each device sends in one step's collectives.

``init``: peak resident memory of building that Flux1 with ``init_sharded`` (fsdp, (8, 1)
mesh), each way in its own fresh process (``ru_maxrss``), against the process after JAX
started (the baseline) and one full float32 copy of the model, and the peak bytes of live arrays
on the fullest simulated device (``jax.live_arrays()`` sampled every 10 ms: on CPU every simulated
device is the same host memory, so only this column shows what one accelerator would hold);
``--eager`` adds eager construction + ``shard_model`` for comparison.

Run: ``nice -n 10 .venv/bin/python benchmarks/gensbi_scale.py table|init [--eager]``
(the GPU-sized model: depth 8 + 16 single blocks, 12 heads of 64: hidden 768).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# This checkout's package, not whichever copy the environment has installed (another clone, a
# non-editable install): the numbers must be of the code beside this script.
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "benchmarks"))  # its sibling cli_args, also when loaded by file (the tests)

from cli_args import count, fit_console, new_parser, require_gensbi, run_bounded  # noqa: E402 (after the path above)
from gensbi_sharding.harness.override_grammar import hydra_value  # noqa: E402

GPU_SIZED = {"depth": 8, "depth_single_blocks": 16, "num_heads": 12, "axes_dim": [64, 0]}
RULES = ("replicated", "fsdp", "tensor")
MODEL_AXES = (1, 2, 4, 8)
TIMEOUT_S = 3600  # --timeout's default, the least a stopped run is offered


def overrides() -> list[str]:
    return ["model=flux1"] + [f"model.{k}={v}".replace(" ", "") for k, v in GPU_SIZED.items()]


def table(args) -> None:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, str(REPO / "launch.py"), "-m", "dry_run=true", *overrides(), "data.batch_size=256",
               f"rule={','.join(RULES)}", f"mesh.model_axis={','.join(map(str, MODEL_AXES))}",
               f"hydra.sweep.dir={hydra_value(out)}"]  # a TMPDIR Hydra's grammar reads back (spaces, parentheses)
        print("$", " ".join(cmd[1:]), flush=True)
        proc = run_bounded(cmd, timeout_s=args.timeout, least=TIMEOUT_S, what="the dry-run sweep", cwd=out,
                           env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        jobs = [json.loads(p.read_text()) for p in sorted(Path(out).glob("*/metrics.json"))]
    errors = [line for line in proc.stderr.splitlines() if "[ERROR]" in line or "Error" in line]
    last_error = (errors or proc.stderr.splitlines() or ["no output"])[-1]
    if not jobs:  # the sweep stopped before any job (a failed job is named below, from its metrics.json)
        raise SystemExit(f"the dry-run sweep ended with exit {proc.returncode} before any job: {last_error}")
    failed = [job for job in jobs if job.get("status") != "ok"]
    if failed:  # a ranking without them would read as complete; each named by the overrides that made it
        raise SystemExit(f"{len(failed)} of {len(jobs)} dry-run jobs failed: " + "; ".join(
            f"rule={job['config']['rule']['name']} mesh.model_axis={job['config']['mesh']['model_axis']}: "
            f"{job.get('error')}" for job in failed))
    ran = {(job["config"]["rule"]["name"], int(job["config"]["mesh"]["model_axis"])) for job in jobs}
    missing = [f"rule={rule} mesh.model_axis={axis}" for rule in RULES for axis in MODEL_AXES
               if (rule, axis) not in ran]
    if missing:  # the sweep died part way (killed, out of memory): a ranking of the jobs it ran would read as whole
        raise SystemExit(f"the dry-run sweep ended with exit {proc.returncode} after {len(jobs)} of "
                         f"{len(RULES) * len(MODEL_AXES)} jobs, so no ranking; never run: {', '.join(missing)} "
                         f"({last_error})")
    rows = []
    for job in jobs:
        report, mesh = job["dry_run"], job["mesh_shape"]
        rows.append((job["step_memory_bytes_per_device"], job["rule"], tuple(mesh),
                     state_bytes_per_device(job["config"], mesh), report["memory"]["argument_bytes"],
                     report["memory"]["temp_bytes"], job["collective_bytes_per_step"],
                     len(job["fallbacks"]), report["compile_s"]))
    print(f"\nFlux1 {GPU_SIZED} on two_moons, batch {jobs[0]['config']['data']['batch_size']}, "
          f"{count_params()} parameters; per device, ranked by compiled step memory\n")
    print("| rank | rule | mesh (data, model) | params + AdamW (MB) | arguments (MB) | temporaries (MB) "
          "| step total (MB) | collectives sent / step (MB) | fallbacks | compile (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    mb = lambda b: f"{b / 1e6:,.1f}"
    for rank, (total, rule, mesh, state, argument, temp, coll, fallbacks, compile_s) in enumerate(sorted(rows), 1):
        print(f"| {rank} | {rule} | {mesh} | {mb(state)} | {mb(argument)} | {mb(temp)} | {mb(total)} "
              f"| {mb(coll)} | {fallbacks} | {compile_s:.0f} |")


def abstract_state():
    import optax
    from flax import nnx

    from gensbi_sharding.harness.models.flux1 import make_flux1

    def build():
        model = make_flux1(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), **GPU_SIZED)
        return model, nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)

    return nnx.eval_shape(build)


def count_params() -> int:
    import jax
    import numpy as np
    from flax import nnx

    model, _ = abstract_state()
    return sum(int(np.prod(v.shape)) for v in jax.tree.leaves(nnx.state(model, nnx.Param)))


def state_bytes_per_device(config: dict, mesh_shape) -> int:
    """Largest per-device bytes of parameters + optimizer state under the job's plan."""
    import numpy as np
    from flax import nnx
    from jax.sharding import NamedSharding

    from gensbi_sharding import make_mesh, plan_shardings
    from gensbi_sharding.harness.rule_config import as_rule, rule_table

    mesh = make_mesh(model_axis=mesh_shape[1])
    node = abstract_state()
    specs = plan_shardings(node, mesh, as_rule(*rule_table(config["rule"]))).specs
    per_device = {d: 0 for d in mesh.devices.flat}
    for path, var in nnx.to_flat_state(nnx.state(node)):
        value, key = var.get_value(), "/".join(map(str, path))
        if key not in specs or not hasattr(value, "shape"):
            continue
        sharding = NamedSharding(mesh, specs[key])
        nbytes = int(np.prod(sharding.shard_shape(value.shape))) * np.dtype(value.dtype).itemsize
        for device in sharding.device_set:
            per_device[device] += nbytes
    return max(per_device.values())


CHILD = """
import json, os, resource, sys, time, warnings
os.environ["JAX_PLATFORMS"] = "cpu"
import jax
jax.config.update("jax_num_cpu_devices", 8)
from flax import nnx
sys.path.insert(0, {repo!r})
from benchmarks.gensbi_scale import GPU_SIZED
from gensbi_sharding.harness.models.flux1 import make_flux1
from gensbi_sharding import init_sharded, make_mesh, shard_model
warnings.simplefilter("ignore")
mesh = make_mesh(model_axis=1)
spread = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
jax.block_until_ready(jax.device_put(jax.numpy.ones(8), spread))
import gensbi.models.flux1.model  # imported before the baseline, as the harness has it by then
import threading
import numpy as np
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
factory = lambda: make_flux1(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), **GPU_SIZED)
fullest, done = [0], threading.Event()
def sample():  # peak bytes of live arrays on the fullest device: what one accelerator would hold
    while not done.wait(0.01):
        per_device = {{}}
        for array in jax.live_arrays():
            shard = int(np.prod(array.sharding.shard_shape(array.shape))) * array.dtype.itemsize
            for device in array.sharding.device_set:
                per_device[device.id] = per_device.get(device.id, 0) + shard
        fullest[0] = max(fullest[0], *per_device.values(), 0)
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
start, cpu_start = time.perf_counter(), time.process_time()
if {way!r} == "sharded":
    model = init_sharded(factory, mesh, "fsdp")
else:
    model = factory()
    shard_model(model, mesh, "fsdp")
leaves = jax.tree.leaves(nnx.state(model))
jax.block_until_ready(leaves)
wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
done.set()
sampler.join()
print(json.dumps({{"baseline": baseline, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                   "wall_s": wall_s, "cpu_s": cpu_s, "fullest": fullest[0],
                   "model_bytes": sum(x.size * x.dtype.itemsize
                                      for x in jax.tree.leaves(nnx.state(model, nnx.Param)))}}))
"""


def init(args) -> None:
    ways = ["sharded", "eager"] if args.eager else ["sharded"]
    print(f"Flux1 {GPU_SIZED}, fsdp on (8, 1), 8 simulated CPU devices, one fresh process per way\n")
    print("| way | baseline (GB) | peak RSS (GB) | model, one full copy (GB) | peak - baseline (GB) | "
          "fullest device peak (GB) | wall (s) | CPU (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for way in ways:
        proc = run_bounded([sys.executable, "-c", CHILD.format(repo=str(REPO), way=way)], timeout_s=args.timeout,
                           least=TIMEOUT_S, what=f"init, way {way}", cwd=REPO, capture_output=True, text=True,
                           check=False)
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        gb = lambda b: f"{b / 1e9:.2f}"
        print(f"| {way} | {gb(r['baseline'])} | {gb(r['peak'])} | {gb(r['model_bytes'])} | "
              f"{gb(r['peak'] - r['baseline'])} | {gb(r['fullest'])} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} |",
              flush=True)


def main() -> None:
    parser = new_parser(__doc__)
    parser.add_argument("what", choices=["table", "init"],
                        help="table: the dry-run multirun; init: sharded init memory")
    parser.add_argument("--eager", action="store_true", help="init: also eager construction + shard_model")
    parser.add_argument("--timeout", type=count(example=TIMEOUT_S), default=TIMEOUT_S,
                        help="seconds the dry-run sweep (table), or each way (init), may run")
    args = parser.parse_args()
    if args.what == "table" and args.eager:
        parser.error("--eager applies to init only (table runs the dry run, which builds nothing)")
    require_gensbi(parser)
    if args.what == "table":
        os.environ["JAX_PLATFORMS"] = "cpu"
        import jax

        jax.config.update("jax_num_cpu_devices", 8)
        table(args)
    else:
        init(args)


if __name__ == "__main__":
    fit_console()  # a console without UTF-8: a table's character escaped, never an UnicodeEncodeError
    main()
