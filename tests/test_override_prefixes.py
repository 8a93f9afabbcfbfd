"""``prefix_problem``: ``+``, ``++`` and ``~`` overrides refused before Hydra composes, naming the override to type.

Was: ``+train.steps=5`` got Hydra's "Could not append to config. An item is already at 'train.steps'" (advising
``++``), ``~train.foo`` "Could not delete from config. 'train.foo' does not exist.", ``+experiment=quick``
"Multiple values for experiment", ``++model=transformer`` "force-add of config groups is not supported",
``~experiment`` an interpolation error; ``+train.stpes=5``, ``++seeed=1`` and ``+foo=1`` composed and were refused
by the config check only after Hydra made the run's folder.
"""

from __future__ import annotations

import pytest

from gensbi_sharding.harness.config_checks import validate
from gensbi_sharding.harness.key_checks import model_key_problem
from gensbi_sharding.harness.override_prefixes import prefix_problem
from gensbi_sharding.harness.override_lists import list_override_problem
from gensbi_sharding.harness.override_types import override_problem

TRAIN = ("steps, learning_rate, weight_decay, schedule, warmup_steps, ema_decay, val_every, patience, val_draws, "
         "log_every, checkpoint_every, keep, resume")
MLP = "init, width, depth, mlp_ratio, time_embed_dim"

