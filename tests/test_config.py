"""harness.config and conf/: every group option composes to the values it declares.

Configs are composed in-process with Hydra's compose API, the way launch.py composes
them; ``validate`` and the typed schema reject what cannot run, naming the key. Two
tests start fresh interpreters: importing the package and launch.py must leave JAX's
backend unstarted, and ``configure_devices`` must refuse a count the backend cannot give.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf, open_dict

from checkout_files import shipped_files
from gensbi_sharding.harness.config import (
    ConfigError, Flux1Config, MLPConfig, SimformerConfig, TransformerConfig)
from gensbi_sharding.harness.config_checks import validate
from gensbi_sharding.harness.rule_config import check_table_against_mesh, mesh_spec, rule_table
from gensbi_sharding import LOGICAL_AXES, RULES, resolve_mesh

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"

# Every option of every config group, and what selecting it must give (dotted key -> value).
GROUP_OPTIONS = {
    "mesh": {
        "none": {"mesh.spec": None, "mesh.model_axis": 1, "mesh.devices": None},
        "auto": {"mesh.spec": "auto", "mesh.model_axis": 1, "mesh.devices": None},
        "dict": {"mesh.spec": "dict", "mesh.model_axis": 1, "mesh.devices": None},
    },
    "rule": {  # checked through rule_table below; the name is what the run reports
        "replicated": {"rule.name": "replicated"},
        "fsdp": {"rule.name": "fsdp"},
        "tensor": {"rule.name": "tensor"},
        "fsdp_tensor": {"rule.name": "fsdp_tensor"},
    },
    "model": {
        "mlp": {"model.name": "mlp", "model.init": "sharded", "model.width": 128, "model.depth": 3,
                "model.mlp_ratio": 2, "model.time_embed_dim": 32},
        "transformer": {"model.name": "transformer", "model.init": "sharded", "model.embed": 64,
                        "model.depth": 2, "model.heads": 8, "model.mlp_ratio": 4,
                        "model.time_embed_dim": 32},
        "flux1": {"model.name": "flux1", "model.init": "sharded", "model.num_heads": 4, "model.depth": 2,
                  "model.depth_single_blocks": 4, "model.axes_dim": [8, 0], "model.mlp_ratio": 4.0,
                  "model.id_embedding_strategy": ["absolute", "absolute"], "model.dtype": "float32"},
        "simformer": {"model.name": "simformer", "model.init": "sharded", "model.val_emb_dim": 40,
                      "model.id_emb_dim": 40, "model.cond_emb_dim": 10, "model.num_heads": 4,
                      "model.depth": 2, "model.qkv_features": 40, "model.dtype": "float32"},
    },
    "data": {
        name: {"data.name": name, "data.num_simulations": 10_000, "data.val_fraction": 0.1,
               "data.batch_size": 1024 if name == "two_moons" else 256, "data.num_observation": 1,
               "data.theta_transform": "none" if name in ("two_moons", "gaussian_mixture", "slcp") else "support",
               "data.x_transform": "log" if name == "lotka_volterra" else "none"}
        for name in ("two_moons", "gaussian_linear", "gaussian_linear_uniform", "gaussian_mixture", "slcp",
                     "sir", "lotka_volterra", "bernoulli_glm")
    },
    "train": {
        "default": {"train.steps": 3000, "train.learning_rate": 3e-3, "train.weight_decay": 1e-4,
                    "train.schedule": "cosine", "train.warmup_steps": 0, "train.ema_decay": 0.999,
                    "train.val_every": 250, "train.patience": 0, "train.val_draws": 8,
                    "train.log_every": 100},
    },
    "eval": {
        "default": {"eval.enabled": True, "eval.num_samples": 10_000, "eval.ode_steps": 32,
                    "eval.c2st_folds": 5, "eval.observations": None, "eval.c2st_jobs": 1,
                    "eval.plot": True},
    },
    "distributed": {
        "none": {"distributed.mode": "none", "distributed.local_processes": 1},
        "auto": {"distributed.mode": "auto", "distributed.local_processes": 1},
        "local": {"distributed.mode": "explicit", "distributed.local_processes": 2},
    },
    "experiment": {
        "quick": {"model.name": "mlp", "model.width": 32, "model.depth": 1, "data.name": "two_moons",
                  "data.num_simulations": 1024, "data.batch_size": 64, "train.steps": 20,
                  "train.log_every": 10, "eval.num_samples": 128, "eval.ode_steps": 8,
                  "eval.c2st_folds": 2, "eval.plot": False},
        "slcp_transformer": {"model.name": "transformer", "model.embed": 64, "data.name": "slcp",
                             "data.num_simulations": 20_000, "train.steps": 3000},
        "sbibm": {"mesh.spec": "auto", "hydra.mode": "MULTIRUN", "eval.observations": list(range(1, 11)),
                  "eval.num_samples": 10_000, "eval.c2st_folds": 5, "train.patience": 20,
                  "train.steps": 20_000, "train.learning_rate": 1e-3, "train.val_every": 200,
                  "hydra.sweeper.params": {
                      "data": "two_moons,gaussian_linear,gaussian_linear_uniform,gaussian_mixture,slcp,sir,"
                              "lotka_volterra,bernoulli_glm",
                      "data.num_simulations": "1000,10000,100000"}},
    },
    "sweep": {
        "rules_x_model_axis": {"mesh.spec": "dict", "hydra.mode": "MULTIRUN",
                               "hydra.sweeper.params": {"rule": "replicated,fsdp,tensor",
                                                        "mesh.model_axis": "1,2,4"}},
    },
}

EXPECTED_TABLES = {
    "replicated": dict(RULES["replicated"]),
    "fsdp": dict(RULES["fsdp"]),
    "tensor": dict(RULES["tensor"]),
    "fsdp_tensor": {"embed": "data", "mlp": "model", "heads": "model", "vocab": "model",
                    "in": None, "out": None},
}


def _select(cfg, key):
    value = OmegaConf.select(cfg, key, throw_on_missing=True)
    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return getattr(value, "name", value)  # an enum (hydra.mode) by its name


OPTION_CASES = [(group, option) for group, options in GROUP_OPTIONS.items() for option in options]


def test_every_option_on_disk_is_covered():
    for group, options in GROUP_OPTIONS.items():
        # the shipped files (git's): a user's own (the README's conf/rule/my_rule.yaml) is no option this suite covers
        on_disk = {p.stem for p in shipped_files(CONF / group)}
        assert on_disk == set(options), f"conf/{group}: files {sorted(on_disk)}, tested {sorted(options)}"


def test_a_group_s_options_follow_its_folder_as_files_come_and_go(tmp_path, monkeypatch):
    """group_options reads a group's folder once per version of it (the checks ask thousands of times): a file
    added, removed or renamed there is seen at once, also within the file system's coarse modification time."""
    import os

    from gensbi_sharding.harness import groups

    monkeypatch.setattr(groups, "CONF", tmp_path)
    (tmp_path / "model").mkdir()
    assert groups.group_options("model") == [] and groups.group_options("nope") == []
    for name in ("b", "a"):
        (tmp_path / "model" / f"{name}.yaml").write_text("x: 1\n")
        assert groups.group_options("model") == (["b"] if name == "b" else ["a", "b"])
    old = 1_000_000_000  # an unchanged folder (changed long ago) is read once, and again once it changes
    os.utime(tmp_path / "model", ns=(old, old))
    assert groups.group_options("model") == ["a", "b"] and groups.group_options("model") == ["a", "b"]
    (tmp_path / "model" / "b.yaml").rename(tmp_path / "model" / "c.yml")
    assert groups.group_options("model") == ["a"]
    os.utime(tmp_path / "model", ns=(old + 1, old + 1))
    (tmp_path / "model" / "d.yaml").write_text("x: 1\n")
    os.utime(tmp_path / "model", ns=(old + 2, old + 2))
    assert groups.group_options("model") == ["a", "d"]


