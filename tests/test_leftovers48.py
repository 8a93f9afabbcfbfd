"""Round 48's leftovers: harness faults noticed in earlier rounds and left alone, each fixed as a kind.

Each test names what was typed, what happened, and checks what happens now.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gensbi_sharding.harness.command_checks import command_problem

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text, said", [
    ("name: my_rule\nembd: data\n", "rule.embd is not a logical axis; valid keys: embed, mlp, heads, vocab, in, out "
                                    "(and name); did you mean rule.embed?"),
    ("name: my_rule\nembed: 3\n", "rule.embed=3 must be a mesh axis name, a list of them, or null; e.g. "
                                  "rule.embed=data, or rule.embed=null (unsplit)"),
    ("name: my_rule\nembed: [data, data]\n", "rule.embed=[data,data] names a mesh axis twice; list each mesh axis "
                                             "once: set rule.embed=data"),
    ("name: my_rule\nembed: dta\n", "rule.embed=dta (rule my_rule) names mesh axis dta, which the mesh lacks; valid "
                                    "values: data, model or null; set rule.embed=data"),
])
def test_a_rule_files_table_is_refused_with_the_command_lines_checks(tmp_path, text, said):
    # Was: `python launch.py rule=my_rule` with a key typo in conf/rule/my_rule.yaml passed launch.py's checks of the
    # command line; the run refused the table after Hydra had made its folder, which kept error.txt and metrics.json.
    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / "my_rule.yaml").write_text(text)
    searched = f"hydra.searchpath=[file://{tmp_path}]"
    written = f" (written in {tmp_path / 'rule' / 'my_rule.yaml'}: fix it there)"
    assert command_problem([searched, "rule=my_rule"]) == said + written
    assert command_problem([searched, "experiment=quick", "dry_run=true", "rule=my_rule"]) == said + written
    assert command_problem(["-m", searched, "rule=fsdp,my_rule"]) == said + written
    assert command_problem([searched, "rule=fsdp"]) is None  # a file this command never reads stops nothing
    if "dta" in text:  # no mesh: no mesh axis to lack (as the run takes it)
        assert command_problem([searched, "rule=my_rule", "mesh=none"]) is None
        assert command_problem([searched, "rule=my_rule", "rule.embed=data"]) is None  # the override wins


@pytest.mark.parametrize("typed, said", [
    ("rule.embed=dta", "rule.embed=dta (rule replicated+overrides) names mesh axis dta, which the mesh lacks; "
                       "valid values: data, model or null; set rule.embed=data"),
    ("rule.embed=3", "rule.embed=3 must be a mesh axis name, a list of them, or null; e.g. rule.embed=data, or "
                     "rule.embed=null (unsplit)"),
])
def test_a_rule_override_the_run_would_refuse_is_refused_before_hydra(typed, said):
    # The same tables typed on the command line: refused too only after the run's folder was made.
    assert command_problem(["experiment=quick", typed]) == said
    assert command_problem(["experiment=quick", "rule.embed=data"]) is None


def test_a_refused_rule_file_leaves_no_folder(tmp_path):
    (tmp_path / "conf" / "rule").mkdir(parents=True)
    (tmp_path / "conf" / "rule" / "my_rule.yaml").write_text("name: my_rule\nembd: data\n")
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                          "experiment=quick", "rule=my_rule", f"hydra.run.dir={out}"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines()[-1] == (
        "[ERROR] rule.embd is not a logical axis; valid keys: embed, mlp, heads, vocab, in, out (and name); did you "
        "mean rule.embed? (written in conf/rule/my_rule.yaml: fix it there)")
    assert not out.exists()



def test_a_resume_refusal_names_the_folder_as_typed_and_under_run_cfg_as_python_sets_it(tmp_path):
    # Was: "train.resume=/tmp/.../my runs/it's: checkpoint path ... does not exist" (the folder as is: pasted, the
    # shell splits it at the space and waits for the quote to close), and in those launch.py words under run(cfg).
    from hydra.core.hydra_config import HydraConfig

    from hydra import compose, initialize_config_dir

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.resume import resume_step_dir
    from gensbi_sharding.harness.run import run

    folder = tmp_path / "my runs" / "it's"
    typed = hydra_override("train.resume", folder)
    assert typed == f"""'train.resume="{str(folder).replace("'", "'\"'\"'")}"'"""  # one shell word, read back by Hydra
    cfg = compose_tiny()
    cfg.train.resume = str(folder)
    with pytest.raises(ConfigError) as refused:  # as raised: launch.py's run names it so
        resume_step_dir(cfg)
    assert str(refused.value).startswith(f"{typed}: checkpoint path ")
    assert str(refused.value).endswith("as train.resume=<folder>; or leave train.resume out to start fresh")

    cfg = compose_tiny(output_dir=tmp_path / "py")
    cfg.train.resume = str(folder)
    metrics = run(cfg)  # refused before any simulation
    assert metrics["status"] == "error"
    assert metrics["error"].startswith(f"ConfigError: cfg.train.resume={str(folder)!r}: checkpoint path ")
    assert metrics["error"].endswith("as cfg.train.resume='<folder>'; or set cfg.train.resume=None to start fresh")

    for value, said in [("Auto ", "{} is read as a folder name; to continue from this run's own folder, pass {} "
                                  "(lower case)"),
                        ("", "{} is empty: pass {} (this run's folder), a run or checkpoint folder, or leave it out "
                             "to start fresh")]:
        cfg = compose_tiny()
        cfg.train.resume = value
        with pytest.raises(ConfigError) as refused:  # run(cfg) from Python: no Hydra app
            validate(cfg)
        assert str(refused.value) == said.format(f"cfg.train.resume={value!r}", "cfg.train.resume='auto'")
        before = HydraConfig.instance().cfg
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            HydraConfig.instance().set_config(compose("config", return_hydra_config=True))
        try:  # launch.py's run: its overrides, each one shell word
            with pytest.raises(ConfigError) as refused:
                validate(cfg)
        finally:
            HydraConfig.instance().cfg = before
        assert str(refused.value) == said.format(hydra_override("train.resume", value) if value else "train.resume=''",
                                                 "train.resume=auto")


