"""One JAX process of a multi-process test; ``tests/test_multihost.py`` starts several.

Usage: ``python multihost_worker.py CASE PORT PROCESS_ID NUM_PROCESSES``. Each process
simulates 4 CPU devices, joins the others on loopback with gloo collectives, runs
CASE and prints one line ``RESULT <json>`` that the test reads.

Every wait is bounded, so a dead, missing or failing peer makes this process exit
with an error instead of hanging: ``initialization_timeout`` (a peer never joins),
``heartbeat_timeout_seconds`` (a peer dies: the coordination service aborts the
others) and ``shutdown_timeout_seconds`` (a process leaving on a Python error waits
at the shutdown barrier for the others, which sit in a collective; at the deadline
both abort). JAX's defaults are 300, 100 and 300 seconds.
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

LOCAL_DEVICES = 4
INIT_TIMEOUT_S = 20  # every process must join within this
HEARTBEAT_S = 5  # a peer silent this long is dead: the survivors abort
SHUTDOWN_S = 5  # a process leaving on an error waits this long for the others, then aborts


def start(port: int, process_id: int, num_processes: int) -> None:
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", LOCAL_DEVICES)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=num_processes,
                               process_id=process_id, initialization_timeout=INIT_TIMEOUT_S,
                               heartbeat_timeout_seconds=HEARTBEAT_S,
                               shutdown_timeout_seconds=SHUTDOWN_S)


def error_of(fn) -> str | None:
    try:
        fn()
    except ValueError as err:
        return str(err)
    return None


def case_placement(p: int) -> dict:
    """Global shapes, gathered values, addressable rows and model groups, on this process."""
    from jax.experimental import multihost_utils

    from gensbi_sharding import (DataPartitionType, check_model_groups_local,
                                           host_to_global_array)
    from gensbi_sharding import make_mesh, mesh_context
    from jax.sharding import PartitionSpec as P

    out = {}
    with mesh_context(make_mesh()):
        x = host_to_global_array({"x": np.full((4, 3), p)})["x"]
    out["full_shape"] = list(x.shape)
    out["full_gathered"] = np.asarray(multihost_utils.process_allgather(x, tiled=True)).tolist()
    out["full_local_rows"] = sorted(
        (shard.index[0].start, np.asarray(shard.data).tolist()) for shard in x.addressable_shards)

    mesh2 = make_mesh(model_axis=2)
    out["model_group_processes"] = [[d.process_index for d in row] for row in mesh2.devices]
    y = host_to_global_array({"x": np.full((6, 3), p)}, partition=DataPartitionType.DATA, mesh=mesh2)
    out["data_shape"] = list(y["x"].shape)
    out["data_error"] = error_of(lambda: host_to_global_array(
        {"x": np.full((3, 3), p)}, partition=DataPartitionType.DATA, mesh=mesh2))
    out["spanning_error"] = error_of(lambda: check_model_groups_local(make_mesh(model_axis=8)))
    out["local_groups_error"] = error_of(lambda: check_model_groups_local(mesh2))
    # A replicated leaf is whole on every device, from each process's own copy: the copies are compared too.
    rows = np.full((4, 3), p)
    same = host_to_global_array({"x": rows, "scale": np.asarray(2.0, np.float32)}, mesh=make_mesh())["scale"]
    out["replicated_same"] = float(np.asarray(same.addressable_data(0)))
    out["replicated_error"] = error_of(lambda: host_to_global_array(
        {"x": rows, "scale": np.asarray(float(p), np.float32)}, mesh=make_mesh()))
    out["numpy_scalar_error"] = error_of(lambda: host_to_global_array(
        {"x": rows, "scale": np.float32(p)}, mesh=make_mesh()))
    # Split only over "model", whose groups are each inside one process: each process's copy is taken whole too.
    out["group_replicated_error"] = error_of(lambda: host_to_global_array(
        {"x": rows, "table": np.full((2, 4), float(p), np.float32)}, mesh=mesh2,
        partition={"x": P(("data", "model")), "table": P(None, "model")}))
    # replicate of an array split over this process's devices only, onto a mesh over both processes: our refusal
    # (was JAX's "... a Sharding which represents addressable devices"), and the fix it names, which places it.
    import jax

    from gensbi_sharding import replicate

    local = jax.device_put(np.arange(4.0, dtype=np.float32), jax.sharding.NamedSharding(
        jax.sharding.Mesh(np.array(jax.local_devices()), ("d",)), P("d")))
    out["replicate_local_error"] = error_of(lambda: replicate({"w": local}, make_mesh()))
    fixed = host_to_global_array({"w": local}, partition="replicated", mesh=make_mesh())["w"]
    out["replicate_fixed"] = [str(fixed.sharding.spec), np.asarray(fixed.addressable_data(0)).tolist()]
    # replicate (shard_batch) of NumPy values unlike on the two processes: our refusal naming the leaf (was JAX's
    # AssertionError "... is not the same on each process"), and the fix it names for each process's own rows.
    from gensbi_sharding import shard_batch

    own = {"b": np.ones(8, np.float32), "w": np.full((8,), float(p), np.float32)}
    for name, place in (("replicate", replicate), ("shard_batch", shard_batch)):
        try:
            out[f"{name}_unlike_error"] = place(own, make_mesh()) and None
        except (ValueError, AssertionError) as err:  # JAX's AssertionError before: kept, not the worker ended
            out[f"{name}_unlike_error"] = f"{type(err).__name__}: {err}"
    rows = host_to_global_array(own, partition="data", mesh=make_mesh())["w"]
    out["unlike_fixed"] = [list(rows.shape), np.asarray(multihost_utils.process_allgather(rows, tiled=True)).tolist()]
    # The harness's own check: the processes' settings (each composed from its own command line).
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.distributed_checks import processes_config_problem

    out["config_same"] = processes_config_problem(OmegaConf.create(
        {"seed": 0, "verbose": p == 1, "distributed": {"process_id": p}}))  # per-process settings may differ
    out["config_problem"] = processes_config_problem(OmegaConf.create(
        {"seed": 7 * p, "train": {"learning_rate": 0.001}, "distributed": {"process_id": p}}))
    # The harness's z-score statistics over the processes' rows (x ~ 1000 +- 1, each process half of them).
    from gensbi_sharding.harness.simulation_data import global_stats

    every = (1000.0 + np.random.default_rng(0).standard_normal((64, 3))).astype(np.float32)
    (total,), (mean, std) = global_stats([p + 1], [every[32 * p:32 * (p + 1)]], 2)
    out["zscore"] = {"total": total, "mean": mean.tolist(), "std": std.tolist(), "every": every.tolist()}
    # A data factory of one's own, one shard per process: ignoring process_index (the same pairs on every process)
    # is refused on each process alike; honouring it (each its own pairs) is not.
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.own_data import check_shards
    from gensbi_sharding.harness.simulation_data import SimulationData

    zeros, ones = np.zeros(2, np.float32), np.ones(2, np.float32)
    for key, seed in (("shards_alike", 0), ("shards_own", p)):
        pairs = np.random.default_rng(seed).standard_normal((8, 2)).astype(np.float32)
        shard = SimulationData("mine", pairs[:6], pairs[:6] + 1, pairs[6:], pairs[6:] + 1, observation=zeros,
                               reference_samples=np.zeros((0, 2), np.float32), theta_mean=zeros, theta_std=ones,
                               x_mean=zeros, x_std=ones)
        try:
            out[key] = check_shards([shard], "mine", num_simulations=16, shards=2)
        except ConfigError as err:
            out[key] = str(err)
    # A factory refused on process 1 only (its own shard holds NaN; or it raised): agreed by both processes in the
    # shards' one all-gather, each ending with process 1's refusal (was: process 0 waited in it for the heartbeat).
    from gensbi_sharding.harness.own_data import agreed_shards, check_factory_result

    def shard(refuse: bool, crash: bool = False):
        def make():
            if crash and p == 1:
                raise ValueError("the simulator's file is missing")
            pairs = np.random.default_rng(p).standard_normal((8, 2)).astype(np.float32)
            pairs[0, 0] = np.nan if refuse and p == 1 else pairs[0, 0]
            return [check_factory_result(SimulationData(
                "mine", pairs[:6], pairs[:6] + 1, pairs[6:], pairs[6:] + 1, observation=zeros,
                reference_samples=np.zeros((0, 2), np.float32), theta_mean=zeros, theta_std=ones, x_mean=zeros,
                x_std=ones), "mine")]
        return make

    for key, make in (("one_refuses", shard(True)), ("one_crashes", shard(False, crash=True)),
                      ("none_refuses", shard(False))):
        try:
            out[key] = len(agreed_shards(make, "mine", num_simulations=16, shards=2))
        except Exception as err:
            out[key] = f"{type(err).__name__}: {err}"
    # A last collective after the error: the processes are still in step.
    multihost_utils.sync_global_devices("placement done")
    return out


def case_uneven(p: int) -> dict:
    """Process 1 passes too few rows: it raises; process 0, already in a collective, must not hang."""
    from jax.experimental import multihost_utils

    from gensbi_sharding import host_to_global_array
    from gensbi_sharding import make_mesh

    host_to_global_array({"x": np.zeros((4 if p == 0 else 3, 3))}, mesh=make_mesh())
    multihost_utils.sync_global_devices("never reached by process 1")
    return {"unexpected": "the collective completed without process 1"}


def dies(victim: int):
    """A case where process ``victim`` dies before a collective the others wait in."""
    def case(p: int) -> dict:
        from jax.experimental import multihost_utils

        if p == victim:
            os._exit(1)
        multihost_utils.sync_global_devices("never reached by the dead process")
        return {"unexpected": f"the collective completed without process {victim}"}
    return case


def mismatch(kind: str):
    """Process 1 passes other rows, dtype, tree or trailing size than process 0: every process raises."""
    def case(p: int) -> dict:
        from gensbi_sharding import host_to_global_array, make_mesh

        x = {"x": np.ones((4, 3), np.float32)}
        if p == 1:
            x = {"rows": {"x": np.ones((8, 3), np.float32)}, "dtype": {"x": np.ones((4, 3), np.int32)},
                 "tree": {**x, "y": np.ones((4,), np.float32)}, "trailing": {"x": np.ones((4, 5), np.float32)},
                 "local": {"x": np.ones((3, 3), np.float32)}}[kind]
        return {"error": error_of(lambda: host_to_global_array(x, mesh=make_mesh()))}
    return case


def case_unchecked(p: int) -> dict:
    """check_processes=False compares nothing: other rows on process 1 (checked: both raise) go through."""
    from gensbi_sharding import host_to_global_array, make_mesh

    x = np.ones((4 * (p + 1), 3), np.float32)
    return {"shape": list(host_to_global_array({"x": x}, mesh=make_mesh(), check_processes=False)["x"].shape)}


def case_model_axis_first(p: int) -> dict:
    """A hand-built mesh whose "model" axis comes first: each group is one device of each process."""
    import jax
    from jax.sharding import Mesh

    from gensbi_sharding import check_model_groups_local

    mesh = Mesh(np.array(jax.devices()).reshape(2, 2, 2), ("model", "data", "replica"))
    return {"error": error_of(lambda: check_model_groups_local(mesh))}


def case_describe(p: int) -> dict:
    """describe of an fsdp-split layer: every process's devices, from the shardings."""
    import warnings

    from flax import nnx

    from gensbi_sharding import bytes_per_device, describe, init_sharded, make_mesh, partitioned

    mesh = make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layer = init_sharded(lambda: nnx.Linear(4, 8, rngs=nnx.Rngs(0), kernel_init=partitioned(
            nnx.initializers.lecun_normal(), ("embed", "mlp"))), mesh, "fsdp")
    report = describe(layer, mesh)
    return {"per_device": report.bytes_per_device, "totals": report.table().splitlines()[1],
            "local": bytes_per_device(layer)}