@pytest.mark.parametrize("group,option", OPTION_CASES, ids=[f"{g}={o}" for g, o in OPTION_CASES])
@pytest.mark.fast_cases(4)
def test_group_option_composes_to_its_values(compose_config, group, option):
    expected = GROUP_OPTIONS[group][option]
    cfg = compose_config(f"{group}={option}", hydra=any(k.startswith("hydra.") for k in expected))
    got = {key: _select(cfg, key) for key in expected}
    assert got == expected


@pytest.mark.parametrize("group,option", OPTION_CASES, ids=[f"{g}={o}" for g, o in OPTION_CASES])
def test_group_option_is_a_valid_config(compose_config, group, option):
    validate(compose_config(f"{group}={option}"))  # raises ConfigError if not


@pytest.mark.parametrize("rule", sorted(EXPECTED_TABLES))
def test_rule_files_give_the_contract_tables(compose_config, rule):
    name, table = rule_table(compose_config(f"rule={rule}").rule)
    assert (name, table) == (rule, EXPECTED_TABLES[rule])


def test_model_groups_are_typed_by_their_schema(compose_config):
    assert OmegaConf.get_type(compose_config("model=mlp").model) is MLPConfig
    assert OmegaConf.get_type(compose_config("model=transformer").model) is TransformerConfig
    assert OmegaConf.get_type(compose_config("model=flux1").model) is Flux1Config
    assert OmegaConf.get_type(compose_config("model=simformer").model) is SimformerConfig


def test_register_configs_stores_again_what_the_store_no_longer_holds_as_it_stored_it(compose_config):
    """register_configs skips a schema the store still holds as it stored it (storing rebuilds it), and stores
    again one removed or replaced there: a schema someone else stored under the name is not kept."""
    from hydra.core.config_store import ConfigStore

    from gensbi_sharding.harness.config import register_configs

    repo = ConfigStore.instance().repo
    register_configs()
    held = repo["mlp_schema.yaml"]
    register_configs()
    assert repo["mlp_schema.yaml"] is held  # not built again
    del repo["mlp_schema.yaml"]
    repo["transformer_schema.yaml"] = repo["flux1_schema.yaml"]  # another schema under its name
    register_configs()
    assert OmegaConf.get_type(repo["mlp_schema.yaml"].node) is MLPConfig
    assert OmegaConf.get_type(repo["transformer_schema.yaml"].node) is TransformerConfig
    assert OmegaConf.get_type(compose_config("model=transformer", "model.depth=3").model) is TransformerConfig


def test_defaults(compose_config):
    cfg = compose_config(hydra=True)
    assert cfg.mesh.spec == "dict" and cfg.mesh.model_axis == 1
    assert rule_table(cfg.rule)[0] == "replicated"
    assert (cfg.model.name, cfg.data.name) == ("mlp", "two_moons")
    assert cfg.devices.cpu_count is None and cfg.devices.platform is None  # None: the environment's, else 8
    assert (cfg.seed, cfg.strict, cfg.debug, cfg.dry_run) == (0, False, False, False)
    assert cfg.hydra.job.chdir is False
    assert cfg.hydra.callbacks.sweep_summary._target_ == "gensbi_sharding.harness.summary.SweepSummary"


def test_slurm_launcher_preset(compose_config):
    launcher = compose_config("hydra/launcher=slurm", hydra=True).hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (launcher.timeout_min, launcher.nodes, launcher.tasks_per_node, launcher.gpus_per_task,
            launcher.cpus_per_task, launcher.mem_gb) == (60, 1, 8, 1, 8, 64)


def test_overrides_reach_typed_fields(compose_config):
    cfg = compose_config("model=transformer", "model.depth=4", "data=slcp", "train.steps=500",
                         "mesh.model_axis=4", "rule=tensor", "rule.embed=model", "mesh.devices=[0,1,2,3]")
    assert (cfg.model.depth, cfg.data.name, cfg.train.steps) == (4, "slcp", 500)
    assert cfg.mesh.model_axis == 4 and list(cfg.mesh.devices) == [0, 1, 2, 3]
    assert rule_table(cfg.rule) == ("tensor+overrides", {**dict(RULES["tensor"]), "embed": "model"})


# ------------------------------------------------------------------ typed validation

