"""Several processes on CPU and JAX's persistent compilation cache: a second run of the same programs trains."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = ["experiment=quick", "rule=fsdp", "mesh.model_axis=2", "train.steps=8", "train.log_every=4",
        "eval.enabled=false", "distributed=local", "distributed.local_processes=2"]


@pytest.mark.slow  # two runs of two local processes each; each bounded by 200 s
def test_a_second_local_run_from_a_filled_compilation_cache_trains_to_its_end(tmp_path):
    # With jax/jaxlib 0.12.1 (pyproject.toml keeps them below it): the first run compiled its programs into the cache
    # (every program: a 0 s threshold); the second loaded them and both processes waited forever in their first
    # all-reduce across processes (gloo, every rank waiting to receive): the second run timed out here.
    cache = tmp_path / "cache"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_COMPILATION_CACHE_DIR": str(cache),
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    env.pop("HYDRA_FULL_ERROR", None)
    for run in ("first", "second"):
        out = tmp_path / run
        done = subprocess.run([sys.executable, str(REPO / "launch.py"), *TINY, f"hydra.run.dir={out}"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=200)
        assert done.returncode == 0, done.stderr[-3000:]
        metrics = json.loads((out / "metrics.json").read_text())
        assert (metrics["status"], metrics["final_step"], metrics["process_count"]) == ("ok", 8, 2), metrics
        if run == "first":  # the second run's programs are the cache's
            assert any(entry.name.startswith("jit_train_step") for entry in cache.iterdir()), sorted(cache.iterdir())
