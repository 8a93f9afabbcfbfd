"""Sampling a trained run (``sample.py``, ``own_observation``): what it says it samples, folders it cannot write,
observation files' paths, a run still training.
"""

import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx
from omegaconf import OmegaConf

from faults_helpers import REPO, compose_tiny, saved_checkpoint
from gensbi_sharding import make_mesh
from gensbi_sharding.checkpoint import CheckpointWriter


def test_sample_posterior_on_a_mesh_says_a_fallback_once(monkeypatch, caplog, tmp_path):
    # Was: the full list of fallback paths (logger gensbi_sharding.details, meant for a harness job's launch.log)
    # shown by Python beside the one-line fallback warning: the same fallback said twice.
    import logging

    import jax.numpy as jnp

    import optax

    from faults_helpers import saved_checkpoint
    from gensbi_sharding import axes, resolve_rule
    from gensbi_sharding.harness import own_observation, state
    from gensbi_sharding.harness.model_plan import model_plan
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    saved = {"seed": 0, "rule": "replicated", "model": {"name": "mlp"},
             "data": {"name": "two_moons", "x_transform": "none", "theta_transform": "none"},
             "eval": {"num_samples": 4, "ode_steps": 2}}
    statistics = {"theta_mean": [0.0, 0.0], "theta_std": [1.0, 1.0], "x_mean": [0.0, 0.0], "x_std": [1.0, 1.0]}
    saved_checkpoint(tmp_path, saved, {NORMALIZATION: statistics})

    class Velocity(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.ones((2, 8)), **axes("embed", "mlp"))  # 2 rows: not split over data=8

        def __call__(self, theta, x, t):
            return jnp.zeros_like(theta) * self.w[0, 0]

    def build_state(cfg, *, mesh, **_):  # the run's model, planned on the mesh
        model = Velocity()
        model_plan(model, mesh, resolve_rule("fsdp"), strict=False)
        return state.TrainState(model=model, optimizer=nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param),
                                plan=None, key=jax.random.key(0))

    monkeypatch.setattr(state, "build_state", build_state)
    with caplog.at_level(logging.INFO):
        samples = own_observation.sample_posterior(tmp_path, np.zeros(2, np.float32), mesh=make_mesh())
    assert samples.shape == (4, 2)
    said = [r.getMessage() for r in caplog.records if "w" in r.getMessage() and "split" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("1 variable(s) replicated instead of split under rule 'fsdp'"), said
    # Outside sample_posterior the full list still reaches a job's log.
    with caplog.at_level(logging.INFO):
        caplog.clear()
        model = nnx.Module()
        model.w = nnx.Param(jnp.ones((2, 8)), **axes("embed", "mlp"))
        model_plan(model, make_mesh(), resolve_rule("fsdp"), strict=False)
    assert [r.name for r in caplog.records].count("gensbi_sharding.details") == 1


@pytest.mark.slow
def test_a_printed_python_command_runs_whatever_the_observation_files_path_holds(tmp_path):
    # Was: "convert it once: python -c \"... np.loadtxt('<path>')\"": a path with a quote or a $ broke the command.
    import shlex

    import numpy as np
    import pytest

    from gensbi_sharding.harness.observation_input import load_observation

    text = tmp_path / "it's $HOME.csv"
    text.write_text("1,2\n")
    with pytest.raises(ValueError) as refused:
        load_observation(text)
    command, saved = str(refused.value).split("convert it once: ")[1].split(" and pass ")
    words = shlex.split(command)
    assert words[:2] == ["python", "-c"] and shlex.split(saved) == [str(tmp_path / "it's $HOME_x_o.npy")]
    subprocess.run([sys.executable, "-c", words[2]], cwd=tmp_path, check=True, timeout=60)
    np.testing.assert_array_equal(np.load(tmp_path / "it's $HOME_x_o.npy"), [1.0, 2.0])
    plain = tmp_path / "x.csv"  # the command as it was where the shell leaves the path alone
    plain.write_text("1,2\n")
    with pytest.raises(ValueError, match=(rf"convert it once: python -c \"import numpy as np; np.save\('{tmp_path}/"
                                          rf"x_x_o.npy', np.loadtxt\('{plain}', delimiter=','\)\)\" and pass "
                                          rf"{tmp_path}/x_x_o.npy")):
        load_observation(plain)


@pytest.mark.slow
def test_the_command_saving_a_runs_observation_writes_into_the_runs_folder_not_the_current_one(tmp_path):
    # `sample.py <run> <run>/posterior_samples.npz` advised `python -c "...np.save('x_o.npy', ...)" and pass x_o.npy`:
    # pasted in the checkout, it wrote x_o.npy there, then sample.py x_o_posterior.npz beside it (git status showed
    # both). Now both go beside the archive: into the run's folder.
    import shlex

    from gensbi_sharding.harness.observation_input import load_observation
    from gensbi_sharding.harness.sample_output import out_path

    run, checkout = tmp_path / "outputs" / "run", tmp_path / "checkout"
    run.mkdir(parents=True)
    checkout.mkdir()
    np.savez(run / "posterior_samples.npz", samples=np.zeros((3, 2)), observation=np.array([0.5, 0.25]))
    with pytest.raises(ValueError) as refused:
        load_observation(run / "posterior_samples.npz")
    command, passed = str(refused.value).split("save the observation once: ")[1].split(" and pass ")
    subprocess.run([sys.executable, "-c", shlex.split(command)[2]], cwd=checkout, check=True, timeout=60)
    assert list(checkout.iterdir()) == [] and Path(passed) == run / "posterior_samples_x_o.npy"
    assert load_observation(passed).tolist() == [0.5, 0.25]
    assert out_path(None, Path(passed)).parent == run  # sample.py's default output: beside it too


@pytest.mark.slow
def test_the_own_observation_example_writes_under_outputs_not_the_checkouts_root(tmp_path):
    # Was: README's and docs/harness.md's example saved x_o.npy, and sample.py then x_o_posterior.npz, in the folder it
    # ran from: the checkout's root, beside launch.py (and the second run of the example was refused: it exists).
    import re
    import shlex

    from gensbi_sharding.harness.sample_output import out_path

    for page in ("README.md", "docs/harness.md"):
        block = next(b for b in re.findall(r"```bash\n(.*?)```", (REPO / page).read_text(), re.S) if "sample.py" in b)
        save, sample = [shlex.split(line.split("  #")[0]) for line in block.splitlines()]
        cwd = tmp_path / page.replace("/", "_")
        (cwd / "outputs").mkdir(parents=True)  # a run's folder is there: the example samples it
        subprocess.run([sys.executable, *save[1:]], cwd=cwd, check=True, timeout=60)
        assert sorted(p.relative_to(cwd).as_posix() for p in cwd.rglob("*")) == ["outputs", "outputs/x_o.npy"], page
        observation = Path(sample[3])
        assert (cwd / observation).is_file() and out_path(None, observation).as_posix() == "outputs/x_o_posterior.npz"


@pytest.mark.slow
def test_sampling_a_checkpoint_says_what_it_samples_not_that_it_resumed(tmp_path, devices, caplog):
    # Typed: python sample.py runs/f x_o.npy (README, "Your own observation"). Was, on the console: "resumed from
    # runs/f/checkpoints/20 at step 20, placed by rule 'tensor' on one device (no mesh); early stopping: best step
    # 20, 1 validation(s)": nothing is resumed, no rule places anything on one device, and no early stopping runs;
    # for a checkpoint without early-stopping state, a warning that early stopping starts afresh. Still, after
    # that fix: "sampling checkpoint ..., placed by rule 'tensor' on one device (no mesh)" (the run's rule named).
    import logging

    import gensbi_sharding as gs
    from gensbi_sharding.harness.state import build_state
    from gensbi_sharding.harness.train import make_step_functions

    cfg = compose_tiny("model.init=eager")
    table = dict(gs.RULES["replicated"])
    ts = build_state(cfg, dim_theta=2, dim_x=2, mesh=None, rule_name="replicated", table=table, resume_dir=None)
    _, state = make_step_functions(ts.model, ts.optimizer, None, ema=ts.ema)
    with CheckpointWriter(tmp_path / "checkpoints", config=OmegaConf.to_container(cfg, resolve=True)) as writer:
        writer.save(3, state, ts.key)
    step_dir = tmp_path / "checkpoints" / "3"
    for sampling, said in ((True, f"sampling checkpoint {step_dir} (step 3), on one device (no mesh); "
                                   "its newest weights"),
                           (False, f"resumed from {step_dir} at step 3, on one device (no mesh)")):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
            build_state(cfg, dim_theta=2, dim_x=2, mesh=None, rule_name="replicated", table=table,
                        resume_dir=step_dir, sampling=sampling)
        assert any(r.getMessage().startswith(said) for r in caplog.records), caplog.text
        assert ("early stopping starts afresh" in caplog.text) is not sampling


@pytest.mark.slow
def test_sampling_a_run_still_training_before_its_first_checkpoint_says_so(tmp_path):
    # Typed: python sample.py multirun/.../1 x_o.npy while that sweep job trained (train.checkpoint_every=0: a
    # checkpoint only at its end). Was: "has no checkpoint to sample ... Sampling needs a trained run's saved weights:
    # pass the folder of a run that trained", about a run that was training there and would save one.
    import subprocess
    import sys

    import numpy as np

    from gensbi_sharding.harness.own_observation import sample_posterior

    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom gensbi_sharding.harness.folder_lock "
                               f"import FolderLock\nlock = FolderLock({str(run)!r})\nlock.acquire()\nprint('held', flush=True)\n"
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FileNotFoundError) as err:
            sample_posterior(run, np.zeros(2))
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert f"; its run is still training (pid {holder.pid} on " in str(err.value)
    assert str(err.value).split(") and has saved none yet")[1] == (
        ": it saves one at its end, and every train.checkpoint_every steps if set; sample it then")