@pytest.mark.parametrize("overrides,key", [
    (("mesh.modle_axis=2",), "mesh.modle_axis"),
    (("model.widht=64",), "model.widht"),
    (("model=transformer", "model.width=64"), "model.width"),  # an MLP field on the transformer
    (("rule.embd=data",), "rule.embd"),
    (("seeed=1",), "seeed"),
])
def test_mistyped_key_is_rejected_with_its_name(compose_config, overrides, key):
    with pytest.raises(ConfigCompositionException, match=re.escape(key)):
        compose_config(*overrides)


@pytest.mark.parametrize("override,key,kind", [
    ("train.steps=ten", "train.steps", "Integer"),
    ("mesh.model_axis=two", "mesh.model_axis", "Integer"),
    ("train.learning_rate=fast", "train.learning_rate", "Float"),
    ("strict=maybe", "strict", "not a valid bool"),
    ("model=transformer model.heads=8.5", "model.heads", "Integer"),
])
def test_wrong_type_is_rejected_with_its_name(compose_config, override, key, kind):
    with pytest.raises(ConfigCompositionException, match=re.escape(key)) as err:
        compose_config(*override.split())
    assert kind in str(err.value.__cause__)


# ------------------------------------------------------------------ validate()

@pytest.mark.parametrize("overrides,message", [
    (("mesh.spec=grid",), "mesh.spec=grid is not one of null, auto, dict"),
    (("mesh.model_axis=0",), "mesh.model_axis=0 must be >= 1"),
    (("mesh=auto", "mesh.model_axis=2"), "need the dict form: use mesh=dict mesh.model_axis=2"),
    (("mesh=none", "mesh.model_axis=2"), "instead of mesh=none"),
    (("model.init=lazy",), "model.init=lazy is not one of sharded, eager"),
    (("data.batch_size=0",), "data.batch_size=0 must be >= 1"),
    (("data.num_simulations=0",), "data.num_simulations=0 must be >= 1"),
    (("data.val_fraction=1.0",), "data.val_fraction=1.0 must lie strictly between 0 and 1"),
    (("train.steps=0",), "train.steps=0 must be >= 1"),
    (("train.log_every=0",), "train.log_every=0 must be >= 1"),
    (("train.learning_rate=0",), "train.learning_rate=0.0 must be > 0"),
    (("train.keep=0",), re.compile(r"train\.keep.* >= 1")),  # a regex: the value may be quoted
    (("train.checkpoint_every=-1",), re.compile(r"train\.checkpoint_every.* >= 0")),
    (("eval.num_samples=5", "eval.c2st_folds=3"), "eval.num_samples=5 must be >= 2 * eval.c2st_folds"),
    (("eval.c2st_folds=1",), "eval.c2st_folds=1 must be >= 2"),
    (("eval.ode_steps=0",), "eval.ode_steps=0 must be >= 1"),
    (("eval.observations=[0,3]",), "eval.observations=[0,3] must list sbibm observations 1..10"),
    (("train.schedule=linear",), "train.schedule=linear is not one of cosine, constant"),
    (("train.warmup_steps=4000",), "train.warmup_steps=4000 must lie in 0..train.steps-1 (2999)"),
    (("train.ema_decay=1.0",), "train.ema_decay=1.0 must lie in [0, 1) (0: no EMA)"),
    (("train.patience=-1",), "train.patience=-1 must be >= 0"),
    (("data.theta_transform=logit",), "data.theta_transform=logit is not one of support, none"),
    (("data.x_transform=sqrt",), "data.x_transform=sqrt is not one of none, log"),
    (("devices.cpu_count=0",), "devices.cpu_count=0 must be >= 1"),
    (("distributed.mode=mpi",), "distributed.mode=mpi is not one of none, auto, explicit"),
    # Was: trained one unsynchronised copy per process, then failed saving the first checkpoint.
    (("distributed=local", "mesh=none"), "mesh=none in a job of 2 processes: each process would train its own "
                                         "copy of the model, unsynchronised; set mesh=auto"),
    # Was "distributed.mode=explicit needs distributed.coordinator_address", a key the user never set.
    (("distributed=local", "distributed.local_processes=1"),
     "distributed=local with distributed.local_processes=1 starts no processes; set distributed.local_processes=2 "
     "(or more), or distributed=none for one process"),
    (("+rule.bogus=data",), "rule.bogus is not a logical axis; valid keys: " + ", ".join(LOGICAL_AXES)),
    # Hydra suggests "+model.dpeth=2" for the typo; the factory then got dpeth as a keyword, after simulating.
    (("model=flux1", "+model.dpeth=2"), "model.dpeth is not a setting of model=flux1 (did you mean model.depth?)"),
    (("+model.widht=64",), "drop +model.widht=64 and set model.width=64"),
    # Every typed section, not only the model's: these ran on with the default, the key ignored.
    (("+mesh.modle_axis=2",), "mesh.modle_axis is not a setting of mesh (did you mean mesh.model_axis?); its "
                              "settings: spec, model_axis, devices; drop +mesh.modle_axis=2 and set mesh.model_axis=2"),
    (("+train.stepz=5",), "drop +train.stepz=5 and set train.steps=5"),
    (("+eval.num_sample=64",), "drop +eval.num_sample=64 and set eval.num_samples=64"),
    (("+data.batch=32",), "drop +data.batch=32 and set data.batch_size=32"),
    (("+activation.hed_axis=model",), "drop +activation.hed_axis=model and set activation.head_axis=model"),
    (("+distributed.xyz=1",), "distributed.xyz is not a setting of distributed; its settings: mode,"),
    (("+seeed=1",), "seeed is not a setting (did you mean seed?); drop +seeed=1 and set seed=1"),
    (("rule.embed=5",), "rule.embed=5 must be a mesh axis name, a list of them, or null"),
    (("rule.mlp=[]",), "rule.mlp=[]: a list must hold mesh axis names"),
    # No Hydra app running: run(cfg) from Python, in the settings it sets (round 48; launch.py's: test_resume_refusals)
    (("train.resume=''",), "cfg.train.resume='' is empty: pass cfg.train.resume='auto'"),
    (("train.resume=AUTO",), "cfg.train.resume='AUTO' is read as a folder name; to continue from this run's own "
                             "folder, pass cfg.train.resume='auto'"),
])
@pytest.mark.fast_cases(6)
def test_validate_rejects_with_the_key(compose_config, overrides, message):
    cfg = compose_config(*overrides)
    with pytest.raises(ConfigError, match=message if isinstance(message, re.Pattern) else re.escape(message)):
        validate(cfg)