CASES = [
    # + on a key that exists: Hydra refuses it; the plain override sets it
    ("+train.steps=5", "+train.steps=5: train.steps exists (+ adds a key the config lacks); write train.steps=5"),
    ("+seed=3", "+seed=3: seed exists (+ adds a key the config lacks); write seed=3"),
    ("+model.width=64", "+model.width=64: model.width exists (+ adds a key the config lacks); write model.width=64"),
    ("+mesh.model_axis=2", "+mesh.model_axis=2: mesh.model_axis exists (+ adds a key the config lacks); write "
                           "mesh.model_axis=2"),
    ("-m +train.steps=1,2", "+train.steps=1,2: train.steps exists (+ adds a key the config lacks); write "
                            "train.steps=1,2"),
    # + or ++ of a key the schema lacks: the nearest setting (of the chosen model), else drop it
    ("+train.stpes=5", f"+train.stpes=5: train.stpes is not a setting of train (did you mean train.steps?); its "
                       f"settings: {TRAIN}; a run takes no other key, so write train.steps=5"),
    ("++train.foo=5", f"++train.foo=5: train.foo is not a setting of train; its settings: {TRAIN}; a run takes no "
                      "other key, so drop ++train.foo=5"),
    ("++seeed=1", "++seeed=1: seeed is not a setting (did you mean seed?); its settings: seed, strict, dry_run, debug, "
                  "verbose; a run takes no other key, so write seed=1"),
    ("+foo.bar=1", "+foo.bar=1: foo is not a setting; its settings: seed, strict, dry_run, debug, verbose; a run "
                   "takes no other key, so drop +foo.bar=1"),
    ("+model.widht=64", f"+model.widht=64: model.widht is not a setting of the default model=mlp (did you mean "
                        f"model.width?); its settings: {MLP}; a run takes no other key, so write model.width=64"),
    # the rule table: + or ++ may add a logical axis, not another key (the config check refused it once composed)
    ("+rule.embedd=data", "+rule.embedd=data: rule.embedd is not a logical axis (did you mean rule.embed?); the rule "
                          "table's keys: name, embed, mlp, heads, vocab, in, out; write rule.embed=data"),
    ("~rule.embedd", "~rule.embedd: rule.embedd is not a logical axis (did you mean rule.embed?); the rule table's "
                     "keys: name, embed, mlp, heads, vocab, in, out; drop ~rule.embedd"),
    ("~rule.embed", "~rule.embed: a rule's axis cannot be removed; set rule.embed=null to leave it unsplit"),
    # a part below the settings (was: the nearest to its first part, +mesh.shape.model=2 -> "write mesh.spec=2";
    # under a setting, Hydra's multi-line "Value '{}' of type 'dict' could not be converted to Integer"; under a
    # rule's axis, the config check's refusal once Hydra had made the run's folder, and "set rule.mlp.x=null")
    ("+mesh.shape.model=2", "+mesh.shape.model=2: mesh.shape is not a setting of mesh (did you mean mesh.model_axis?); "
                            "its settings: spec, model_axis, devices; a run takes no other key, so write "
                            "mesh.model_axis=2"),
    ("++train.steps.x=5", "++train.steps.x=5: train.steps is a setting, which holds no keys; set train.steps=5"),
    ("+model.width.x=64", "+model.width.x=64: model.width is a setting, which holds no keys; set model.width=64"),
    ("~train.steps.x", "~train.steps.x: train.steps is a setting, which holds no keys; drop ~train.steps.x"),
    ("+rule.mlp.x=data", "+rule.mlp.x=data: rule.mlp is a setting, which holds no keys; set rule.mlp=data"),
    ("~rule.mlp.x", "~rule.mlp.x: rule.mlp is a setting, which holds no keys; drop ~rule.mlp.x"),
    # a key under a group of presets (was: "experiment is not a setting", and ++sweep.x=1 "did you mean seed?")
    ("+experiment.quick=1", "+experiment.quick=1: experiment is a group of presets, not a section of settings; its "
                            "options: quick, sbibm, slcp_transformer; pick one with experiment=<option>"),
    ("++sweep.x=1", "++sweep.x=1: sweep is a group of presets, not a section of settings; its options: "
                    "rules_x_model_axis; pick one with sweep=<option>"),
    ("~experiment.quick", "~experiment.quick: experiment is a group of presets, not a section of settings; its "
                          "options: quick, sbibm, slcp_transformer; pick one with experiment=<option>"),
    # ~ of a key that does not exist: nothing to remove
    ("~train.foo", "~train.foo: train.foo is not a setting of train, so there is nothing to remove; drop ~train.foo"),
    ("~train.stpes", "~train.stpes: train.stpes is not a setting of train, so there is nothing to remove (did you mean "
                     "train.steps? it cannot be removed either: set it, e.g. train.steps=3000); drop ~train.stpes"),
    ("~foo", "~foo: foo is not a setting, so there is nothing to remove; drop ~foo"),
    # ~ of what every run reads: what to set instead (the chosen model's default)
    ("~train.steps", "~train.steps: a setting cannot be removed (every run reads it); set it instead, e.g. "
                     "train.steps=3000"),
    ("~eval.observations", "~eval.observations: a setting cannot be removed (every run reads it); set it instead, "
                           "e.g. eval.observations=null"),  # a list key too (was left to Hydra)
    ("model=transformer ~model.depth", "~model.depth: a setting cannot be removed (every run reads it); set it "
                                       "instead, e.g. model.depth=2"),
    ("~devices", "~devices: the devices section cannot be removed (every run reads it); set its settings instead, "
                 "e.g. devices.cpu_count=null"),
    # groups: + adds a second, ++ cannot add one, ~ of experiment breaks conf/config.yaml's ${experiment}
    ("+experiment=quick", "+experiment=quick: conf/config.yaml lists experiment already (none until experiment= picks "
                          "one), so + adds a second; to pick this one, write experiment=quick"),
    ("+model=transformer", "+model=transformer: every run has a model already (conf/config.yaml picks one), so + adds "
                           "a second; to pick this one, write model=transformer"),
    ("++model=transformer", "++model=transformer: ++ cannot pick a group's option (Hydra: force-add of config groups "
                            "is not supported); to pick this one, write model=transformer"),
    ("experiment=quick ~experiment", "~experiment: the experiment entry cannot be removed (conf/config.yaml's "
                                     "defaults read ${experiment}); for no experiment, drop ~experiment and leave "
                                     "experiment= out"),
    # Hydra's groups every run needs: removed, Hydra stopped at "Missing mandatory value: hydra.job_logging"
    ("~hydra/job_logging", "~hydra/job_logging: Hydra's hydra/job_logging group cannot be removed (Hydra's config "
                           "requires a hydra.job_logging); to log errors only, write hydra/job_logging=disabled"),
    ("~hydra/hydra_logging=default", "~hydra/hydra_logging=default: Hydra's hydra/hydra_logging group cannot be "
                                     "removed (Hydra's config requires a hydra.hydra_logging); to log errors only, "
                                     "write hydra/hydra_logging=disabled"),
    ("-m ~hydra/launcher", "~hydra/launcher: Hydra's hydra/launcher group cannot be removed (Hydra's config requires "
                           "a hydra.launcher); for Hydra's own, write hydra/launcher=basic"),
    ("-m ~hydra/sweeper", "~hydra/sweeper: Hydra's hydra/sweeper group cannot be removed (Hydra's config requires "
                          "a hydra.sweeper); for Hydra's own, write hydra/sweeper=basic"),
    # Hydra's own settings: "HydraConf (DictConfig) does not support deletion", five lines naming no fix
    ("~hydra.run.dir", "~hydra.run.dir: Hydra's own settings cannot be removed; leave ~hydra.run.dir out "
                       "(hydra.run.dir keeps its default)"),
    ("~hydra.searchpath", "~hydra.searchpath: Hydra's own settings cannot be removed; leave ~hydra.searchpath out "
                          "(hydra.searchpath keeps its default); for no folder beyond conf/, write hydra.searchpath=[]"),
    # null where Hydra's schema takes none: "field 'hydra.job.name' is not Optional"; hydra.verbose: an AssertionError
    ("hydra.job.name=null", "hydra.job.name=null: Hydra's hydra.job.name cannot be null; leave hydra.job.name=null out "
                            "(hydra.job.name keeps its default)"),
    ("hydra.verbose=null", "hydra.verbose=null: Hydra's hydra.verbose cannot be null; leave hydra.verbose=null out "
                           "(hydra.verbose keeps its default)"),
    ("+hydra.job.env_set.X=null", "+hydra.job.env_set.X=null: Hydra's hydra.job.env_set.X cannot be null; leave "
                                  "+hydra.job.env_set.X=null out"),
]


