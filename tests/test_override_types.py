"""``override_problem``: overrides Hydra refuses naming no fix (or a wrong one), named with the override to type.

Before, each of these reached Hydra: a value of the wrong type ("Value '1.5' of type 'float' could not be
converted to Integer", no fix), a misspelled key ("To append to your config use +train.step=5", which the
config check then refuses), a ``~`` deletion ("does not support deletion"; ``~model`` an interpolation
error), an unknown option (the options, not the nearest). A sweep with one such value stopped before any job
and left a sweep folder holding only multirun.yaml.
"""

from __future__ import annotations

import os

import pytest

from checkout_files import options_on_disk, shipped_options
from gensbi_sharding.harness.config_checks import validate
from gensbi_sharding.harness.groups import preset_is_multirun
from gensbi_sharding.harness.override_types import override_problem

INT = "could not be converted to Integer"
# Hydra lists every rule on disk, a user's too (the README's conf/rule/my_rule.yaml): the shipped ones and the others
RULES = ", ".join(options_on_disk("rule"))

CASES = [
    # wrong type for a scalar setting: null, empty, a list, a fraction, a word; the fix is one that composes
    ("train.steps=1.5", f"train.steps=1.5: train.steps takes a whole number (Value '1.5' of type 'float' {INT}); "
                        "e.g. train.steps=2"),
    ("train.steps=null", "train.steps=null: train.steps cannot be null (field 'steps' is not Optional); "
                         "e.g. train.steps=3000"),
    ("train.steps=", f"train.steps=: train.steps cannot be empty (Value '' of type 'str' {INT}); e.g. train.steps=3000"),
    ("train.steps=[1,2]", f"train.steps=[1,2]: train.steps takes one value, not a list (Value '[1, 2]' of type 'list' "
                          f"{INT}); for one job per value, sweep them: -m train.steps=1,2; e.g. train.steps=3000"),
    ("train.learning_rate=fast", "train.learning_rate=fast: train.learning_rate: Value 'fast' of type 'str' could "
                                 "not be converted to Float; e.g. train.learning_rate=0.003"),
    ("strict=maybe", "strict=maybe: strict: Value 'maybe' is not a valid bool (type str); e.g. strict=false"),
    # a word OmegaConf reads as a yes/no (yes, on, y, n, off; '1' quoted): was taken (model.qkv_bias=n ran, off)
    ("eval.plot=yes", "eval.plot=yes: eval.plot is a yes/no: true or false (or 1 or 0), not 'yes'; e.g. eval.plot=true"),
    ("model=flux1 model.qkv_bias=n", "model.qkv_bias=n: model.qkv_bias (model=flux1) is a yes/no: true or false (or 1 "
                                     "or 0), not 'n'; e.g. model.qkv_bias=false"),
    ("-m strict=on,off", "strict=on,off: the swept value on: strict is a yes/no: true or false (or 1 or 0), not 'on'; "
                         "e.g. strict=true,false"),
    # a number for a yes/no: OmegaConf read any as a bool (verbose=2 ran, verbose on), where strict=maybe is refused
    ("verbose=2", "verbose=2: verbose is a yes/no: true or false (or 1 or 0), not 2; e.g. verbose=true"),
    ("eval.plot=-1", "eval.plot=-1: eval.plot is a yes/no: true or false (or 1 or 0), not -1; e.g. eval.plot=true"),
    ("-m strict=0,1,2.5", "strict=0,1,2.5: the swept value 2.5: strict is a yes/no: true or false (or 1 or 0), not "
                          "2.5; e.g. strict=0,1,true"),
    ("seed=1.5", f"seed=1.5: seed takes a whole number (Value '1.5' of type 'float' {INT}); e.g. seed=2"),
    ("model.width=64.5", f"model.width=64.5: model.width (model=mlp) takes a whole number (Value '64.5' of type "
                         f"'float' {INT}); e.g. model.width=64"),
    # a count written short: the count it means (was: "e.g. data.num_simulations=10000", the default, for 20k)
    ("data.num_simulations=20k", "data.num_simulations=20k: data.num_simulations takes a whole number written out, "
                                 f"not 20k (Value '20k' of type 'str' {INT}); e.g. data.num_simulations=20000"),
    ("train.steps=1.5M", "train.steps=1.5M: train.steps takes a whole number written out, not 1.5M (Value '1.5M' of "
                         f"type 'str' {INT}); e.g. train.steps=1500000"),
    ("train.steps=1.5k5", f"train.steps=1.5k5: train.steps: Value '1.5k5' of type 'str' {INT}; e.g. train.steps=3000"),
    # an exponent written with a decimal point: the number it means (was: "e.g. train.learning_rate=0.003", the default)
    ("train.learning_rate=1e-3.0", "train.learning_rate=1e-3.0: train.learning_rate takes a whole exponent, with no "
                                   "decimal point, not 1e-3.0 (Value '1e-3.0' of type 'str' could not be converted to "
                                   "Float); e.g. train.learning_rate=0.001"),
    ("train.steps=1.5e3.0", "train.steps=1.5e3.0: train.steps takes a whole exponent, with no decimal point, not "
                            f"1.5e3.0 (Value '1.5e3.0' of type 'str' {INT}); e.g. train.steps=1500"),
    ("train.learning_rate=1e-3.5", "train.learning_rate=1e-3.5: train.learning_rate: Value '1e-3.5' of type 'str' "
                                   "could not be converted to Float; e.g. train.learning_rate=0.003"),
    ("model=flux1 model.dtype=null", "model.dtype=null: model.dtype (model=flux1) cannot be null (field 'dtype' is "
                                     "not Optional); e.g. model.dtype=float32"),
    # in a sweep: the one bad value, and the sweep with it replaced
    ("-m train.steps=2,1.5,3", f"train.steps=2,1.5,3: the swept value 1.5: train.steps takes a whole number (Value "
                            f"'1.5' of type 'float' {INT}); e.g. train.steps=2,2,3"),
    # a misspelled key without +: the nearest setting (Hydra said to add it with +, which is refused)
    ("train.step=5", "train.step=5: train.step is not a setting of train (did you mean train.steps?); its settings: "
                     "checkpoint_every, ema_decay, keep, learning_rate, log_every, patience, resume, schedule, steps, "
                     "val_draws, val_every, warmup_steps, weight_decay; write train.steps=5"),
    ("seeed=1", "seeed=1: seeed is not a setting (did you mean seed?); its settings: debug, dry_run, seed, strict, "
                "verbose; write seed=1"),
    # ~ deletions of what every run needs
    ("~train.steps", "~train.steps: a setting cannot be removed (every run reads it); set it instead, "
                     "e.g. train.steps=3000"),
    ("~seed", "~seed: a setting cannot be removed (every run reads it); set it instead, e.g. seed=0"),
    ("~model", "~model: the model group cannot be removed, every run needs one; pick an option instead: "
               "model=flux1, model=mlp, model=simformer, model=transformer"),
    ("~mesh", "~mesh: the mesh group cannot be removed, every run needs one (mesh=none: no mesh); pick an option "
              "instead: mesh=auto, mesh=dict, mesh=none"),
    ("~rule.embed", "~rule.embed: a rule's axis cannot be removed; set rule.embed=null to leave it unsplit"),
    # + on a group every run has: Hydra's "To override a value use 'override model: transformer'" is YAML
    ("+model=transformer", "+model=transformer: every run has a model already (conf/config.yaml picks one), so + adds "
                           "a second; to pick this one, write model=transformer"),
    # an option no group has, alone or in a sweep: the nearest one
    ("model=mlpp", "model=mlpp: Could not find 'model/mlpp' (model options: flux1, mlp, simformer, transformer); "
                   "did you mean model=mlp?"),
    ("rule=fdsp", f"rule=fdsp: Could not find 'rule/fdsp' (rule options: {RULES}); did you mean rule=fsdp?"),
    ("-m rule=replicated,fdsp", f"rule=replicated,fdsp: Could not find 'rule/fdsp' (rule options: {RULES}); did you "
                                "mean rule=replicated,fsdp?"),  # the sweep, fixed
]