@pytest.mark.parametrize("spec, fix", [
    ("none", "null"), ("NONE", "null"), ("no", "null"), ("Auto", "auto"), ("dikt", "dict"), ("grid", "auto")])
@pytest.mark.fast_cases(2)
def test_a_refused_mesh_spec_names_the_one_it_meant_once(compose_config, spec, fix):
    # Was: launch.py mesh.spec=none said "... is not one of null, auto, dict (e.g. mesh=auto); e.g. mesh.spec=dict",
    # two guesses, neither the null (mesh=none) that 'none' meant.
    with pytest.raises(ConfigError) as err:
        validate(compose_config(f"mesh.spec={spec}"))
    assert str(err.value) == f"mesh.spec={spec} is not one of null, auto, dict; e.g. mesh.spec={fix}"
    validate(compose_config(f"mesh.spec={fix}"))  # the fix, typed, passes


@pytest.mark.parametrize("overrides,held_out,fixes", [
    # Was accepted: 1e-6 of 10,000 rounds to 0 held-out pairs, which the split silently made 1, so the best weights
    # and early stopping followed the loss of one pair.
    # The message counts the pairs as the split holds them out (split_rows.held_out_pairs): 1, not the 0 of rounding.
    (("data.val_fraction=1e-6",), 1, ("data.val_fraction=0.001", "data.num_simulations=10000000")),
    (("data.val_fraction=0.0001",), 1, ("data.val_fraction=0.001", "data.num_simulations=100000")),
    (("data.num_simulations=50", "data.batch_size=32"), 5,
     ("data.val_fraction=0.2", "data.num_simulations=100 ")),  # the budget's kind
    (("data.num_simulations=8", "data.batch_size=32"), 1, ("data.num_simulations=100 ",)),  # no fraction below 1
    # Each fix leaves a batch of training pairs: was "data.val_fraction=0.2" (40 pairs for quick's batch of 64)
    # and "data.num_simulations=100" at the default batch of 1024, each refused in turn by the batch check.
    (("experiment=quick", "data.num_simulations=50"), 5, ("data.num_simulations=100 ",)),
    (("data.num_simulations=50",), 5, ("data.num_simulations=1138 ",)),
])
@pytest.mark.fast_cases(2)
def test_too_few_held_out_pairs_are_refused_naming_the_minimum(compose_config, overrides, held_out, fixes):
    from gensbi_sharding.harness.data import split_sizes
    from gensbi_sharding.harness.held_out import MIN_VAL_PAIRS

    with pytest.raises(ConfigError) as err:
        validate(compose_config(*overrides))
    message = str(err.value)
    assert message.startswith(f"data.val_fraction={compose_config(*overrides).data.val_fraction} holds out "
                              f"{held_out} of the "), message
    assert f"fewer than the {MIN_VAL_PAIRS} pairs a run validates on" in message and MIN_VAL_PAIRS == 10
    for fix in fixes:
        assert fix in message, message
        fix = fix.strip()
        key = fix.split("=")[0]
        fixed = compose_config(*[o for o in overrides if not o.startswith(key)], fix)
        validate(fixed)  # each fix is accepted, and leaves a batch of training pairs (the next check)
        assert split_sizes(fixed.data.num_simulations, fixed.data.val_fraction)[0] >= fixed.data.batch_size
    if len(fixes) == 1:
        assert "data.val_fraction=" not in message.split(": set ")[1]
    validate(compose_config("data.val_fraction=0.001"))  # 10 of 10,000: the minimum, accepted


@pytest.mark.parametrize("overrides,fix", [
    # Was "e.g. distributed.local_processes=1" (the schema's default) for distributed=local, which then refused 1.
    (("distributed=local", "distributed.local_processes=0"), "distributed.local_processes=2"),
    (("distributed=local", "distributed.local_processes=-1"), "distributed.local_processes=2"),
    (("distributed.local_processes=0",), "distributed.local_processes=1"),  # distributed=none: one process
])
def test_a_refused_process_count_names_a_count_that_runs(compose_config, overrides, fix):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(*overrides))
    assert str(err.value) == f"{overrides[-1]} must be >= 1; set {fix}"
    validate(compose_config(*overrides[:-1], fix))  # the fix is accepted


@pytest.mark.parametrize("overrides,message", [
    # Was: inf passed "must be > 0", trained, and ended at the first checkpoint with "config must be
    # JSON-serialisable (Out of range float values are not JSON compliant: inf)", naming no key.
    (("train.learning_rate=inf",), "train.learning_rate=inf is not a finite number; e.g. train.learning_rate=0.003"),
    (("train.learning_rate=nan",), "train.learning_rate=nan is not a finite number; e.g. train.learning_rate=0.003"),
    (("train.weight_decay=-inf",), "train.weight_decay=-inf is not a finite number; e.g. train.weight_decay=0.0001"),
    (("data.val_fraction=nan",), "data.val_fraction=nan is not a finite number; e.g. data.val_fraction=0.1"),
    # The chosen model's own schema names the fix (was an OverflowError from int(hidden * inf)).
    (("model=flux1", "model.mlp_ratio=inf"), "model.mlp_ratio=inf is not a finite number; e.g. model.mlp_ratio=4.0"),
])
@pytest.mark.fast_cases(2)
def test_a_setting_that_is_not_a_finite_number_is_refused_naming_it(compose_config, overrides, message):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(*overrides))
    assert str(err.value) == message
    key, fix = message.rsplit("e.g. ", 1)[1].split("=")
    validate(compose_config(*overrides[:-1], f"{key}={fix}"))


