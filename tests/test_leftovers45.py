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


def test_a_refusal_whose_fix_keeps_a_refused_value_names_both_fixes_in_one_message():
    # Was: `python launch.py +train.resume=true` said "write train.resume=true"; typed, that was refused next run
    # ("true is a yes/no ... e.g. train.resume=auto"). So for every rewrite keeping the value as typed: a misspelled
    # key (set/write the nearest one) and a + on a key or group that exists.
    from gensbi_sharding.harness.command_checks import command_problem

    assert command_problem(["+train.resume=true"]) == (
        "+train.resume=true: train.resume exists (+ adds a key the config lacks); write train.resume=true, though "
        "train.resume=true is refused too: train.resume takes a name, and true is a yes/no (it would read the text "
        "'True'; the word itself, quoted: \"train.resume='true'\"); e.g. train.resume=auto")
    for typed, tail in [("train.stpes=1.5", "set train.steps=1.5, though train.steps=1.5 is refused too: train.steps "
                         "takes a whole number"),
                        ("trian.steps=1.5", "write train.steps=1.5, though train.steps=1.5 is refused too: train.steps "
                         "takes a whole number"),
                        ("+train.steps=1,2", "write train.steps=1,2, though train.steps=1,2 is refused too: several "
                         "values are a sweep, one job per value, which needs -m"),
                        ("+model=mlpp", "write model=mlpp, though model=mlpp is refused too: Could not find "
                         "'model/mlpp'")]:
        problem = command_problem(["experiment=quick", typed])
        assert tail in problem and problem.endswith(("e.g. train.steps=2", "python launch.py -m ... train.steps=1,2",
                                                     "did you mean model=mlp?")), problem
    # A fix that is enough stays as it was; another override's refusal is its own.
    assert command_problem(["+train.steps=5"]).endswith("write train.steps=5")
    assert command_problem(["+train.steps=5", "seed=1.5"]).endswith("write train.steps=5")


def test_a_run_started_from_python_is_told_how_to_continue_it_from_python(tmp_path):
    # Was: run(cfg) from Python, stopped, said "continue with: the same command plus train.resume=auto
    # hydra.run.dir=<folder>": launch.py's overrides, which no Python call takes (run(cfg) reads cfg.output_dir).
    # Under launch.py (Hydra's job) the command stays launch.py's own.
    from gensbi_sharding.harness.stop_record import at_once_error
    from gensbi_sharding.harness.sweep_hints import continue_command

    out = tmp_path / "my run"
    assert continue_command(out) == f"run(cfg) with cfg.train.resume='auto' and cfg.output_dir='{out}' set in omegaconf.open_dict(cfg)"
    assert at_once_error(out, 40).endswith(f"continue with: run(cfg) with cfg.train.resume='auto' and "
                                           f"cfg.output_dir='{out}' set in omegaconf.open_dict(cfg)")


def test_every_folder_a_refusal_names_as_an_override_is_one_the_shell_and_hydra_read_back(tmp_path):
    # Was: "hydra.sweep.dir=<sweep> holds a sweep whose jobs continue other runs ..." (dropped_runs), and each
    # refusal of a folder ("hydra.run.dir=<folder> is a sweep's folder ..."), named the folder as is: with a space
    # or a parenthesis in it, no override one could paste. Now as the commands the harness prints write it.
    import shlex

    from omegaconf import OmegaConf

    from gensbi_sharding.harness import outputs
    from gensbi_sharding.harness.console_lines import completed_jobs_lead
    from gensbi_sharding.harness.folder_lock import folder_problem
    from gensbi_sharding.harness.resume_command import dropped_runs

    sweep = tmp_path / "my sweep (2)"
    sweep.mkdir()
    record = {"hydra": {"overrides": {"task": ["train.resume=r1,r2"]}}}
    OmegaConf.save(OmegaConf.create(record), sweep / "multirun.yaml")
    refused = dropped_runs(sweep, [["train.resume=auto"]])
    assert refused is not None and shlex.split(refused)[0] == f'hydra.sweep.dir="{sweep}"', refused
    assert folder_problem(sweep, sweep=False).startswith(f"'hydra.run.dir=\"{sweep}\"' is a sweep's folder")
    (sweep / "0").mkdir()
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "ok"})
    assert completed_jobs_lead(sweep, [sweep / "0"], "", 2).startswith(f"'hydra.sweep.dir=\"{sweep}\"': 1 of its 2")


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
    command = str(refused.value).split("convert it once: ")[1].removesuffix(" and pass x_o.npy")
    words = shlex.split(command)
    assert words[:2] == ["python", "-c"]
    subprocess.run([sys.executable, "-c", words[2]], cwd=tmp_path, check=True, timeout=60)
    np.testing.assert_array_equal(np.load(tmp_path / "x_o.npy"), [1.0, 2.0])
    plain = tmp_path / "x.csv"  # the command as it was where the shell leaves the path alone
    plain.write_text("1,2\n")
    with pytest.raises(ValueError, match=(r"convert it once: python -c \"import numpy as np; np.save\('x_o.npy', "
                                          rf"np.loadtxt\('{plain}', delimiter=','\)\)\" and pass x_o.npy")):
        load_observation(plain)



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


def test_a_count_typed_with_an_exponent_is_named_as_the_whole_number_to_write(capsys):
    # Was: `python sample.py <run> x_o.npy --num-samples 1e3`: argparse's bare "invalid int value: '1e3'" (and the
    # benchmark scripts' "'1e3' is not an integer; e.g. 2"), where launch.py's train.steps=1e3 names 1000. Now each
    # numeric option of sample.py and of the benchmark scripts names the number to write.
    import argparse

    import pytest

    from gensbi_sharding.harness.own_observation import main

    for option in ("--num-samples", "--seed", "--ode-steps"):
        with pytest.raises(SystemExit) as ended:
            main(["runs/a", "x_o.npy", option, "1e3"])
        assert ended.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"sample.py: error: argument {option}: '1e3' is a whole number written as a float; write 1000")
    with pytest.raises(SystemExit):
        main(["runs/a", "x_o.npy", "--num-samples", "1.5"])
    assert capsys.readouterr().err.endswith("'1.5' is not a whole number; e.g. 2\n")

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import cli_args
        import sbibm_method
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    for kind, typed, message in [
            (cli_args.positive_int, "1e3", "'1e3' is a whole number written as a float; write 1000"),
            (cli_args.integer, "-2e0", "'-2e0' is a whole number written as a float; write -2"),
            (cli_args.one_of((1000, 10000), int, argument="--budgets"), "1e4",
             "'1e4' is a whole number written as a float; write 10000"),
            (sbibm_method.rounds_arg, "2e0", "'2e0' is a whole number written as a float; write 2; pass --rounds 1 "
             "(amortised, the default) or --rounds 2 (sequential)")]:
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            kind(typed)
        assert str(refused.value) == message
    assert cli_args.positive_int("12") == 12 and sbibm_method.rounds_arg("2") == 2