SWEEPS_WITHOUT_M = [
    # Hydra: "Ambiguous value ... 1. use key=[value1,value2] 2. quote the value", which a scalar setting refuses
    ("train.steps=1,2", "train.steps=1,2: several values are a sweep, one job per value, which needs -m: python "
                        "launch.py -m ... train.steps=1,2"),
    ("model=mlp,transformer", "model=mlp,transformer: several values are a sweep, one job per value, which needs "
                              "-m: python launch.py -m ... model=mlp,transformer"),
    ("rule.embed=data,model", "rule.embed=data,model: several values are a sweep, one job per value, which needs -m: "
                              "python launch.py -m ... rule.embed=data,model, or one list for this run: "
                              "rule.embed=[data,model]"),
]


@pytest.mark.parametrize("command,message", SWEEPS_WITHOUT_M, ids=[c for c, _ in SWEEPS_WITHOUT_M])
def test_a_sweep_without_m_names_m(command, message):
    assert override_problem(command.split()) == message
    for multirun in ("-m", "--multirun", "hydra.mode=MULTIRUN", "sweep=rules_x_model_axis", "experiment=sbibm"):
        assert override_problem([multirun, *command.split()]) is None
    # A preset that does not turn multirun on leaves the sweep to -m (was Hydra's "Ambiguous value ... use
    # key=[value1,value2]": the check was skipped for any experiment=).
    for preset in ("experiment=quick", "experiment=slcp_transformer"):
        assert override_problem([preset, *command.split()]) == message