@pytest.mark.parametrize("overrides,message", [
    # Was: accepted; the simulator raised OverflowError ("argument path is y ... value 3000000000"), naming no key.
    (("data.num_simulations=3000000000",), "data.num_simulations=3000000000 is beyond the largest whole number a "
     "run can use (2,147,483,647: JAX holds counts and seeds as 32-bit integers); e.g. data.num_simulations=10000"),
    # Was: trained, then the sampler raised the same OverflowError.
    (("eval.ode_steps=3000000000",), "eval.ode_steps=3000000000 is beyond the largest whole number a run can use "
     "(2,147,483,647: JAX holds counts and seeds as 32-bit integers); e.g. eval.ode_steps=32"),
    # Was: trained, then C2ST raised "Seed must be between 0 and 2**32 - 1".
    (("seed=99999999999",), "seed=99999999999 is beyond the largest whole number a run can use (2,147,483,647: "
     "JAX holds counts and seeds as 32-bit integers); e.g. seed=0"),
    (("train.steps=99999999999999",), "train.steps=99999999999999 is beyond the largest whole number a run can use "
     "(2,147,483,647: JAX holds counts and seeds as 32-bit integers); e.g. train.steps=3000"),
    (("model=transformer", "model.embed=-3000000000"), "model.embed=-3000000000 is beyond the largest whole number "
     "a run can use (2,147,483,647: JAX holds counts and seeds as 32-bit integers); e.g. model.embed=64"),
    # Was: accepted (a dry run compiled it); a run simulated, then the batch shuffler refused it.
    (("seed=-1",), "seed=-1 must be >= 0; e.g. seed=0"),
])
# (2**31 - 1 itself passes: test_the_largest_whole_number_is_accepted)
@pytest.mark.fast_cases(2)
def test_a_whole_number_a_run_cannot_use_is_refused_naming_it(compose_config, overrides, message):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(*overrides))
    assert str(err.value) == message
    validate(compose_config(*overrides[:-1], message.rsplit("e.g. ", 1)[1]))  # the fix is accepted


@pytest.mark.parametrize("overrides,message", [
    # Was: refused by the factory once the simulations were done, as "depth must be a positive integer, got 0;
    # pass e.g. depth=8" (a dry run: no model. prefix), "pass 4", or no value at all for embed % heads.
    (("model.depth=0",), "model.depth=0 must be >= 1; e.g. model.depth=3"),
    (("model.width=-5",), "model.width=-5 must be >= 1; e.g. model.width=128"),
    (("model.time_embed_dim=3",), "model.time_embed_dim=3 must be even (as many sines as cosines); e.g. "
                                  "model.time_embed_dim=4"),
    (("model=transformer", "model.mlp_ratio=0"), "model.mlp_ratio=0 must be >= 1; e.g. model.mlp_ratio=4"),
    (("model=transformer", "model.embed=60", "model.heads=7"), "model.embed=60 must be a multiple of model.heads=7 "
     "(each head takes embed / heads features); set model.heads=6, or model.embed=63"),
])
@pytest.mark.fast_cases(2)
def test_an_mlp_or_transformer_size_that_cannot_be_built_is_refused_before_simulating(compose_config, overrides,
                                                                                      message):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(*overrides))
    assert str(err.value) == message
    for fix in re.findall(r"(model\.\w+=\d+)(?:,|$)", message):  # each fix named is accepted
        validate(compose_config(*overrides, fix))


@pytest.mark.parametrize("steps", [10_001, 100_000_000])
def test_an_ode_step_count_that_would_sample_for_hours_is_refused_naming_it(compose_config, steps):
    # Was: eval.ode_steps=100000000 accepted (any up to 2**31 - 1): the run trained, then sampled for days.
    with pytest.raises(ConfigError) as err:
        validate(compose_config(f"eval.ode_steps={steps}"))
    assert str(err.value) == (f"eval.ode_steps={steps} is above 10,000: each step runs the network over every sample, "
                              f"{steps // 32:,} times the default's (32) sampling time; flow-matching samplers use "
                              "10-1,000 steps; set eval.ode_steps=1000")
    validate(compose_config("eval.ode_steps=1000"))  # the fix is accepted, and the bound itself
    validate(compose_config("eval.ode_steps=10000"))


def test_the_largest_whole_number_is_accepted(compose_config):
    validate(compose_config(f"seed={2**31 - 1}", f"data.num_simulations={2**31 - 1}"))


@pytest.mark.parametrize("override,fragment", [
    # Was a Python traceback from the folder callback and run() (InterpolationKeyError, a UserWarning before it).
    ("train.steps=${data.nope}", "(Interpolation key 'data.nope' not found); give a value, e.g. train.steps=3000"),
    ("train.steps=${data.val_fraction}", "could not be converted to Integer); give a value, e.g. train.steps=3000"),
    ("train.resume=${oc.env:GENSBI_TEST_UNSET_VARIABLE}", "Environment variable 'GENSBI_TEST_UNSET_VARIABLE' not "
                                                          "found\"); give a value, e.g. train.resume=null"),
    ("train.schedule=${nope}", "(Interpolation key 'nope' not found); give a value, e.g. train.schedule=cosine"),
    ("rule.embed=${mesh.nope}", "(Interpolation key 'mesh.nope' not found); give a value, or point"),
    ("eval.observations=[1,${nope}]", "eval.observations[1]=${nope} cannot be resolved"),
])
@pytest.mark.fast_cases(2)
def test_an_interpolation_that_points_nowhere_is_named_with_its_fix(compose_config, override, fragment):
    from gensbi_sharding.harness.config_values import interpolation_problem

    cfg = compose_config(override)
    problem = interpolation_problem(cfg)
    key, value = override.split("=", 1)
    assert problem.startswith(f"{key.split('[')[0]}") and value.split(",")[-1].rstrip("]") in problem
    assert fragment.replace('\\"', '"') in problem and "existing key of the right type" in problem
    with pytest.raises(ConfigError, match=re.escape("cannot be resolved")):
        validate(cfg)
    assert interpolation_problem(compose_config("train.steps=${data.batch_size}")) is None  # one that resolves


MISSING = "??? is OmegaConf's mark of a value still to be given, which no run can read; give a value"