@pytest.mark.parametrize("command,message", CASES, ids=[c for c, _ in CASES])
@pytest.mark.fast_cases(6)
def test_a_prefixed_override_is_refused_naming_the_one_to_type(compose_config, command, message):
    args = command.split()
    assert prefix_problem(args) == message
    assert override_problem(args) == message  # launch.py's check (and the sbibm runner's) reaches it
    if "write " in message:  # the override it names composes and passes every check
        fixed = [a for a in args if a != "-m" and not a.startswith(("+", "~"))] + [message.rsplit("write ", 1)[1]]
        assert prefix_problem(fixed) is None and override_problem(fixed, sweeps_need_m=False) is None
        if "," not in fixed[-1]:
            validate(compose_config(*fixed))


@pytest.mark.parametrize("typed", ["hydra.searchpath=null", "++hydra.searchpath=null"])
def test_a_null_hydra_searchpath_is_refused_naming_the_empty_list(compose_config, typed):
    # Hydra refused it in five lines, "field 'hydra.searchpath' is not Optional", after every check had passed it
    # (and with model=mlpp named only the model, whose fix Hydra refused in turn); [] is the search path of none.
    said = (f"{typed}: hydra.searchpath is a list of folders, never null: leave it out; for no folder beyond "
            "conf/, write hydra.searchpath=[]")
    assert prefix_problem([typed, "model=mlp"]) == override_problem([typed, "model=mlp"]) == said
    assert override_problem(["-m", typed, "rule=fsdp,tensor"]) == said
    assert override_problem(["hydra.searchpath=[]", "model=mlp"]) is None
    assert compose_config("hydra.searchpath=[]", "model=mlp").model.name == "mlp"


def test_a_removed_or_null_hydra_searchpath_under_a_primary_config_with_one_names_leaving_it_out(tmp_path):
    # --config-name my, whose file sets hydra.searchpath: [] would leave its folders unsearched (model=my_flux1 then
    # refused), so the fix is leaving it out, no override to apply
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "mine" / "model").mkdir(parents=True)
    (tmp_path / "mine" / "model" / "my_flux1.yaml").write_text("defaults:\n  - /flux1_schema\n")
    (tmp_path / "my.yaml").write_text(f"defaults:\n  - config\n  - _self_\nhydra:\n  searchpath: "
                                      f"[file://{tmp_path / 'mine'}]\n")
    own, mine = ["-cd", str(tmp_path), "-cn", "my"], f"file://{tmp_path / 'mine'}"
    assert command_problem([*own, "hydra.searchpath=null", "model=my_flux1"]) == (
        f"hydra.searchpath=null: hydra.searchpath is a list of folders, never null: leave it out (the primary "
        f"config's: {mine}), or write hydra.searchpath=[] for none beyond conf/")
    assert command_problem([*own, "~hydra.searchpath", "model=my_flux1"]) == (
        f"~hydra.searchpath: Hydra's own settings cannot be removed; leave ~hydra.searchpath out (hydra.searchpath "
        f"keeps its default: {mine}), or write hydra.searchpath=[] for none beyond conf/")
    assert command_problem([*own, "model=my_flux1"]) is None


@pytest.mark.parametrize("command", [
    "++train.steps=5", "++seed=2", "++model.width=64",  # ++ on a key that exists: Hydra sets it
    "+rule.embed=data", "++rule.mlp=model",  # the rule table: any logical axis (the config check names a bad one)
    "~sweep", "~hydra/output", "~hydra/help",  # an optional group nothing reads, Hydra's groups it can do without
    "+hydra.job.env_set.X=1", "hydra.job.chdir=null", "hydra.job.name=my_job", "train.steps=5", "model=transformer model.depth=2",
    "model=flux1 ++model.axes_dim.0=4",  # an item of a list setting: Hydra sets it
])
@pytest.mark.fast_cases(3)
def test_prefixed_overrides_hydra_takes_are_left_to_it(compose_config, command):
    assert prefix_problem(command.split()) is None
    validate(compose_config(*command.split()))


@pytest.mark.parametrize("check,args,fix", [
    # The checks before prefix_problem named a fix with the + kept, which Hydra then refused as above.
    (list_override_problem, ["+eval.observations=3"], "write eval.observations=[3]"),
    (list_override_problem, ["++eval.observations=3"], "write ++eval.observations=[3]"),
    (model_key_problem, ["+model.num_heads=2"], "add model=flux1, whose section it then sets (and write "
                                                "model.num_heads=2: + is refused on a key that exists)"),
])
def test_an_earlier_check_names_its_fix_without_a_refused_plus(check, args, fix):
    assert check(args).endswith(fix), check(args)