@pytest.mark.parametrize("group, option, multirun", [
    ("experiment", "sbibm", True), ("sweep", "rules_x_model_axis", True),  # hydra.mode: MULTIRUN
    ("experiment", "quick", False), ("experiment", "slcp_transformer", False),  # overrides of /data, /model only
    ("experiment", "nope", True),  # not found: the safe side
])
def test_a_preset_turns_multirun_on_only_where_its_file_says_so(group, option, multirun, tmp_path):
    assert preset_is_multirun(group, option) is multirun
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\ndefaults:\n  - /experiment/sbibm\n")
    assert preset_is_multirun("experiment", "mine", [f"file://{tmp_path}"])  # another preset's file: the safe side
    assert preset_is_multirun("experiment", "quick", ["pkg://elsewhere"])  # a package path may hold it


def test_the_rule_options_said_are_the_shipped_four_and_the_users_own():
    # The cases' rule options come from the disk (a user's rule file is an option too); the shipped ones stay pinned.
    assert shipped_options("rule") == ["fsdp", "fsdp_tensor", "replicated", "tensor"]
    assert set(shipped_options("rule")) <= set(RULES.split(", "))


@pytest.mark.parametrize("command,message", CASES, ids=[c for c, _ in CASES])
@pytest.mark.fast_cases(4)
def test_an_override_hydra_would_refuse_is_named_with_the_fix(compose_config, command, message):
    args = command.split()
    assert override_problem(args) == message
    fix = message.rsplit("e.g. ", 1)[-1] if "e.g. " in message else message.rsplit("write ", 1)[-1] \
        if "write " in message else None
    if fix and "," not in fix.split("=", 1)[1]:  # the fix, typed instead, composes and passes the config check
        fixed = [*args[:-1], fix]
        assert override_problem(fixed) is None
        validate(compose_config(*fixed))


@pytest.mark.parametrize("command", [
    "train.steps=5", "seed=3", "strict=true", "mesh.spec=null", "data.shards=null", "train.resume=null",
    "model=flux1 model.mlp_ratio=2.5",  # flux1's mlp_ratio is a float (mlp's an int)
    "experiment=slcp_transformer model.mlp_ratio=4",  # the experiment picks the model: Hydra's to check
    "model=transformer model.width=64",  # another model's key: Hydra names it
    # (+train.foo=1, ~experiment and +experiment=quick were listed here: Hydra refused the last two, the config
    # check the first, after composing; prefix_problem refuses them now: tests/test_override_prefixes.py)
    "train.steps=${data.batch_size}", "++train.steps=5", "~sweep", "+rule.embed=data", "hydra.run.dir=/tmp/x",
    "eval.observations=[1,2]", "rule.embed=data", "-m mesh.model_axis=1,2,4", "-m", "--cfg", "job",
])
def test_overrides_hydra_takes_are_left_to_it(command):
    assert override_problem(command.split()) is None


def test_an_option_of_ones_own_on_the_search_path_is_no_misspelling(tmp_path):
    # Was: 'model=my_flux1: Could not find model/my_flux1 ...; did you mean model=flux1?' for the README's own
    # preset through hydra.searchpath, which Hydra finds (two checks landed the same day, each without the other).
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "my_flux1.yaml").write_text("defaults:\n  - /flux1_schema\n")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    assert override_problem([search, "model=my_flux1"]) is None
    assert "did you mean model=mlp?" in override_problem([search, "model=mlpp"])
    assert override_problem(["hydra.searchpath=[pkg://elsewhere.conf]", "model=theirs"]) is None  # Hydra's to list
    assert "Could not find 'model/my_flux1'" in override_problem(["model=my_flux1"])