@pytest.mark.parametrize("override,said", [
    # Was "MissingMandatoryValue: Missing mandatory value: train.steps" and three lines of OmegaConf's
    # (full_key, reference_type, object_type); mesh.devices=???, a traceback; model.width=???, the run's refusal in
    # the folder Hydra had made (error.txt, launch.log, metrics.json).
    ("train.steps=???", f"train.steps=???: {MISSING}, e.g. train.steps=3000"),
    ("model.width=???", f"model.width=???: {MISSING}, e.g. model.width=128"),
    ("data.name=???", f"data.name=???: {MISSING}, e.g. data.name=two_moons"),
    ("eval.observations=[1,???]", f"eval.observations=[1,???]: {MISSING}, e.g. eval.observations=null"),
])
def test_a_value_left_missing_is_named_with_its_fix(compose_config, override, said):
    from gensbi_sharding.harness.config_values import interpolation_problem

    cfg = compose_config(override)
    assert interpolation_problem(cfg) == said
    with pytest.raises(ConfigError, match=re.escape(said)):
        validate(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("override", ["model.width=???", "mesh.devices=[0,???]"])
def test_a_value_left_missing_is_refused_in_one_line_before_any_folder(tmp_path, override):
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), "experiment=quick", override,
                          f"hydra.run.dir={out}"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert ran.returncode == 1 and not out.exists(), ran.stderr
    key = override.split("=")[0]
    assert ran.stderr.splitlines() == [f"[ERROR] {override}: {MISSING}, e.g. {key}="
                                       f"{'32' if key == 'model.width' else 'null'}"], ran.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", [["hydra.run.dir=???"], ["-m", "hydra.sweep.dir=???", "seed=1"]])
def test_an_output_folder_left_missing_is_refused_before_any_folder(tmp_path, args):
    # Was: hydra.run.dir=??? trained and wrote its outputs into ./None (the folder check read the mark as None);
    # hydra.sweep.dir=??? ended in OmegaConf's MissingMandatoryValue traceback from Hydra's sweep.
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), *args, "experiment=quick", "dry_run=true"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    key = args[-1 if len(args) == 1 else 1].split("=")[0]
    assert ran.returncode == 1 and list(tmp_path.iterdir()) == [], ran.stderr
    assert ran.stderr.splitlines() == [f"[ERROR] {key}=???: {MISSING}, e.g. {key}=runs/a"], ran.stderr


def test_a_multirun_with_an_unresolvable_override_lists_its_jobs_unresolved(compose_config):
    # Was: the folder callback resolved hydra.overrides.task, raised InterpolationKeyError (a warning), and so
    # skipped the folder lock and its checks; the summary callback failed the same way.
    from gensbi_sharding.harness.sweep_plan import command_overrides, every_job

    cfg = compose_config("train.steps=4", hydra=True)
    with open_dict(cfg):
        cfg.hydra.overrides.task = ["train.steps=2,${data.nope}"]
    assert command_overrides(cfg)[0] == ["train.steps=2,${data.nope}"]
    assert every_job(cfg) == [["train.steps=2"], ["train.steps=$\\{data.nope\\}"]]  # escaped, as Hydra's job has it


@pytest.mark.slow
@pytest.mark.parametrize("overrides,message,fix", [
    # Was "... names a mesh axis twice; list each mesh axis once" (activation: after the mesh was built), no override.
    (("activation.sequence_axis=[model,model]",), "activation: sequence_axis=[model,model] names a mesh axis "
     "twice; list each mesh axis once: set activation.sequence_axis=model", "activation.sequence_axis=model"),
    (("activation.head_axis=[data,model,data]",), "activation: head_axis=[data,model,data] names a mesh axis "
     "twice; list each mesh axis once: set activation.head_axis=[data,model]", "activation.head_axis=[data,model]"),
    (("rule.mlp=[model,model]",), "rule.mlp=[model,model] names a mesh axis twice; list each mesh axis once: "
     "set rule.mlp=model", "rule.mlp=model"),
    (("rule.mlp=[]",), "rule.mlp=[]: a list must hold mesh axis names; e.g. rule.mlp=model, or rule.mlp=null "
     "(unsplit)", "rule.mlp=null"),
    # Was: passed validation, then refused by PartitionAxis at [4/7] inside the run's folder (error.txt left), under
    # model=mlp too, which reads no head axis
    (("activation.head_axis=[]",), "activation: head_axis=[] lists no mesh axis; for none set "
     "activation.head_axis=null (unsplit)", "activation.head_axis=null"),
    (("activation=none", "activation.batch_axis=[]"), "activation: batch_axis=[] lists no mesh axis; for none set "
     "activation.batch_axis=null (unsplit)", "activation.batch_axis=null"),
])
def test_a_mesh_axis_list_refusal_names_the_override_that_fixes_it(compose_config, overrides, message, fix):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(*overrides))
    assert str(err.value) == message
    validate(compose_config(fix))


def test_rule_table_forms():
    assert rule_table("fsdp") == ("fsdp", dict(RULES["fsdp"]))
    assert rule_table({"embed": ["data", "model"]}) == (
        "custom", {**{k: None for k in LOGICAL_AXES}, "embed": ("data", "model")})
    with pytest.raises(ConfigError, match="unknown rule 'zero3'; choose one of replicated, fsdp, tensor"):
        rule_table("zero3")
    with pytest.raises(ConfigError, match="rule must be a mapping"):
        rule_table(["embed", "data"])


def test_a_rule_file_without_a_name_is_called_by_its_file(tmp_path):
    # A new user's report: conf/rule/wide_mlp.yaml holding only "embed: data" and "mlp: model", run as
    # rule=wide_mlp, was reported as rule 'custom' (console, metrics.json's rule), as was every other such file.
    from faults_helpers import under_command

    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / "wide_mlp.yaml").write_text("embed: data\nmlp: model\n")
    name, table = under_command([f"hydra.searchpath=[file://{tmp_path}]", "rule=wide_mlp"],
                                lambda cfg: rule_table(cfg.rule))
    assert (name, table["embed"], table["mlp"]) == ("wide_mlp", "data", "model")
    assert under_command(["rule=fsdp", "rule.mlp=model"], lambda cfg: rule_table(cfg.rule))[0] == "fsdp+overrides"


