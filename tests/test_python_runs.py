"""Runs started from Python (``run(cfg)``): refused as launch.py refuses them, and told how to continue from Python."""

import json

import jax
import pytest
from omegaconf import OmegaConf

from faults_helpers import compose_tiny, run_tiny


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


def test_the_continue_hint_of_a_run_started_from_python_works_as_written(tmp_path):
    # Was (round 45's run(cfg) hint): "run(cfg) with cfg.train.resume='auto' and cfg.output_dir='<folder>'", and
    # cfg.output_dir = ... on the config compose gives (as launch.py's, no output_dir set) raised
    # ConfigAttributeError "Key 'output_dir' not in 'Config'": output_dir is no field of the schema.
    import ast

    import pytest
    from faults_helpers import compose_tiny
    from omegaconf import open_dict
    from omegaconf.errors import ConfigAttributeError

    from gensbi_sharding.harness.run_folder import output_dir
    from gensbi_sharding.harness.sweep_hints import continue_command

    folder = tmp_path / "my run's"
    hint = continue_command(folder)
    assert hint == f"run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(folder)!r} set in omegaconf.open_dict(cfg)"
    named = ast.literal_eval(hint.split("cfg.output_dir=", 1)[1].removesuffix(" set in omegaconf.open_dict(cfg)"))
    cfg = compose_tiny()
    with pytest.raises(ConfigAttributeError):
        cfg.output_dir = named  # as the hint said before
    with open_dict(cfg):  # as it says now
        cfg.train.resume, cfg.output_dir = "auto", named
    assert output_dir(cfg) == folder and cfg.train.resume == "auto"


def test_run_cfg_from_python_returns_the_refusal_launch_py_prints(tmp_path, devices):
    # The one check of the composed config serves both callers: run(cfg) from Python gets the line in metrics["error"],
    # its fix the setting it sets (WORDS77B; was launch.py's "set eval.observations=[1]").
    from faults_helpers import run_tiny

    metrics = run_tiny(tmp_path / "run", "eval.observations=[1,1]", "mesh.spec=dict")
    assert metrics["status"] == "error" and metrics["error"] == (
        "ConfigError: eval.observations=[1,1] lists an observation twice (it would be scored and averaged twice); set "
        "cfg.eval.observations=[1]"), metrics["error"]


@pytest.mark.slow
def test_run_cfg_from_python_names_every_refused_value_as_launch_py_does(tmp_path, devices):
    # Was: run(cfg) named only train.steps=-1 (its first check), seed=-1 once that was fixed, where launch.py's check of
    # the same command listed both with the fixes together. Its fixes are the settings it sets (WORDS77B; were
    # launch.py's "e.g. train.steps=3000", "all fixed together: train.steps=3000 seed=0").
    from faults_helpers import run_tiny

    metrics = run_tiny(tmp_path / "run", "train.steps=-1", "seed=-1")
    assert metrics["status"] == "error" and metrics["error"].splitlines() == [
        "ConfigError: 2 settings are refused, each with its fix:",
        "  train.steps=-1 must be >= 1; e.g. cfg.train.steps=3000", "  seed=-1 must be >= 0; e.g. cfg.seed=0",
        "  all fixed together: cfg.train.steps=3000 and cfg.seed=0"], metrics["error"]
    assert run_tiny(tmp_path / "fixed", "train.steps=3", "seed=0", "eval.enabled=false")["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("overrides, expected", [
    (["model=flux1", "+model.guidance_embed=true"],
     "+model.guidance_embed=true: Flux1Params.guidance_embed (model=flux1) is no setting: the harness sets it to false"),
    (["model=simformer", "data=slcp", "+model.dim_joint=3"],
     "+model.dim_joint=3: SimformerParams.dim_joint (model=simformer) is no setting: the harness sets it to one token "
     "per theta and x dimension: the task's dim_theta + dim_x (data=slcp: 13)"),
    (["+foo=null"], "foo is not a setting; drop +foo=null;"),
    (["+mesh.modle_axis=[1,2]"], "drop +mesh.modle_axis=[1,2] and set mesh.model_axis=[1,2]"),
])
def test_a_key_added_by_compose_is_refused_by_run_cfg_as_launch_py_refuses_it(compose_config, overrides, expected):
    # Was, from Python (compose, then run(cfg), which launch.py's override checks never saw): "drop
    # +model.guidance_embed=True" (Python's True; launch.py says true), "+foo=None", "[1, 2]", and no word that the
    # harness sets guidance_embed or dim_joint from the task.
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as raised:
        validate(compose_config(*overrides))
    assert expected in str(raised.value), str(raised.value)


@pytest.mark.slow
def test_a_run_from_python_records_its_own_config_over_another_launch_s_record(tmp_path, devices):
    # Was: run(cfg) from Python into a folder holding another launch's .hydra record left that record as the folder's:
    # its config.yaml (model.width=24) read as this run's, and its overrides.yaml named in a refused resume of this
    # run's checkpoints as "the run that saved it was launched with: experiment=quick model.width=24".
    out, width = tmp_path / "run", compose_tiny().model.width
    record = out / ".hydra"
    record.mkdir(parents=True)
    OmegaConf.save(compose_tiny("model.width=24"), record / "config.yaml")
    OmegaConf.save(OmegaConf.create(["experiment=quick", "model.width=24"]), record / "overrides.yaml")
    OmegaConf.save(OmegaConf.create({"hydra": {"overrides": {"hydra": [], "task": ["model.width=24"]}}}),
                   record / "hydra.yaml")
    other = {p.name: p.read_bytes() for p in record.iterdir()}
    assert run_tiny(out, "train.steps=4")["status"] == "ok" and width != 24
    # Its own config, no command typed; the other launch's record aside, whole (was: deleted, as that launch saved no
    # checkpoint: only config.yaml was left).
    aside = {name.replace(".yaml", ".attempt1.yaml"): data for name, data in other.items()}
    assert {p.name: p.read_bytes() for p in record.iterdir() if p.name not in ("config.yaml", "x64.yaml")} == aside
    assert (record / "x64.yaml").read_text() == f"jax_enable_x64: {str(bool(jax.config.jax_enable_x64)).lower()}\n"
    assert OmegaConf.load(record / "config.yaml").model.width == width
    metrics = json.loads((out / "metrics.json").read_text())
    (out / "metrics.json").write_text(json.dumps({**metrics, "status": "preempted"}))  # stopped: auto continues it
    refused = run_tiny(out, "train.resume=auto", "model.width=24")
    assert refused["error"].startswith(f"ConfigError: the checkpoint was saved with model.width={width} (this run: "
                                       "model.width=24)"), refused["error"]
    assert "launched with" not in refused["error"], refused["error"]  # the saving run typed no command
    # The refused attempt continued nothing: the record is the run's that saved the checkpoints, as before it, and the
    # other launch's still aside.
    assert sorted(p.name for p in record.iterdir()) == ["config.attempt1.yaml", "config.yaml", "hydra.attempt1.yaml",
                                                        "overrides.attempt1.yaml", "x64.yaml"]
    assert OmegaConf.load(record / "config.yaml").model.width == width
    assert {p.name: p.read_bytes() for p in record.glob("*.attempt1.yaml")} == aside