def test_hydra_searchpath_typed_twice_is_read_as_hydra_reads_it_the_first_one(tmp_path):
    # Hydra 1.3 searches the first hydra.searchpath= typed (its config node keeps the last; +hydra.searchpath= it
    # never reads). Was: both merged, model=my_flux1 of the second's folder passed, then Hydra's own "Could not find".
    from gensbi_sharding.harness.override_grammar import parse

    first, second = tmp_path / "first", tmp_path / "second"
    (first / "model").mkdir(parents=True)
    (second / "model").mkdir(parents=True)
    (second / "model" / "my_flux1.yaml").write_text("defaults:\n  - /flux1_schema\n")
    typed = [f"hydra.searchpath=[file://{first}]", f"hydra.searchpath=[file://{second}]"]
    assert parse(typed).search_paths == [f"file://{first}"]
    assert "Could not find 'model/my_flux1'" in override_problem([*typed, "model=my_flux1"])
    assert override_problem([*reversed(typed), "model=my_flux1"]) is None  # the folder that holds it, searched
    assert parse([f"+hydra.searchpath=[file://{second}]", typed[0]]).search_paths == [f"file://{first}"]


@pytest.mark.parametrize("typed", ["hydra.searchpath=null", "~hydra.searchpath"])
def test_hydra_searchpath_null_adds_no_search_path_as_in_hydra(tmp_path, typed):
    # Read as no search path typed (the primary config's own entries). Was: a search path 'None', read as a pkg://
    # one (Hydra's to list). Hydra itself refuses both ("is not Optional", "does not support deletion"): so does
    # override_problem, and launch.py names model=mlpp's fix beside it.
    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.override_grammar import parse

    assert parse([typed]).search_paths == parse([]).search_paths == []
    assert "did you mean model=mlp?" in command_problem([typed, "model=mlpp"])
    assert override_problem([typed, "model=mlpp"]).startswith(f"{typed}: ")
    (tmp_path / "mine" / "model").mkdir(parents=True)
    (tmp_path / "mine" / "model" / "my_flux1.yaml").write_text("defaults:\n  - /flux1_schema\n")
    (tmp_path / "my.yaml").write_text(f"defaults:\n  - config\n  - _self_\nhydra:\n  searchpath: "
                                      f"[file://{tmp_path / 'mine'}]\n")
    own = ["-cd", str(tmp_path), "-cn", "my"]
    assert parse([*own, typed]).search_paths == [f"file://{tmp_path / 'mine'}", f"file://{tmp_path}"]
    assert override_problem([*own, "model=my_flux1"]) is None


def test_a_glob_over_models_is_checked_against_the_models_it_matches():
    # Was: TypeError "unhashable type: 'Glob'" (a traceback from launch.py) for any command sweeping model=glob(...).
    assert override_problem(["-m", "model=glob(*former)", "model.depth=2"]) is None
    assert override_problem(["-m", "model=glob(*former)", "model.dtype=null"]) == (
        "model.dtype=null: model.dtype (model=simformer) cannot be null (field 'dtype' is not Optional); "
        "e.g. model.dtype=float32")


@pytest.mark.parametrize("schema,name,expected", [
    ("TrainConfig", "steps", (True, 3000)),
    ("TrainConfig", "resume", (True, None)),  # null is a default (written null)
    ("Config", "strict", (True, False)),  # a top-level setting
    ("Flux1Config", "axes_dim", (True, [8, 0])),  # a list's default comes from its factory
    ("ModelConfig", "name", (False, None)),  # required (???): no value to name
    ("TrainConfig", "stepz", (False, None)),  # not a field
    ("dict", "embed", (False, None)),  # the rule table: no schema
])
def test_the_default_of_a_key_is_read_in_one_place(schema, name, expected):
    # Was three helpers (config_checks._with_fix, config_values._schema_default, override_keys.field_default),
    # each reading dataclass defaults its own way (one skipped list factories, one wrote True where an override
    # types true).
    from gensbi_sharding.harness import config
    from gensbi_sharding.harness.override_keys import schema_default

    assert schema_default(getattr(config, schema, dict), name) == expected


def test_every_check_names_that_default_as_the_fix(compose_config):
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_values import interpolation_problem

    assert override_problem(["train.steps=null"]).endswith("; e.g. train.steps=3000")  # before Hydra composes
    assert "e.g. train.steps=3000, or point" in interpolation_problem(compose_config("train.steps=${data.nope}"))
    with pytest.raises(ConfigError, match=r"^train\.steps=0 must be >= 1; e\.g\. train\.steps=3000$"):
        validate(compose_config("train.steps=0"))
    # a list key's default, written as one override: [8,0], not [8, 0] (two shell words)
    assert "e.g. model.axes_dim=[8,0], or point" in interpolation_problem(
        compose_config("model=flux1", "model.axes_dim=${data.nope}"))