@pytest.mark.slow
def test_a_rule_files_table_changed_on_the_command_line_is_reported_as_overridden(tmp_path):
    # Was: launch.py rule=my_rule ++rule.heads=model (the README's rule file) was reported as rule 'my_rule' in the
    # console and metrics.json, its table not the file's; a built-in so changed was 'fsdp+overrides'.
    from faults_helpers import under_command

    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / "r69rule.yaml").write_text("name: r69rule\nembed: data\nmlp: model\n")
    searched = f"hydra.searchpath=[file://{tmp_path}]"
    for typed, name in ((["++rule.heads=model"], "r69rule+overrides"), (["rule.mlp=null"], "r69rule+overrides"),
                        ([], "r69rule"), (["rule.mlp=model"], "r69rule"), (["++rule.heads=null"], "r69rule")):
        got, table = under_command([searched, "rule=r69rule", *typed], lambda cfg: rule_table(cfg.rule))
        assert got == name, typed  # the file's values typed again: its own table, its own name
    assert table["heads"] is None and table["mlp"] == "model"


def test_rule_table_is_checked_against_the_mesh():
    name, table = rule_table("tensor")
    check_table_against_mesh(name, table, ("data", "model"))
    with pytest.raises(ConfigError, match=r"rule\.mlp=model \(rule tensor\) names mesh axis model, which the "
                                          r"mesh lacks; valid values: data or null"):
        check_table_against_mesh(name, table, ("data",))


# ------------------------------------------------------------------ mesh_spec

@pytest.mark.parametrize("overrides,spec,shape,ids", [
    (("mesh=none",), None, None, None),
    (("mesh=auto",), "auto", (8, 1), list(range(8))),
    (("mesh=dict",), {"model_axis": 1, "devices": None}, (8, 1), list(range(8))),
    (("mesh.model_axis=2",), {"model_axis": 2, "devices": None}, (4, 2), list(range(8))),
    (("mesh.model_axis=2", "mesh.devices=[7,6,5,4]"), {"model_axis": 2, "devices": [7, 6, 5, 4]},
     (2, 2), [7, 6, 5, 4]),
])
def test_mesh_spec_forms(compose_config, devices, overrides, spec, shape, ids):
    got = mesh_spec(compose_config(*overrides).mesh)
    plain = OmegaConf.to_container(got) if OmegaConf.is_config(got) else got
    if isinstance(plain, dict) and plain.get("devices") is not None:
        plain = {**plain, "devices": list(plain["devices"])}
    assert plain == spec
    mesh = resolve_mesh(got)
    if shape is None:
        assert mesh is None
        return
    assert mesh.axis_names == ("data", "model") and mesh.devices.shape == shape
    assert [d.id for d in mesh.devices.flat] == ids


# ------------------------------------------------------------------ JAX start-up (fresh interpreters)