@pytest.mark.parametrize("given", [None, "mine.npz"])
def test_sample_py_refuses_an_output_folder_it_cannot_write_before_sampling(tmp_path, monkeypatch, capsys, given):
    # python sample.py <run> /data/readonly/x_o.npy: was the posterior drawn, then an OSError traceback as the default
    # output beside the observation (or --out's) was written. Now refused first, naming the folder and --out.
    from gensbi_sharding.harness import own_observation, sample_output
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    def read_only(**kwargs):
        raise OSError(30, "Read-only file system")

    saved_checkpoint(tmp_path, {"data": {"name": "two_moons", "x_transform": "none"}, "model": {"name": "mlp"},
                                "eval": {"num_samples": 8, "ode_steps": 4}, "seed": 0},  # as a run saves them
                     {NORMALIZATION: {"x_mean": [0.0, 0.0], "theta_mean": [0.0, 0.0]}})  # a run's folder, found good
    np.save(tmp_path / "x_o.npy", np.zeros(2))
    monkeypatch.setattr(sample_output.tempfile, "mkdtemp", read_only)
    monkeypatch.setattr(own_observation, "sample_posterior", lambda *a, **k: pytest.fail("sampled"))
    out = tmp_path / ("mine.npz" if given else "x_o_posterior.npz")
    with pytest.raises(SystemExit):
        own_observation.main([str(tmp_path), str(tmp_path / "x_o.npy"), *(["--out", str(out)] if given else [])])
    which = f"--out {out}" if given else f"the default output {out} (beside the observation file)"
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"sample.py: error: {which}: cannot write in {tmp_path} (Read-only file system); pass --out <a file in a folder "
        "you can write to>.npz")