@pytest.mark.parametrize("command, message", [
    # Was: Hydra's five-line "Error merging override model.depth=x ... full_key: model.depth ... object_type=MLPConfig"
    # composing the sweep, no fix named: a swept experiment= leaves each job's model unknown before Hydra composes.
    ("-m experiment=quick,slcp_transformer model.depth=x",
     "model.depth=x: model.depth: Value 'x' of type 'str' could not be converted to Integer; e.g. model.depth=2"),
    ("-m experiment=glob(*) model.depth=1.5", "model.depth=1.5: model.depth takes a whole number (Value '1.5' of "
     "type 'float' could not be converted to Integer); e.g. model.depth=2"),
])
def test_a_value_no_model_takes_is_refused_in_a_sweep_over_experiments(command, message):
    assert override_problem(command.split()) == message
    assert override_problem(command.split()[:-1] + ["model.depth=2"]) is None


@pytest.mark.parametrize("command, message", [
    # Was: Hydra's "Ambiguous value for argument" (a preset's multirun: --cfg runs one config), and a traceback
    # ending in ConfigCompositionException under --help.
    ("--cfg job experiment=sbibm data=two_moons,slcp", "data=two_moons,slcp: Hydra composes one job's config for "
     "--cfg, and several values are a sweep; give data one value, e.g. data=two_moons, or leave out --cfg"),
    ("-m --help data=two_moons,slcp", "data=two_moons,slcp: Hydra composes one job's config for --help, and several "
     "values are a sweep; give data one value, e.g. data=two_moons, or leave out --help"),
    ("--cfg job model=glob(*former)", "model=glob(*former): Hydra composes one job's config for --cfg, and several "
     "values are a sweep; give model one value, e.g. model=simformer, or leave out --cfg"),
    # Was: Hydra's "Sweep parameters 'data=glob(*)' requires --multirun" (a glob was no sweep to this check).
    ("data=glob(two*)", "data=glob(two*): several values are a sweep, one job per value, which needs -m: python "
     "launch.py -m ... 'data=glob(two*)'"),  # one shell word (was as typed: bash's syntax error at '(')
])
def test_a_sweep_where_hydra_composes_one_config_is_refused_naming_the_fix(command, message):
    assert override_problem(command.split()) == message


@pytest.mark.slow
@pytest.mark.parametrize("flag", [["-cd", "{d}"], ["--config-dir", "{d}"], ["--config-dir={d}"]])
def test_an_experiment_of_ones_own_in_config_dir_is_no_misspelling(tmp_path, flag):
    # Was: python launch.py --config-dir my_conf experiment=x refused "experiment=x: Could not find 'experiment/x'
    # (experiment options: quick, ...)": the checks read hydra.searchpath's folders, not --config-dir's, which
    # Hydra searches too (and composes experiment=x from).
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "x.yaml").write_text("# @package _global_\ndefaults:\n  - quick\n")
    dir_flag = [f.format(d=tmp_path) for f in flag]
    assert command_problem([*dir_flag, "experiment=x"]) is None
    assert "did you mean experiment=quick?" in command_problem([*dir_flag, "experiment=quik"])
    assert "Could not find 'experiment/x'" in command_problem(["experiment=x"])  # without the folder: refused


def test_the_model_of_ones_own_primary_config_is_the_default(tmp_path):
    # Was: python launch.py -cd my_conf -cn my model.heads=2, with my.yaml including config and picking
    # 'override model: transformer', refused "model=mlp (the default) has no field heads": conf/config.yaml's
    # model was read, not --config-name's.
    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.model_choice import chosen_models

    (tmp_path / "my.yaml").write_text("defaults:\n  - config\n  - override model: transformer\n  - _self_\n")
    (tmp_path / "plain.yaml").write_text("defaults:\n  - config\n  - _self_\n")
    own = ["-cd", str(tmp_path), "-cn", "my"]
    assert chosen_models([*own, "model.heads=2"]).models == ["transformer"]
    assert command_problem([*own, "model.heads=2"]) is None
    assert command_problem([*own, "model.width=3"]) == ("model.width=3: model=transformer (the default) has no field "
                                                        "width; model=mlp has it: add model=mlp, whose section it "
                                                        "then sets")
    assert chosen_models(["-cd", str(tmp_path), "--config-name=plain", "model.width=3"]).models == ["mlp"]
    assert chosen_models(["-cn", "absent", "model.width=3"]) is None  # Hydra's to find (or refuse)


