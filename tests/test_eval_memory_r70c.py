"""The evaluation's sampler integrates eval.batch_size rows at once, and the dry run says its memory (round 70).

Was: the posterior sampler integrated all eval.num_samples rows (10,000) in one program while training and the dry
run knew only data.batch_size: measured on 8 simulated devices, the GPU-sized Flux1 needs 4.0 GB of temporaries a
device to sample 10,000 rows at once against its train step's 2.2 GB (1024 rows), so a model that trained could run
out of device memory in its evaluation, the training lost. Now the rows go in blocks of eval.batch_size (2048: 0.42
GB), the same noise rows giving the same samples to float32 rounding (bit for bit at one size), and the dry run
reports the sampler's memory.
"""

import json
import logging

import numpy as np
import pytest
from flax import nnx

from faults_helpers import compose_tiny, run_tiny
from gensbi_sharding import make_mesh
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.config_checks import validate
from gensbi_sharding.harness.flow_sampler import FlowSampler
from gensbi_sharding.harness.models.mlp import make_mlp


def _sampler(rows, batch_size, mesh):
    model = make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), width=16, depth=1, time_embed_dim=8)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return FlowSampler(lambda p, th, xx, t: nnx.merge(graphdef, p, rest)(th, xx, t), rows=rows, num_steps=4,
                       mesh=mesh, params=params, batch_size=batch_size)


@pytest.mark.slow  # samples a tiny model in blocks and whole, compiling each: ~2 s on 2 cores
@pytest.mark.parametrize("mesh_shape", [None, (8, 1)])
def test_blocks_of_rows_give_the_samples_of_one_block(mesh_shape):
    mesh = None if mesh_shape is None else make_mesh()
    noise = np.random.default_rng(0).standard_normal((100, 2)).astype(np.float32)
    observation = np.array([0.1, -0.2, 0.3], np.float32)
    whole, blocks = _sampler(100, 100, mesh), _sampler(100, 24, mesh)
    assert whole.block == 100 and blocks.block == 24  # 5 blocks, the last of 4 rows padded
    # The same noise rows, each integrated alone: equal up to float32 rounding. Not bit for bit: XLA's CPU matmul
    # rounds a row's dot products by the block's row count (a 512-row program and 128-row blocks differ by 2.4e-7)
    np.testing.assert_allclose(blocks(observation, noise), whole(observation, noise), rtol=0, atol=1e-6)
    assert np.array_equal(blocks(observation, noise), blocks(observation, noise))  # at one eval.batch_size: exact


@pytest.mark.slow
def test_the_sampler_program_follows_the_block_not_all_the_rows():
    mesh = make_mesh()
    temps = {rows: _sampler(4096, rows, mesh).compiled_block(3, 2).memory_analysis().temp_size_in_bytes
             for rows in (4096, 512)}
    assert temps[512] * 4 < temps[4096]  # was: one program of every row, whatever the memory


def test_eval_batch_size_below_1_is_refused_with_a_fix_that_passes():
    with pytest.raises(ConfigError, match=r"eval.batch_size=0 must be >= 1; e.g. eval.batch_size=2048"):
        validate(compose_tiny("eval.batch_size=0"))
    validate(compose_tiny("eval.batch_size=2048"))
    assert compose_tiny().eval.batch_size == 2048


@pytest.mark.slow
def test_the_dry_run_reports_the_samplers_memory_per_device(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        metrics = run_tiny(tmp_path / "blocks", "dry_run=true", "eval.enabled=true", "eval.num_samples=1000",
                           "eval.batch_size=256")
    sampler = metrics["dry_run"]["sampler"]
    assert sampler["rows"] == 256 and sampler["memory"]["temp_bytes"] > 0
    assert metrics["sampler_memory_bytes_per_device"] == sampler["memory"]["total_bytes"] > 0
    saved = json.loads((tmp_path / "blocks" / "metrics.json").read_text())
    assert saved["sampler_memory_bytes_per_device"] == metrics["sampler_memory_bytes_per_device"]
    assert any("evaluation (posterior sampler, 256 rows at once, eval.batch_size): per device " in r.getMessage()
               for r in caplog.records)
    bigger = run_tiny(tmp_path / "all", "dry_run=true", "eval.enabled=true", "eval.num_samples=1000",
                      "eval.batch_size=1000")
    assert bigger["dry_run"]["sampler"]["memory"]["temp_bytes"] > sampler["memory"]["temp_bytes"]


@pytest.mark.slow  # launch.py's dry run, end to end (~10 s)
def test_launch_dry_run_prints_the_evaluations_memory(tmp_path):
    import subprocess
    import sys

    from faults_helpers import LAUNCH, TINY

    done = subprocess.run([sys.executable, str(LAUNCH), *TINY, "dry_run=true", "eval.enabled=true",
                           "eval.num_samples=1000", "eval.batch_size=500", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=LAUNCH.parent, capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0 and "dry run done" in said, said[-3000:]
    assert "evaluation (posterior sampler, 500 rows at once, eval.batch_size): per device " in said, said[-3000:]
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["sampler_memory_bytes_per_device"] > 0 and saved["dry_run"]["sampler"]["rows"] == 500


@pytest.mark.parametrize("batch_size", [0, -3, 2.5])
def test_the_sampler_refuses_a_block_of_no_rows_rather_than_taking_the_default(batch_size):
    """Was: batch_size=0 meant the default 2,048 rows, a negative value went through (second review of r70)."""
    from gensbi_sharding.harness.flow_sampler import FlowSampler

    with pytest.raises(ValueError, match=f"batch_size={batch_size!r}: rows integrated at once, an int >= 1"):
        FlowSampler(lambda th, xx, t: th, rows=10, num_steps=2, mesh=None, batch_size=batch_size)


def test_the_sequential_rounds_sample_in_blocks_of_eval_batch_size(monkeypatch):
    """benchmarks/sequential_rounds.py built its sampler without eval.batch_size: always 2,048 rows at once, whatever
    the user set after the dry run's memory note (second review of r70)."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf
    from test_sequential import load

    from gensbi_sharding.harness import flow_sampler

    asked = []

    class Spy:
        def __init__(self, *args, **kwargs):
            asked.append(kwargs.get("batch_size"))
            raise RuntimeError("spied")

    monkeypatch.setattr(flow_sampler, "FlowSampler", Spy)
    cfg = OmegaConf.create({"eval": {"ode_steps": 2, "batch_size": 64}})
    with pytest.raises(RuntimeError, match="spied"):
        load().draws(cfg, SimpleNamespace(name="two_moons"), None, None, None, 10, 3)
    assert asked == [64]