def test_sample_py_refuses_every_argument_at_once(tmp_path, capsys):
    # Was: one refusal a run: `sample.py <no folder> <no file> --seed -1 --ode-steps 0` named the run folder only, and
    # the observation, then each count, were refused on the runs after it was fixed.
    from gensbi_sharding.harness.own_observation import main

    run, x_o = tmp_path / "nope", tmp_path / "nope.npy"
    assert main([str(run), str(x_o), "--seed", "-1", "--ode-steps", "0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "[ERROR] sample.py: 4 arguments are refused:", lines
    assert lines[1].startswith(f"  run folder '{run}' does not exist"), lines
    assert lines[2].startswith(f"  observation file '{x_o}' does not exist"), lines
    assert lines[3:] == ["  --seed -1 must be an integer >= 0 and <= 9,223,372,036,854,775,807 (the .npz stores it as "
                         "a 64-bit integer); e.g. --seed 0", "  --ode-steps 0 must be an integer >= 1 and <= 10,000 (as "
                         "a run's eval.ode_steps; flow-matching samplers use 10-1,000); e.g. --ode-steps 32"]
    assert main([str(run), str(x_o)]) == 2  # two: the same list
    assert capsys.readouterr().err.startswith("[ERROR] sample.py: 2 arguments are refused:\n  run folder ")
    np.save(x_o, np.zeros(2))
    assert main([str(run), str(x_o)]) == 2  # one: its own words, as before
    assert capsys.readouterr().err.startswith(f"[ERROR] run folder '{run}' does not exist")