def case_commit_fails(p: int) -> dict:
    """Process 0's commit (rename) of checkpoint step 2 fails, as when the folder turns read-only: every process
    raises at its next save, naming step 2, within seconds (was: process 1 waited in Orbax's barrier for 20 min)."""
    import shutil
    import tempfile
    import time

    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec as P

    from gensbi_sharding import make_mesh
    from gensbi_sharding.checkpoint import CheckpointWriter, committed_steps

    folder = Path(tempfile.gettempdir()) / f"gensbi_commit_fails_{PORT[0]}"
    rename = os.rename

    def refused(src, dst, *args, **kwargs):
        if str(src).endswith(".orbax-checkpoint-tmp") and Path(dst).name == "2":
            raise PermissionError(1, "Operation not permitted", str(src))
        return rename(src, dst, *args, **kwargs)

    replicated = NamedSharding(make_mesh(), P())
    state = {"w": jax.make_array_from_callback((4,), replicated, lambda index: np.ones(4, np.float32)[index])}
    data = np.asarray(jax.random.key_data(jax.random.key(0)))
    key = jax.random.wrap_key_data(jax.make_array_from_callback(data.shape, replicated, lambda index: data[index]))
    if p == 0:  # a group on an earlier run's port: its steps would be refused as "already saved"
        shutil.rmtree(folder, ignore_errors=True)
    multihost_utils.sync_global_devices("commit_fails: a fresh folder")
    CheckpointWriter.commit_timeout_s = 3.0
    writer = CheckpointWriter(folder)
    writer.save(1, state, key)
    writer.steps()
    if p == 0:  # the primary process commits (renames) every step
        os.rename = refused
    start, error = time.monotonic(), None
    writer.save(2, state, key)
    try:
        writer.save(3, state, key)
    except RuntimeError as err:
        error = str(err)
    seconds = time.monotonic() - start
    os.rename = rename
    writer.close()
    return {"error": error, "seconds": seconds, "steps": committed_steps(folder), "folder": str(folder)}