def test_a_primary_config_edited_between_two_commands_is_read_as_it_is_now(tmp_path):
    # The defaults lists are read once per file version (a command's checks look the model up about ten times):
    # a file written again, as a user edits it between two commands of one process, is read again.
    from gensbi_sharding.harness.model_choice import chosen_models

    mine = tmp_path / "my.yaml"
    mine.write_text("defaults:\n  - config\n  - override model: transformer\n  - _self_\n")
    own = ["-cd", str(tmp_path), "-cn", "my", "model.width=3"]
    assert chosen_models(own).models == ["transformer"]
    mine.write_text("defaults:\n  - config\n  - override model: mlp  \n  - _self_\n")
    assert chosen_models(own).models == ["mlp"]
    mine.write_text("defaults:\n  - config\n  - override model: flux1\n  - _self_\n")  # the same size
    os.utime(mine, ns=(mine.stat().st_atime_ns, mine.stat().st_mtime_ns + 1))
    assert chosen_models(own).models == ["flux1"]


@pytest.mark.parametrize("args, message", [
    (["eval.observations=[1.5]"], "eval.observations=[1.5]: int values are expected and '1.5' is not one; write e.g. "
     "eval.observations=[2]"),
    (["eval.observations=[1,a]"], "eval.observations=[1,a]: int values are expected and 'a' is not one; write e.g. "
     "eval.observations=[1,2]"),  # not the duplicate [1,1], refused in turn
    (["eval.observations=[true]"], "eval.observations=[true]: int values are expected and 'true' is not one; write "
     "e.g. eval.observations=[1]"),
    (["mesh.devices=[0,x]"], "mesh.devices=[0,x]: int values are expected and 'x' is not one; write e.g. "
     "mesh.devices=[0,1]"),
    (["model=flux1", "model.axes_dim=[8.0,0]"], "model.axes_dim=[8.0,0]: int values are expected and '8.0' is not "
     "one; write e.g. model.axes_dim=[8,0]"),
    (["-m", "eval.observations=[1],[2.5]"], "eval.observations=[1],[2.5]: int values are expected and '2.5' is not "
     "one; write e.g. eval.observations=[1],[2]"),
])
@pytest.mark.fast_cases(2)
def test_a_list_with_an_element_of_another_type_is_refused_naming_the_list_to_write(args, message):
    # Was: Hydra's "Error merging override eval.observations=[1.5] / Value '1.5' of type 'float' could not be
    # converted to Integer / full_key: eval.observations[0] ...", naming no fix.
    from faults_helpers import compose_tiny

    from gensbi_sharding.harness.command_checks import command_problem

    assert command_problem(args) == message
    fix = message.rsplit("write e.g. ", 1)[1]
    fixed = [*args[:-1], fix]
    assert command_problem(fixed) is None
    if "-m" not in args:
        section, name = fix.split("=")[0].split(".")
        assert list(compose_tiny(*fixed)[section][name]) == [int(v) for v in fix.split("=[")[1][:-1].split(",")]


def test_a_config_dir_or_name_hydra_cannot_find_is_refused_naming_the_fix(tmp_path):
    # Was: Hydra's "Cannot find primary config 'confg'. Check that it's in your config search path." and its
    # search path, naming no config there; "Additional config directory '...' not found" for --config-dir.
    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.groups import CONF

    (tmp_path / "my.yaml").write_text("defaults:\n  - config\n  - _self_\n")
    assert command_problem(["-cn", "confg"]) == (f"--config-name confg: no confg.yaml in {CONF}; its configs: config; "
                                                 "did you mean --config-name config?")
    assert command_problem(["--config-dir", str(tmp_path), "--config-name=myy"]) == (
        f"--config-name myy: no myy.yaml in {CONF}, {tmp_path}; its configs: config, my; did you mean --config-name my?")
    assert command_problem(["-cd", str(tmp_path / "nope"), "experiment=quick"]) == (
        f"--config-dir {tmp_path / 'nope'}: {tmp_path / 'nope'} is no folder; give the folder that holds your config "
        "files (relative to where you launch), or leave --config-dir out")
    for fine in (["-cd", str(tmp_path), "-cn", "my"], ["-cn", "config"], ["-cn", "base_config"],  # a schema too
                 ["-cp", "pkg://hydra.conf", "-cn", "hydra/help/default"]):  # a package's config (r67: one read)
        assert command_problem(fine) is None, fine
    # r67: a package not installed was Hydra's to find, in its "Primary config module 'elsewhere' not found" lines
    assert command_problem(["-cp", "pkg://elsewhere", "-cn", "theirs"]).startswith(
        "--config-path pkg://elsewhere: the package elsewhere is not installed here")


