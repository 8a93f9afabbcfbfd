#!/usr/bin/env bash
# What XLA:CPU cannot show, checked on a GPU machine in one short run:
#   1. the dry-run sweep (rule x model_axis) compiled for 8 GPUs, mocked on the one real GPU
#      (JAX's jax_mock_gpu_topology flag: the GPU compiler plans for 8 devices, nothing runs),
#      giving per-device memory and the collectives of one train step; under fsdp XLA's GPU
#      pipeline turns the gradients' all-reduce + slice into a reduce-scatter, which XLA:CPU never does;
#   2. a short real fsdp run on the one GPU, with the device's peak memory (metrics.json).
# Usage (repository root, after `make run` or `make test` installed .venv): OUT=<folder> bash benchmarks/gpu_check.sh
set -u
OUT=${OUT:?set OUT to an empty folder for the results}
# A folder holding an earlier check: its runs would be refused and the old results printed as new.
if [ -e "$OUT" ] && { [ ! -d "$OUT" ] || [ -n "$(ls -A "$OUT")" ]; }; then
  echo "OUT=$OUT is not an empty folder (an earlier check's results are never overwritten): set OUT to a new folder" >&2
  exit 2
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
# The project's venv first, as the README's commands made it (was: the system python3, without jax, unless the user
# had activated it): its python3 runs every step below.
if [ -x .venv/bin/python3 ]; then export PATH="$PWD/.venv/bin:$PATH"; fi
# Don't let JAX take 75 % of the GPU up front, so the peak it reports is what the run used.
export XLA_PYTHON_CLIENT_PREALLOCATE=false

# Every command is bounded (timeout): a wedged driver or a hung compile must not hold the machine.
timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
timeout 120 python3 -c 'import jax, flax, optax; print("jax", jax.__version__, "flax", flax.__version__, "optax", optax.__version__, jax.devices())'

# Which mocked layout gives one process 8 devices: 1 slice x 1 host x 8 devices, else 8 hosts x 1.
TOPOLOGY=""
for t in 1x1x8 1x8x1; do
  if JAX_MOCK_GPU_TOPOLOGY=$t timeout 60 python3 - <<'EOF'
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
n = jax.device_count()
print("mocked devices:", n, "processes:", jax.process_count(), "addressable:", jax.local_device_count())
mesh = Mesh(jax.devices(), ("data",))
f = jax.jit(lambda w: w * 2.0, in_shardings=NamedSharding(mesh, P("data")), out_shardings=NamedSharding(mesh, P("data")))
f.lower(jax.ShapeDtypeStruct((8 * 128,), jnp.float32)).compile()
raise SystemExit(0 if n == 8 else 1)
EOF
  then TOPOLOGY=$t; break; fi
done
echo "mock topology: ${TOPOLOGY:-none works}"

if [ -n "$TOPOLOGY" ]; then
  JAX_MOCK_GPU_TOPOLOGY=$TOPOLOGY timeout 200 python3 launch.py -m dry_run=true \
    rule=replicated,fsdp,tensor mesh.model_axis=1,2,4 hydra.sweep.dir="$OUT/dry_run" hydra.sweep.subdir='${hydra.job.num}'
  echo "dry-run sweep exit $?"
  timeout 60 python3 - "$OUT/dry_run" <<'EOF'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*/metrics.json")):
    m = json.loads(path.read_text())
    report = m.get("dry_run") or {}
    c = {k: (v["count"], v["bytes"]) for k, v in (report.get("collectives") or {}).items()}
    print(path.parent.name, m.get("rule"), m.get("mesh_shape"), "step bytes/device",
          m.get("step_memory_bytes_per_device"), "collectives (count, bytes)", c, "status", m.get("status"))
EOF
fi

timeout 150 python3 launch.py rule=fsdp mesh=auto train.steps=500 eval.num_samples=2000 eval.c2st_folds=3 hydra.run.dir="$OUT/fsdp_run"
echo "fsdp run exit $?"
timeout 60 python3 - "$OUT/fsdp_run/metrics.json" <<'EOF'
import json, os, sys
if not os.path.isfile(sys.argv[1]):
    raise SystemExit(f"no {sys.argv[1]}: the run ended before writing it (its error is above)")
m = json.load(open(sys.argv[1]))
print({k: m.get(k) for k in ("status", "mesh_shape", "device_peak_bytes", "param_bytes_per_device",
                              "median_step_s", "samples_per_s", "c2st", "wall_s")})
EOF
