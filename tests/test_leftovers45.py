"""Round 45's leftovers: faults noticed in earlier rounds and left alone, each fixed as a kind.

Each test names what was typed, what happened, and checks what happens now.
"""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _save_step(out, step):
    """A complete checkpoint of ``step`` in ``out/checkpoints`` (a tiny state), as a job's own save."""
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter

    with CheckpointWriter(out / "checkpoints", async_save=False) as writer:
        writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0))


_LIST_THEN_START = """
import sys, jax
from gensbi_sharding.harness.resume_command import holds_checkpoint
from gensbi_sharding.checkpoint import committed_steps
print(holds_checkpoint(sys.argv[1]), committed_steps(sys.argv[1] + "/checkpoints"))
jax.config.update("jax_num_cpu_devices", 3)  # refused (RuntimeError) once the backend started
print(jax.device_count())
"""


def test_listing_a_run_folders_checkpoints_leaves_jax_backend_unstarted(tmp_path):
    # Was: `python launch.py experiment=quick train.resume=auto hydra.run.dir=cont` (the command a preempted
    # continuation, launched with train.resume=<run>, printed) failed: "devices.cpu_count=8 was asked for, but JAX's
    # backend already started with 1 CPU devices": the folder check listed its checkpoints with an Orbax
    # CheckpointManager, whose constructor starts the backend, before the run set its device count (status error).
    out = tmp_path / "cont"
    _save_step(out, 20)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("JAX_NUM_CPU_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", _LIST_THEN_START, str(out)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:2] == ["True [20]", "3"], proc.stdout