MODELS = "flux1, mlp, simformer, transformer"


@pytest.mark.parametrize("args, message", [
    # Was Hydra's traceback: "ValueError: Config group override must be a string or a list. Got NoneType".
    (["model=null"], f"model=null: model takes one of its options ({MODELS}), not null; pick one, e.g. model=mlp"),
    (["mesh=null"], "mesh=null: mesh takes one of its options (auto, dict, none), not null; for none, write mesh=none"),
    (["experiment=null"], "experiment=null: experiment takes one of its options (quick, sbibm, slcp_transformer), "
                          "not null; for no experiment, leave experiment=null out"),
    (["-m", "model=mlp,null"], f"model=mlp,null: model takes one of its options ({MODELS}), not null; drop it: "
                               "model=mlp"),
    # Was Hydra's "Error resolving interpolation '${experiment}/${model}'": a list merges its options into one config.
    (["model=[mlp,transformer]"], "model=[mlp,transformer]: model takes one option per job, not a list (Hydra would "
     "merge them into one config); for one job per option, sweep them: python launch.py -m ... model=mlp,transformer"),
    (["-m", "model=[mlp,transformer]"], "model=[mlp,transformer]: model takes one option per job, not a list (Hydra "
     "would merge them into one config); sweep them: model=mlp,transformer"),
    (["rule=[fsdp]"], "rule=[fsdp]: rule takes one option per job, not a list (Hydra would merge them into one "
                      "config); write rule=fsdp"),
    (["-m", "hydra/launcher=null"], "hydra/launcher=null: hydra/launcher takes one of its options, not null; for "
                                    "Hydra's default, leave hydra/launcher=null out"),
])
@pytest.mark.fast_cases(2)
def test_a_group_given_null_or_a_list_is_refused_naming_an_option(args, message):
    from faults_helpers import compose_tiny

    from gensbi_sharding.harness.command_checks import command_problem

    assert command_problem(args) == message
    fix = message.rsplit(" ", 1)[1]
    if "=" in fix and "," not in fix:  # one option: it composes
        assert command_problem([fix]) is None
        group, option = fix.split("=")
        cfg = compose_tiny(fix)
        assert cfg[group].name == option if group in ("model", "rule") else cfg.mesh.spec is None  # mesh=none


def test_an_accepted_command_composes_nothing_for_a_suggestion_a_refused_one_gets_its_own(monkeypatch):
    """The value a refusal suggests is the command's own composition (``command_defaults.composed``, ~0.3 s of
    CPU, Hydra composing); an accepted command's checks ask for none (was: each accepted launch composed the
    command once for suggestions it never showed)."""
    from gensbi_sharding.harness import command_defaults

    asked = []
    real = command_defaults.composed.__wrapped__  # past its cache: every composition asked for is counted

    def counted(*args):
        asked.append(args)
        return real(*args)

    monkeypatch.setattr(command_defaults, "composed", counted)
    tiny = ["experiment=quick", "train.steps=4", "train.log_every=2", "eval.num_samples=64", "data.num_simulations=768"]
    assert override_problem(tiny) is None
    assert asked == []
    assert override_problem([*tiny[:1], "train.steps=abc"]) == (
        "train.steps=abc: train.steps: Value 'abc' of type 'str' could not be converted to Integer; "
        "e.g. train.steps=20")
    assert len(asked) == 1


@pytest.mark.slow
@pytest.mark.parametrize("typed, fix", [("hydra.searchpath=file://x", "hydra.searchpath=[file://x]"),
                                        ("hydra.searchpath=null", "hydra.searchpath=[]"),
                                        ("hydra.job.env_copy=HOME", "hydra.job.env_copy=[HOME]"),
                                        ("++hydra.searchpath=file://x", "++hydra.searchpath=[file://x]"),
                                        ("++hydra.job.env_copy=null", "++hydra.job.env_copy=[]")])