def test_a_checkpoint_beyond_train_steps_is_refused_naming_the_folder_as_typed(tmp_path):
    # Was: "train.resume=/tmp/.../my runs is at step 8, ..." (run.py: the folder as is, launch.py's words from Python).
    import jax
    import jax.numpy as jnp
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from faults_helpers import compose_tiny
    from gensbi_sharding.checkpoint import CheckpointWriter
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.resume import check_resume_settings

    run_dir = tmp_path / "my runs"
    with CheckpointWriter(run_dir / "checkpoints", async_save=False) as writer:
        writer.save(8, {"w": jnp.zeros(2)}, jax.random.key(0))
    cfg = compose_tiny("train.steps=6")
    cfg.train.resume = str(run_dir)
    with pytest.raises(ConfigError) as refused:  # run(cfg) from Python
        check_resume_settings(run_dir / "checkpoints" / "8", cfg)
    assert str(refused.value) == (f"cfg.train.resume={str(run_dir)!r} is at step 8, beyond cfg.train.steps=6; set "
                                  "cfg.train.steps=8 to evaluate it, or more to train further")
    before = HydraConfig.instance().cfg
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        HydraConfig.instance().set_config(compose("config", return_hydra_config=True))
    try:  # launch.py's run
        with pytest.raises(ConfigError) as refused:
            check_resume_settings(run_dir / "checkpoints" / "8", cfg)
    finally:
        HydraConfig.instance().cfg = before
    assert str(refused.value) == (f"'train.resume={run_dir}' is at step 8, beyond train.steps=6; set train.steps=8 "
                                  "to evaluate it, or more to train further")