def _run_python(code: str) -> dict:
    env_code = "import os; os.environ['JAX_PLATFORMS'] = 'cpu'\n" + code
    proc = subprocess.run([sys.executable, "-c", env_code], cwd=REPO, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_importing_everything_leaves_the_backend_unstarted():
    result = _run_python(f"""
import importlib, importlib.util, json, pkgutil
import gensbi_sharding, gensbi_sharding.harness
names = [m.name for m in pkgutil.walk_packages(gensbi_sharding.__path__, "gensbi_sharding.")]
for name in names:
    importlib.import_module(name)
spec = importlib.util.spec_from_file_location("launch", {str(REPO / "launch.py")!r})
launch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(launch)
import jax
# JAX refuses this setting once its backend started (RuntimeError): the public way to ask.
try:
    jax.config.update("jax_num_cpu_devices", 4)
    started = False
except RuntimeError:
    started = True
print(json.dumps({{"names": names, "started": started, "devices": len(jax.devices()),
                  "has_main": callable(launch.main)}}))
""")
    assert not result["started"]
    assert result["devices"] == 4 and result["has_main"]
    assert {"gensbi_sharding.harness.run", "gensbi_sharding.harness.config",
            "gensbi_sharding.harness.devices", "gensbi_sharding.harness.outputs",
            "gensbi_sharding.harness.train", "gensbi_sharding.harness.models.mlp"} <= set(result["names"])


@pytest.mark.slow
def test_configure_devices_refuses_another_count_once_started():
    result = _run_python("""
import json
import jax
jax.config.update("jax_num_cpu_devices", 4)
n = len(jax.devices())
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import configure_devices
try:
    configure_devices(8)
    error = None
except ConfigError as err:
    error = str(err)
configure_devices(4)  # the count in force: fine
print(json.dumps({"n": n, "error": error, "after": len(jax.devices())}))
""")
    assert result["n"] == 4 and result["after"] == 4
    assert result["error"] is not None
    assert "devices.cpu_count=8" in result["error"] and "with 4 CPU devices" in result["error"]
    assert "devices.cpu_count=4" in result["error"]  # the fix


@pytest.mark.slow
def test_configure_devices_before_start_sets_the_count():
    result = _run_python("""
import json
from gensbi_sharding.harness.devices import configure_devices
configure_devices(3, "cpu")
import jax
print(json.dumps({"n": len(jax.devices()), "platform": jax.default_backend()}))
""")
    assert result == {"n": 3, "platform": "cpu"}


@pytest.mark.slow
@pytest.mark.skipif(any(__import__("importlib.util").util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin")),
                    reason="CUDA is available here: JAX_PLATFORMS=cuda starts")
# a stray space: shown; a typo after cpu: JAX started cpu before refusing it (was: a multirun's later job ran)
@pytest.mark.parametrize("env, named", [("cuda", "cuda"), ("cpu ", "'cpu '"), ("cpu,cdua", "cpu,cdua")])
def test_jax_platforms_naming_a_platform_not_here_is_refused_naming_it_in_every_job(env, named):
    # Was: JAX_PLATFORMS=cuda on a CPU machine ended the run with a bare "AssertionError: " (JAX_PLATFORMS=gpu: JAX's
    # "Unable to initialize backend 'rocm'"), and a multirun's later job then ran on the CPU the probe had started.
    proc = subprocess.run([sys.executable, "-c", """
import json
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import configure_devices
errors = []
for job in range(2):  # a multirun's jobs, in one process
    try:
        configure_devices(4)
        errors.append(None)
    except ConfigError as err:
        errors.append(str(err))
configure_devices(4, "cpu")  # the fix the message names
import jax
print(json.dumps({"errors": errors, "backend": jax.default_backend(), "n": jax.device_count()}))
"""], cwd=REPO, capture_output=True, text=True, timeout=180, env={**__import__("os").environ, "JAX_PLATFORMS": env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = (f"JAX_PLATFORMS={named} is not available here: JAX has cpu; unset JAX_PLATFORMS for JAX's default, or set "
                "JAX_PLATFORMS=cpu")
    assert result == {"errors": [expected, expected], "backend": "cpu", "n": 4}


@pytest.mark.slow
@pytest.mark.parametrize("env", ["gpu", None])  # None: devices.platform=gpu
def test_a_gpu_platform_jax_refuses_on_a_cuda_machine_is_told_cuda_not_gpu_again(env):
    # JAX reads "gpu" as cuda, rocm and oneapi, each to start: on a CUDA machine rocm fails ("Unable to initialize
    # backend 'rocm'", jax-ml/jax#25315), leaving cuda started, and jax.devices("gpu") then works. Was: "JAX_PLATFORMS=gpu
    # is not available here: JAX has gpu; ... or set JAX_PLATFORMS=gpu", the value refused named as its fix.
    # A fresh process: one that refused a JAX_PLATFORMS before refuses it again at once (a multirun's later job).
    proc = subprocess.run([sys.executable, "-c", """
import json, sys
import jax
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import check_platform

calls = []

def devices(backend=None):  # such a machine's answers (no config changed: started=True)
    calls.append(backend)
    if len(calls) == 1:  # the first start: cuda started, then rocm failed
        raise RuntimeError("Unable to initialize backend 'rocm': Backend 'rocm' is not in the list of known "
                           "backends: ['cpu', 'tpu', 'cuda']")
    if backend in ("cuda", "gpu"):  # later calls: the backends JAX kept, cuda's alone
        return ["cuda:0"]
    raise RuntimeError(f"Unknown backend {backend}. Available backends are ['cuda']")

jax.devices, jax.default_backend = devices, lambda: devices()
try:
    check_platform(None if sys.argv[1] else "gpu", started=True)
except ConfigError as err:
    print(json.dumps(str(err)))
""", env or ""], cwd=REPO, capture_output=True, text=True, timeout=180,
                          env={**__import__("os").environ, "JAX_PLATFORMS": env or ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    refused = json.loads(proc.stdout.strip().splitlines()[-1])
    named = "JAX_PLATFORMS=gpu" if env else "devices.platform=gpu"
    assert refused.startswith(f"{named} is not available here: JAX has cuda; "), refused
    assert f"set {named.split('=')[0]}=cuda" in refused


def test_the_processes_settings_check_ignores_how_each_process_joined(monkeypatch):
    # Was: process 0 started with distributed.coordinator_address=localhost:1234 (its own host), the others with
    # host0:1234, joined the one coordinator and were then refused as "given other settings"; a per-process join
    # bound (distributed.timeout_s, heartbeat_s) too. Two processes simulated: process 1's text is captured first.
    import jax

    from gensbi_sharding import host_input
    from gensbi_sharding.harness.distributed_checks import processes_config_problem

    def settings(p, address, **more):
        return OmegaConf.create({"seed": 0, "distributed": {"mode": "explicit", "process_id": p, "timeout_s": 120 + p,
                                 "heartbeat_s": 10, "coordinator_address": address}, **more})

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    texts = []
    monkeypatch.setattr(host_input, "texts_if_processes_differ", lambda mine: texts.append(mine))
    processes_config_problem(settings(1, "host0:1234", verbose=True))
    monkeypatch.setattr(host_input, "texts_if_processes_differ",
                        lambda mine: None if mine == texts[0] else [mine, texts[0]])
    assert processes_config_problem(settings(0, "localhost:1234")) is None
    assert processes_config_problem(settings(0, "localhost:1234", data={"batch_size": 64})) == (
        "the 2 processes were given other settings (data.batch_size: 64 on process 0, None on process 1); start "
        "every process with the same overrides (only these may differ: distributed.process_id, verbose, debug, "
        "distributed.coordinator_address, distributed.timeout_s, distributed.heartbeat_s)")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["nowhere", "a_file"])
def test_a_resume_path_that_holds_no_run_names_train_resume(compose_config, tmp_path, where):
    # Was "FileNotFoundError: checkpoint path '...' does not exist ...; pass a run dir ...", naming no override.
    from gensbi_sharding.harness.resume import resume_step_dir

    (tmp_path / "a_file").write_text("")
    given = tmp_path / where
    with pytest.raises(ConfigError) as err:
        resume_step_dir(compose_config(f"train.resume={given}"))
    assert str(err.value).startswith(f"train.resume={given}: ")
    assert str(err.value).endswith(", as train.resume=<folder>; or leave train.resume out to start fresh")


@pytest.mark.parametrize("overrides, fix", [
    (("experiment=quick", "train.steps=0"), "train.steps=0 must be >= 1; e.g. train.steps=20"),
    (("experiment=quick", "eval.ode_steps=0"), "eval.ode_steps=0 must be >= 1; e.g. eval.ode_steps=8"),
    (("train.steps=0",), "train.steps=0 must be >= 1; e.g. train.steps=3000"),  # conf/train's own
    (("experiment=quick", "model.depth=0"), "model.depth=0 must be >= 1; e.g. model.depth=1"),
    (("experiment=quick", "model=transformer", "model.heads=0"), "model.heads=0 must be >= 1; e.g. model.heads=4"),
    (("model.depth=0",), "model.depth=0 must be >= 1; e.g. model.depth=3"),
    (("experiment=quick", "eval.ode_steps=3000000000"), "eval.ode_steps=3000000000 is beyond the largest whole "
     "number a run can use (2,147,483,647: JAX holds counts and seeds as 32-bit integers); e.g. eval.ode_steps=8"),
])
@pytest.mark.fast_cases(2)
def test_a_range_error_suggests_the_default_the_commands_presets_compose(overrides, fix):
    # Was the schema's default under any preset: experiment=quick train.steps=0 said "e.g. train.steps=4000" (quick
    # composes 20), eval.ode_steps=0 "e.g. eval.ode_steps=32" (quick: 8), model.depth=0 "e.g. model.depth=3" (1).
    from faults_helpers import under_command

    def refused(cfg):
        with pytest.raises(ConfigError) as err:
            validate(cfg)
        return str(err.value)

    assert under_command(overrides, refused) == fix