def test_a_hydra_list_setting_given_one_word_or_null_is_refused_naming_the_list_to_type(tmp_path, typed, fix):
    # ++hydra.searchpath=file://x likewise: was Hydra's "Error merging override ... str is not a ListConfig" (3 lines)
    # Was: launch.py hydra.searchpath=file://x passed every check, then Hydra refused it in several lines ("must be a
    # list of strings ... HYDRA_FULL_ERROR=1"); null likewise ("Field 'hydra.searchpath' is not Optional").
    import subprocess
    import sys

    from faults_helpers import REPO
    from gensbi_sharding.harness.command_checks import command_problem

    problem = command_problem([typed, "experiment=quick"])
    assert problem.startswith(f"{typed}: ") and f"write {fix}" in problem, problem
    if typed.startswith("++"):  # the setting named as such, its ++ kept in the fix
        assert problem.startswith(f"{typed}: {typed.split('=')[0][2:]} takes a list"), problem
    assert command_problem([fix, "experiment=quick"]) is None  # the advice passes the same checks
    if typed.endswith("hydra.searchpath=file://x"):  # at launch: one line, before any folder (x a folder there: else
        (tmp_path / "x").mkdir()  # Hydra warns, composing the fix, that it is not available)
        proc = subprocess.run([sys.executable, str(REPO / "launch.py"), typed, "experiment=quick"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and proc.stderr.strip() == f"[ERROR] {problem}"
        assert [p.name for p in tmp_path.iterdir()] == ["x"] and not any((tmp_path / "x").iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("typed, fix", [("hydra.output_subdir=???", "hydra.output_subdir=.hydra"),
                                        ("hydra.job.chdir=???", "hydra.job.chdir=null"),
                                        ("hydra.verbose=???", "hydra.verbose=false"),
                                        ("hydra.sweep.subdir=???", None)])
def test_a_hydra_setting_left_missing_is_refused_before_any_folder(tmp_path, typed, fix):
    # Was: hydra.output_subdir=??? (or hydra.job.chdir=???) ended in Hydra's MissingMandatoryValue traceback after
    # the run's folder was made (launch.log, .run.lock left), hydra.verbose=??? in it too, and -m
    # hydra.sweep.subdir=??? ran its job in the folder <sweep>/None: the check of hydra.run.dir=??? missed them.
    import subprocess
    import sys

    from faults_helpers import REPO
    from gensbi_sharding.harness.command_checks import command_problem

    mark = "??? is OmegaConf's mark of a value still to be given, which no run can read; give a value"
    problem = command_problem([typed, "experiment=quick"])
    assert problem == (f"{typed}: {mark}, e.g. {fix} (Hydra's default), or leave it out" if fix else
                       f"{typed}: {mark} or leave it out")
    if fix:
        assert command_problem([fix, "experiment=quick"]) is None  # the advice passes the same checks
    args = ["-m", typed, "seed=0,1", f"hydra.sweep.dir={tmp_path / 'sweep'}"] if "sweep" in typed else [
        typed, f"hydra.run.dir={tmp_path / 'run'}"]
    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), *args, "experiment=quick", "dry_run=true"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and proc.stderr.strip() == f"[ERROR] {problem}", proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("typed", ["hydra.job.name=???", "hydra.job.id=???", "hydra.mode=???", "hydra.nope=???"])
def test_a_hydra_setting_hydra_fills_itself_may_be_left_missing(typed):
    from gensbi_sharding.harness.key_paths import hydra_missing_problem

    assert hydra_missing_problem([typed, "experiment=quick"]) is None  # they ran (hydra.nope: another check's)


def test_a_yes_no_setting_left_missing_is_named_as_missing_not_as_a_word(compose_config):
    # Was: eval.plot=??? (any yes/no left ???) was refused as "eval.plot is a yes/no: true or false (or 1 or 0),
    # not '???'; e.g. eval.plot=false", where every other setting's ??? is named as OmegaConf's missing mark
    # (train.steps=???: "??? is OmegaConf's mark of a value still to be given ..."), by the composed config's check.
    from gensbi_sharding.harness.config_values import interpolation_problem

    mark = "??? is OmegaConf's mark of a value still to be given, which no run can read; give a value"
    for typed in ("eval.plot=???", "strict=???"):
        assert override_problem(["experiment=quick", typed]) is None
        assert interpolation_problem(compose_config(typed)) == f"{typed}: {mark}, e.g. {typed[:-3]}" + (
            "true" if typed.startswith("eval") else "false")
    assert override_problem(["eval.plot=on"]).startswith("eval.plot=on: eval.plot is a yes/no")  # a word still is