def _checks(args):
    """The refusal of ``launch.py <args>`` before training: its command-line checks, then the checks of the config it
    composes that need no started backend (``sweep_check.job_problem``: ranges, the mesh against 8 CPU devices (or
    ``devices.cpu_count``), the batch); None where it would train."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.sweep_check import job_problem

    if problem := command_problem(args):
        return problem
    register_configs()
    before = HydraConfig.instance().cfg
    try:
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=list(args), return_hydra_config=True)
            HydraConfig.instance().set_config(cfg)  # as launch.py's run holds it
            with open_dict(cfg):
                del cfg["hydra"]
            return job_problem(cfg)
    finally:
        HydraConfig.instance().cfg = before


_FIX = re.compile(r"(?:\bset|e\.g\.|\bwrite) ((?:[+~]?[a-z_][\w.]*=[^\s;,()]+(?:[ ,;]|$))+)")


@pytest.mark.parametrize("args, refused, fix", [
    # Was "e.g. eval.num_samples=2": refused next, "must be >= 2 * eval.c2st_folds ...; set eval.num_samples=4".
    (["eval.num_samples=2.5"], "eval.num_samples=2.5", ["eval.num_samples=4"]),
    # Was "set mesh.model_axis=3": refused next, "8 devices are not divisible by model_axis=3".
    (["mesh={model:3}"], "mesh={model:3}", ["mesh.model_axis=2"]),
    # Was "set mesh.model_axis=3" (data-parallel size 2): refused next, "data.batch_size=63 ... a multiple of 2".
    (["devices.cpu_count=6", "mesh.model_axis=4", "data.batch_size=63"], "mesh.model_axis=4", ["mesh.model_axis=2"]),
    # Was "set mesh.model_axis=1" (data-parallel size 3): refused next, "data.batch_size=64 ... a multiple of 3".
    (["mesh.devices=[0,1,2]", "mesh.model_axis=2"], "mesh.model_axis=2", ["mesh.model_axis=3"]),
    (["devices.cpu_count=6", "mesh.model_axis=4"], "mesh.model_axis=4", ["mesh.model_axis=3"]),
    (["mesh.model_axis=3"], "mesh.model_axis=3", ["mesh.model_axis=2"]),
    (["data.batch_size=45"], "data.batch_size=45", ["data.batch_size=48"]),
    (["mesh=auto", "data.batch_size=60"], "data.batch_size=60", ["data.batch_size=56"]),
    (["data.batch_size=2000"], "data.batch_size=2000", ["data.batch_size=920"]),
    (["train.steps=1.5"], "train.steps=1.5", ["train.steps=2"]),
    (["train.stepz=5"], "train.stepz=5", ["train.steps=5"]),
    (["eval.num_samples=3"], "eval.num_samples=3", ["eval.num_samples=4"]),
    (["data.val_fraction=0.001"], "data.val_fraction=0.001", ["data.val_fraction=0.0098"]),
    (["data.num_simulations=20"], "data.num_simulations=20", ["data.num_simulations=100"]),
    (["train.val_every=0", "train.patience=5"], "train.val_every=0", ["train.val_every=5"]),
    (["distributed=local", "distributed.local_processes=3"], "distributed.local_processes=3",
     ["distributed.local_processes=2"]),
    (["rule.embed=dta"], "rule.embed=dta", ["rule.embed=data"]),
    (["activation.head_axis=foo"], "activation.head_axis=foo", ["activation.head_axis=null"]),
])
def test_every_setting_a_refusal_suggests_passes_the_checks(args, refused, fix):
    # The kind: a refusal's fix, typed in place of the override refused, was refused by the next check, sending the
    # user round a second time (or in a circle). Each fix here goes through the same checks, as the run makes them.
    args = ["experiment=quick", *args]
    problem = _checks(args)
    assert problem is not None
    suggested = _FIX.search(problem + " ")
    assert suggested, problem
    assert [w.rstrip(",;") for w in suggested[1].split()] == fix, problem
    assert _checks([a for a in args if a != refused] + fix) is None, problem