def case_local_key(p: int) -> dict:
    """CheckpointWriter.save of a key on this process's devices alone (jax.random.key(0)): the refusal, then its fix
    evaluated as written, which saves (was: Orbax's "Cannot serialize host local jax.Array ... Consider using
    fully_replicated_host_local_array_to_global_array in orbax/checkpoint/utils.py")."""
    import shutil
    import tempfile

    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec as P

    import gensbi_sharding
    from gensbi_sharding.checkpoint import CheckpointWriter, committed_steps

    folder = Path(tempfile.gettempdir()) / f"gensbi_local_key_{PORT[0]}"
    if p == 0:
        shutil.rmtree(folder, ignore_errors=True)
    multihost_utils.sync_global_devices("local_key: a fresh folder")
    mesh = gensbi_sharding.make_mesh()
    state = {"w": jax.make_array_from_callback((4,), NamedSharding(mesh, P()), lambda i: np.ones(4, np.float32)[i])}
    key, said = jax.random.key(0), None
    with CheckpointWriter(folder, async_save=False) as writer:
        try:
            writer.save(1, state, key)
        except ValueError as err:
            said = str(err)
        fix = said.rsplit("key = ", 1)[1] if said and "key = " in said else "key"
        writer.save(1, state, eval(fix, {"jax": jax, "gensbi_sharding": gensbi_sharding, "key": key, "mesh": mesh}))
    return {"said": said, "steps": committed_steps(folder), "folder": str(folder)}


CASES = {"describe": case_describe, "unchecked": case_unchecked, "model_axis_first": case_model_axis_first,
         "placement": case_placement, "uneven": case_uneven, "local_key": case_local_key,
         **{f"mismatch_{kind}": mismatch(kind) for kind in ("rows", "dtype", "tree", "trailing", "local")},
         "worker_dies": dies(1), "coordinator_dies": dies(0), "commit_fails": case_commit_fails}
PORT = [None]  # the group's coordinator port, the same in every process: names the shared checkpoint folder


def main(argv: list[str]) -> None:
    case, port, process_id, num_processes = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    PORT[0] = port
    start(port, process_id, num_processes)
    result = CASES[case](process_id)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
