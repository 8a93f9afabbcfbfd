"""sample.py's output name: only the names a run writes are refused (session 69, BREAK69A)."""

import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gensbi_sharding.harness.observation_input import load_observation
from gensbi_sharding.harness.sample_output import RUN_NPZ_NAMES, out_path, output_problem


@pytest.mark.slow
def test_the_observation_saved_from_a_runs_samples_file_gets_its_default_output(tmp_path):
    # Was: `sample.py <run> <run>/posterior_samples.npz` advised saving posterior_samples_x_o.npy; pasted, then passed
    # as advised, sample.py refused its default output posterior_samples_x_o_posterior.npz ("--out ...: is a name a
    # run writes its outputs under"), naming an --out the user never typed: the advice led to a refusal.
    run = tmp_path / "run"
    run.mkdir()
    np.savez(run / "posterior_samples.npz", samples=np.zeros((3, 2)), observation=np.array([0.5, 0.25]))
    with pytest.raises(ValueError) as refused:
        load_observation(run / "posterior_samples.npz")
    command, passed = str(refused.value).split("save the observation once: ")[1].split(" and pass ")
    subprocess.run([sys.executable, "-c", shlex.split(command)[2]], cwd=tmp_path, check=True, timeout=60)
    out = out_path(None, Path(passed))
    assert out == run / "posterior_samples_x_o_posterior.npz"
    assert output_problem(out, None, 1000) is None


@pytest.mark.parametrize("name, refused", [
    ("posterior_samples.npz", True), ("posterior_samples_3.npz", True), ("posterior_samples_3.attempt2.npz", True),
    ("posterior_samples.attempt1.npz", True), ("train_losses.npz", True),
    ("posterior_samples_x_o_posterior.npz", False), ("posterior_samples_7_x_o_posterior.npz", False),
    ("posterior_samples_mine.npz", False), ("x_o_posterior.npz", False)])
def test_only_the_names_a_run_writes_are_refused(tmp_path, name, refused):
    problem = output_problem(tmp_path / name, str(tmp_path / name), 1000)
    assert bool(RUN_NPZ_NAMES.fullmatch(name)) is refused
    if refused:
        assert problem == (f"--out {tmp_path / name}: {name} is a name a run writes its outputs under; choose another "
                           "(a later run in that folder would take it for its own)")
    else:
        assert problem is None
