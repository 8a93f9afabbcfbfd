"""A refusal carries its fix as data beside its words, and every setting a refusal suggests passes the checks."""

import re

import pytest

from faults_helpers import REPO
from gensbi_sharding.harness.command_checks import config_problem, command_problem
from gensbi_sharding.harness.refusal import Refusal, fix_of, fixes_of, parts_of, rephrased, said


@pytest.mark.slow
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
    # A fix that is enough stays as it was; another override's refusal is its own, on a line of its own.
    assert command_problem(["+train.steps=5"]).endswith("write train.steps=5")
    first, other = parts_of(command_problem(["+train.steps=5", "seed=1.5"]))
    assert first.endswith("write train.steps=5") and other.startswith("seed=1.5: ")



@pytest.mark.slow
@pytest.mark.parametrize("typed, fix", [
    ("train.stpes=1.5", "train.steps=2"),  # a misspelled key whose value, moved over, is refused too
    ("trian.steps=1.5", "train.steps=2"),
    ("+train.resume=true", "train.resume=auto"),  # a + on a key that exists, its value refused
    ("+model=mlpp", "model=mlp"),  # a + on a group, its option mistyped too
    ("model=mlpp", "model=mlp"),  # a mistyped option: "did you mean model=mlp?"
    ("experiment=quik", "experiment=quick"),
])
def test_a_fix_refused_in_turn_carries_the_value_offered_so_the_list_goes_on_to_every_value_refused(typed, fix):
    # Was: `python launch.py train.stpes=1.5 seed=-1` said "set train.steps=1.5, though train.steps=1.5 is refused
    # too: ...; e.g. train.steps=2" in words only (no fix as data), so the list stopped there and seed=-1 was refused
    # only on the next run; a mistyped group option ("did you mean model=mlp?") stopped it alike.
    first, then = parts_of(problem := command_problem([typed, "seed=-1"]))
    assert fix_of(first) == fix, problem
    assert then == "ConfigError: seed=-1 must be >= 0; e.g. seed=0", problem
    assert fix_of(problem) == (fix, "seed=0")
    # the fixes together, typed, pass every check: the command line's and the run's
    assert command_problem(list(fix_of(problem))) is None and config_problem(list(fix_of(problem))) is None
    assert command_problem([typed]) == first  # alone, its words as they were


@pytest.mark.slow
@pytest.mark.parametrize("sweep, fixed", [("model=xyzzy,mlp", "model=flux1,mlp"), ("model=mlpp,transformer",
                                                                                  "model=mlp,transformer"),
                                           ("model=mlpp,mlp", "model=mlp")])
def test_a_mistyped_option_of_a_sweep_is_fixed_in_its_place_keeping_the_sweeps_other_values(sweep, fixed):
    # Was: `-m model=xyzzy,mlp seed=-1` ended "all fixed together: model=flux1 seed=0", the mlp jobs typed away;
    # `-m model=mlpp,transformer seed=-1` said "did you mean model=mlp?" (the transformer jobs dropped alike) and
    # stopped there, seed=-1 named only on the next run.
    problem = command_problem(["-m", sweep, "seed=-1"])
    assert fix_of(problem) == (fixed, "seed=0"), problem
    assert command_problem(["-m", fixed, "seed=0"]) is None


@pytest.mark.slow
def test_a_multiruns_fix_is_checked_against_every_job_before_the_sweep_starts():
    # Was: `python launch.py -m +model.dpeth=0 seed=0,1` said "write model.depth=0" and stopped: no job's config was
    # checked on the command line, so the fix typed was refused by every job as the sweep started.
    problem = command_problem(["-m", "+model.dpeth=0", "seed=0,1"])
    assert parts_of(problem)[1:] == ["ConfigError: model.depth=0 must be >= 1; e.g. model.depth=3"], problem
    assert fix_of(problem) == "model.depth=3"
    # jobs that refuse one value with fixes of their own: each said for its jobs, the fixes together pass them all
    problem = command_problem(["-m", "+model.dpeth=0", "model=mlp,transformer", "seed=0,1"])
    assert parts_of(problem)[1:] == ["ConfigError: for model=mlp: model.depth=0 must be >= 1; e.g. model.depth=3",
                                     "ConfigError: for model=transformer: model.depth=0 must be >= 1; e.g. "
                                     "model.depth=2"], problem
    for swept in (["seed=0,1"], ["model=mlp,transformer", "seed=0,1"]):
        fixed = ["-m", *fixes_of(fix_of(command_problem(["-m", "+model.dpeth=0", *swept]))), *swept]
        assert command_problem(fixed) is None and config_problem(fixed) is None, fixed
    # jobs past the first 8 too: each model's own (was: the first 8 jobs, all model=mlp's, checked alone)
    assert parts_of(command_problem(["-m", "+model.dpeth=0", "model=mlp,transformer", "seed=range(0,10)"]))[1:] == [
        "ConfigError: for model=mlp: model.depth=0 must be >= 1; e.g. model.depth=3",
        "ConfigError: for model=transformer: model.depth=0 must be >= 1; e.g. model.depth=2"]
    # a swept value's own refusal is the sweep check's, job by job: no fix here types its sweep away
    assert parts_of(command_problem(["-m", "+model.dpeth=0", "seed=0,-1"]))[1:] == [
        "ConfigError: model.depth=0 must be >= 1; e.g. model.depth=3"]

def _checks(args):
    """The refusal of ``launch.py <args>`` before training: its command-line checks, then the checks of the config it
    composes that need no started backend (``job_check.job_problem``: ranges, the mesh against 8 CPU devices (or
    ``devices.cpu_count``), the batch); None where it would train."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.job_check import job_problem

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
@pytest.mark.fast_cases(2)
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


@pytest.mark.parametrize("args, fix", [
    (["eval.num_samples=2.5"], "eval.num_samples=4"),  # the type check's "e.g.", then the run's checks' fix
    (["mesh={model:3}"], "mesh.model_axis=2"),  # a dict's misspelt key's "set", then the mesh's fix
    (["train.steps=1.5"], "train.steps=2"),  # the type check's, which the run's checks pass
    (["train.stepz=5"], "train.steps=5"),  # a misspelt key's "set"
    (["+train.steps=5"], "train.steps=5"),  # + on a key that exists: "write"
    (["rule.embed=dta"], "rule.embed=data"),  # the rule table's check against the mesh
    (["data.batch_size=45.5"], "data.batch_size=48"),  # the type check's 46, then the batch check's
    (["eval.observations=3"], "eval.observations=[3]"),  # the list check's "write"
    (["experiment.steps=5"], "train.steps=5"),  # a preset group's "or set", said after its "e.g."
    (["~train.steps"], "train.steps=20"),  # a removal's "e.g."
    (["hydra.run.dirr=runs/a"], "hydra.run.dir=runs/a"),  # Hydra's own config's key
])
@pytest.mark.fast_cases(2)
def test_a_refusals_fix_is_data_beside_its_words(args, fix):
    # Was: command_checks read the fix back out of the message's last word (after "set", "write" or "e.g.") and a
    # better one out of the next refusal's text. Now the check that suggests it keeps it: the message is a str as
    # before, its fix an attribute.
    problem = command_problem(["experiment=quick", *args])
    assert isinstance(problem, Refusal) and problem.fix == fix
    assert fix in problem and problem.startswith(args[0].split("=")[0])


@pytest.mark.slow
def test_the_run_checks_refusals_carry_their_fix():
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.hints import model_axis_problem
    from gensbi_sharding.harness.job_check import job_problem

    assert fix_of(job_problem(compose_tiny("eval.num_samples=3"))) == "eval.num_samples=4"
    assert fix_of(job_problem(compose_tiny("train.val_every=0", "train.patience=5"))) == "train.val_every=2"
    assert fix_of(job_problem(compose_tiny("mesh.model_axis=3"))) == "mesh.model_axis=2"
    refused = model_axis_problem(4, 6, batch_size=63)
    assert refused.fix == "mesh.model_axis=2"
    assert refused.reason == "mesh.model_axis=4: 6 devices are not divisible by model_axis=4"
    assert job_problem(compose_tiny()) is None
    from gensbi_sharding.harness.held_out import val_pairs_problem
    from gensbi_sharding.harness.hints import batch_size_problem, mesh_devices_problem

    assert fix_of(batch_size_problem(45, shards=1, data_parallel=8, train_rows=900)) == "data.batch_size=48"
    assert fix_of(mesh_devices_problem([0, 1, 1], range(8))) == "mesh.devices=[0,1]"
    refused = val_pairs_problem(1000, 0.001, 64)  # the first of two fixes, each followed by what it keeps
    assert refused.fix == "data.val_fraction=0.01" and refused.endswith(
        "set data.val_fraction=0.01 (the smallest that holds out 10) or data.num_simulations=10000 at this fraction "
        "(the smallest that also leaves data.batch_size=64 training pairs)")


def test_a_refusal_keeps_its_fix_as_it_is_reworded():
    refused = Refusal("a.b=3 must be >= 4", "a.b=4", after=" (or a.c=2)")
    assert refused == "a.b=3 must be >= 4; set a.b=4 (or a.c=2)" and refused.fix == "a.b=4"
    led = rephrased(refused, lead="x={b:3} stands for a.b=3: ", drop="a.b=3 ", more="; more")
    assert led == "x={b:3} stands for a.b=3: must be >= 4; set a.b=4 (or a.c=2); more" and fix_of(led) == "a.b=4"
    better = refused.fixed_by("a.b=5", " (a.b=4 is refused: odd)")
    assert better == "a.b=3 must be >= 4; set a.b=5 (a.b=4 is refused: odd) (or a.c=2)" and better.fix == "a.b=5"
    assert rephrased("plain words", lead="ConfigError: ") == "ConfigError: plain words" and fix_of("plain") is None


FLUX = ("model=flux1",)


@pytest.mark.parametrize("overrides, fix, offered", [
    (["train.steps=${data.nope}"], "train.steps=3000", "; give a value, e.g. "),
    (["eval.observations=${data.num_observation}"], "eval.observations=[${data.num_observation}]", "; set "),
    (["train.learning_rate=inf"], "train.learning_rate=0.003", "; e.g. "),
    (["data.num_simulations=3000000000"], "data.num_simulations=10000", "; e.g. "),
    (["seed=-1"], "seed=0", "; e.g. "),
    (["eval.observations=[11]"], "eval.observations=[1,2,3]", ", e.g. "),
    (["distributed=local", "distributed.local_processes=1", "mesh=auto"], "distributed.local_processes=2", "; set "),
    (["activation.strategy=bad"], "activation.strategy=rule", "; e.g. "),
    # The key + added is dropped by the fix too (was: "model.depth=2" alone, which left +model.dpeth=2 in the config)
    (["+mseh=3"], ("~mseh=3", "mesh=3"), "; "),
    (["+model.dpeth=2"], ("~model.dpeth=2", "model.depth=2"), "; "),
    (["rule.embed=[data,data]"], "rule.embed=data", "; list each mesh axis once: set "),
    (["rule.embed=[1]"], "rule.embed=model", "; e.g. "),
    (["rule.embed=3"], "rule.embed=data", "; e.g. "),
    (["model.name=nope"], "model.name=mlp", "; set "),
    (["model.name=transformer"], "model.name=mlp", "; set "),
    (["data.name=two_moon"], "data.name=two_moons", "; set "),
    ([*FLUX, "model.num_heads=0"], "model.num_heads=6", "; e.g. "),
    ([*FLUX, "model.param_dtype=float16"], "model.param_dtype=bfloat16", "; e.g. "),
    ([*FLUX, "model.dtype=bad"], "model.dtype=float32", "; e.g. "),
    ([*FLUX, "model.id_merge_mode=bad"], "model.id_merge_mode=sum", "; e.g. "),
    ([*FLUX, "model.id_embedding_strategy=[x]"], "model.id_embedding_strategy=[absolute,absolute]", ", e.g. "),
    ([*FLUX, "model.depth=0", "model.depth_single_blocks=0"], "model.depth_single_blocks=1", "; e.g. "),
    ([*FLUX, "model.axes_dim=[0]"], "model.axes_dim=[6,0]", "; e.g. "),
    ([*FLUX, "model.id_embedding_strategy=[rope1d,rope1d]", "model.axes_dim=[2,2,2]"], "model.axes_dim=[6,0]",
     "; e.g. "),
    ([*FLUX, "model.id_embedding_strategy=[pos1d,pos1d]", "model.axes_dim=[3,0]", "model.num_heads=1",
      "model.init=eager"], "model.axes_dim=[4,0]", "; e.g. "),
    ([*FLUX, "model.id_merge_mode=concat", "model.val_emb_dim=0", "model.id_emb_dim=4"], "model.val_emb_dim=4",
     "; e.g. "),
    ([*FLUX, "model.id_merge_mode=concat", "model.val_emb_dim=0", "model.id_emb_dim=0"],  # two keys: typed together
     ("model.val_emb_dim=4", "model.id_emb_dim=4"), "; e.g. "),
    ([*FLUX, "model.id_merge_mode=concat", "model.val_emb_dim=4", "model.id_emb_dim=4",
      "model.id_embedding_strategy=[rope1d,rope1d]"], "model.id_embedding_strategy=[absolute,absolute]", "; e.g. "),
    ([*FLUX, "model.mlp_ratio=0.0"], "model.mlp_ratio=4.0", "; e.g. "),
    ([*FLUX, "model.id_embedding_strategy=[pos1d,pos1d]", "mesh=auto", "model.init=sharded"], "model.init=eager",
     "; e.g. "),
    (["model=simformer", "model.num_heads=7"], "model.num_heads=4", ", e.g. "),
    (["model=simformer", "model.depth=0"], "model.depth=8", "; e.g. "),
])
@pytest.mark.fast_cases(2)
def test_every_check_that_offers_one_override_carries_it_as_its_fix(overrides, fix, offered):
    # Was: these offered their fix in words only (fix_of: None), so command_checks could not put it through the
    # run's checks; the words stay as they were
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    problem = job_problem(compose_tiny(*overrides))
    assert problem is not None and fix_of(problem) == fix, problem
    assert fix is None or offered + said(fix) in problem


def _typed(args, fix):
    """``args`` as the user types them again, ``fix`` followed: a key it drops (``~key=value``) left out, the values
    it sets in place of any override of their keys."""
    dropped = {f[1:].split("=", 1)[0] for f in fixes_of(fix) if f.startswith("~")}
    sets = [f for f in fixes_of(fix) if not f.startswith("~")]
    keys = dropped | {f.split("=", 1)[0] for f in sets}
    return [a for a in args if a.split("=", 1)[0].lstrip("+~") not in keys] + sets


@pytest.mark.parametrize("overrides, words", [
    (["+model.dpeth=2"], "drop +model.dpeth=2 and set model.depth=2"),
    (["+train.stpes=5"], "drop +train.stpes=5 and set train.steps=5"),
    # the value it keeps is refused in turn: the better one offered, the key still dropped
    (["+model.dpeth=0"], "drop +model.dpeth=0 and set model.depth=3 (model.depth=0 is refused too: it must be >= 1)"),
    (["mesh=dict", "+mesh.modle_axis=3"], "drop +mesh.modle_axis=3 and set mesh.model_axis=2 (mesh.model_axis=3 is "
     "refused too: 8 devices are not divisible by model_axis=3)"),
    (["+model.foo=1"], "drop +model.foo=1"),
])
@pytest.mark.fast_cases(2)
def test_a_refusal_that_says_drop_a_key_and_set_another_carries_both_and_the_command_it_leads_to_runs(
        overrides, words):
    # Was: "drop +model.dpeth=0 and set model.depth=0" carried only model.depth=0 as its fix, so the check of the fix
    # set it beside model.dpeth, was refused the same, and offered model.depth=0 unchecked: refused the next run.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    problem = job_problem(compose_tiny(*overrides))
    assert problem.endswith(words) and fixes_of(fix_of(problem))[0] == "~" + overrides[-1][1:], problem
    assert job_problem(compose_tiny(*_typed(overrides, fix_of(problem)))) is None


def test_the_refusals_made_outside_validate_carry_their_fix_too():
    from omegaconf import OmegaConf

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness import registry
    from gensbi_sharding.harness.config_checks import scored_observations
    from gensbi_sharding.harness.distributed_checks import no_mesh_problem
    from gensbi_sharding.harness.model_checks import platform_problem
    from gensbi_sharding.harness.name_hints import registered_name_problem, unknown_name_problem
    from gensbi_sharding.harness.rule_config import activation_axes_problem
    from gensbi_sharding.harness.job_check import job_problem

    assert fix_of(no_mesh_problem(2)) == "mesh=auto" and "; set mesh=auto (or mesh=dict) to train" in no_mesh_problem(2)
    scored = scored_observations(compose_tiny("eval.observations=[2]"))[1]
    assert fix_of(scored) == "eval.observations=null" and "it, or set eval.observations=null to score" in scored
    cpu = platform_problem(OmegaConf.create({"name": "flux1", "dtype": "float16"}), "cpu")
    assert fix_of(cpu) == "model.dtype=bfloat16" and cpu.endswith(
        "; set model.dtype=bfloat16 or model.dtype=float32, or run on a GPU")
    refused = activation_axes_problem({"embed": "nope"}, ("data", "model"))
    assert fix_of(refused) == "activation.embed=null" and refused.endswith("; set activation.embed=null")
    chose = unknown_name_problem("model.name", "tiny", kind="model", registered=["mlp"], fix="mlp", group="model",
                                 register="register it", chosen="tiny")
    assert fix_of(chose) == "model=mlp" and "(e.g. model=mlp) instead of model=tiny; to add 'tiny'" in chose
    relabel = registered_name_problem(compose_tiny("rule.name=fsdp"), {"rule": "replicated"})
    assert fix_of(relabel) == "rule=fsdp" and relabel.endswith("choose it with rule=fsdp (rule.name=fsdp may stay)")
    registry.register_data("mine49")(lambda **kwargs: None)
    try:
        own = job_problem(compose_tiny("data.name=mine49", "eval.enabled=true"))
    finally:
        registry.unregister("data", "mine49")
    assert fix_of(own) == "eval.enabled=false" and "; set eval.enabled=false to train it (checkpoints" in own


def test_a_suggested_value_the_int32_check_refuses_is_replaced_by_its_fix():
    # Was: "e.g. data.num_simulations=3000000000, though data.num_simulations=3000000000 is refused too: ..." (the
    # int32 check's "e.g." was words only); now the value it offers, checked, in the one message
    problem = command_problem(["experiment=quick", "data.num_simulations=3e9"])
    assert fix_of(problem) == "data.num_simulations=10000", problem
    assert problem.endswith("; e.g. data.num_simulations=10000 (data.num_simulations=3000000000 is refused too: it is "
                            "beyond the largest whole number a run can use (2,147,483,647: JAX holds counts and "
                            "seeds as 32-bit integers))")


# A fix of several overrides typed together (Refusal.fix a tuple), and the check of every fix a refusal offers. A fix of
# two overrides was words only (fix None): model=flux1 model.id_merge_mode=concat model.val_emb_dim=0.5 was told "e.g.
# model.val_emb_dim=null", which the concat check refuses, and the concat check's own fix (both emb dims) was never
# tried; a config refusal's fix was not checked at all. A refused suggestion read "(X is refused: is beyond ...)".
CONCAT = ["model=flux1", "model.id_merge_mode=concat"]


def test_a_fix_of_several_overrides_is_a_tuple_shown_as_typed_and_kept_when_rephrased():
    pair = Refusal("a=0 and b=0: need both", ("a=4", "b=4"), how="; e.g. ", after=" (1:1)")
    assert pair == "a=0 and b=0: need both; e.g. a=4 b=4 (1:1)" and fixes_of(fix_of(pair)) == ("a=4", "b=4")
    worded = Refusal("none fits", ("n=40", "b=8"), how="; ", shown="raise n to at least 40 and set b=8")
    assert worded == "none fits; raise n to at least 40 and set b=8" and worded.fix == ("n=40", "b=8")
    led = rephrased(worded, lead="ConfigError: ")
    assert led == "ConfigError: none fits; raise n to at least 40 and set b=8" and fix_of(led) == ("n=40", "b=8")
    assert Refusal("r", ("a=1",)).fix == "a=1" and fixes_of(None) == () and fixes_of("a=1") == ("a=1",)


@pytest.mark.slow
def test_a_suggestion_the_model_checks_refuse_is_replaced_by_their_fix_of_two_overrides(devices):
    problem = command_problem([*CONCAT, "model.val_emb_dim=0.5"])
    assert fix_of(problem) == ("model.val_emb_dim=4", "model.id_emb_dim=4"), problem
    assert problem == (
        "model.val_emb_dim=0.5: model.val_emb_dim (model=flux1) takes a whole number (Value '0.5' of type 'float' "
        "could not be converted to Integer); e.g. model.val_emb_dim=4 model.id_emb_dim=4 (model.val_emb_dim=null is "
        "refused too: model.val_emb_dim=null and model.id_emb_dim=null: model.id_merge_mode=concat needs val_emb_dim "
        "and id_emb_dim, integers >= 1 (features per head))")
    # the pair, as offered, passes every check: the command line's and the run's (model checks too)
    fixed = [*CONCAT, *fix_of(problem)]
    assert command_problem(fixed) is None and config_problem(fixed) is None
    # a key of the pair typed already is replaced, not typed twice
    problem = command_problem([*CONCAT, "model.id_emb_dim=null", "model.val_emb_dim=0.5"])
    assert fix_of(problem) == ("model.val_emb_dim=4", "model.id_emb_dim=4"), problem


@pytest.mark.parametrize("typed, note", [
    ("eval.num_samples=2.5", "e.g. eval.num_samples=4 (eval.num_samples=2 is refused too: it must be >= 2 * "
     "eval.c2st_folds (eval.c2st_folds=2))"),
    ("data.num_simulations=3e9", "e.g. data.num_simulations=10000 (data.num_simulations=3000000000 is refused too: it "
     "is beyond the largest whole number a run can use (2,147,483,647: JAX holds counts and seeds as 32-bit "
     "integers))"),
])
def test_a_refused_suggestion_is_said_as_a_sentence(devices, typed, note):
    # Was: "(eval.num_samples=2 is refused: must be >= ...)", "(... is refused: is beyond ...)"
    problem = command_problem(["experiment=quick", typed])
    assert problem.endswith(note), problem


def test_every_refusal_of_two_overrides_carries_both():
    from omegaconf import OmegaConf

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.hints import batch_size_problem
    from gensbi_sharding.harness.local_children import model_group_problem
    from gensbi_sharding.harness.job_check import job_problem

    concat = job_problem(compose_tiny(*CONCAT, "model.val_emb_dim=0", "model.id_emb_dim=0"))
    assert fix_of(concat) == ("model.val_emb_dim=4", "model.id_emb_dim=4"), concat
    assert concat.endswith("; e.g. model.val_emb_dim=4 model.id_emb_dim=4 (GenSBI suggests 1:1), or "
                           "model.id_merge_mode=sum")
    # no batch size fits the pairs: the budget that fills one batch and that batch, words as they were
    batch = batch_size_problem(12, shards=1, data_parallel=8, train_rows=4, budget=lambda rows: 10 * rows)
    assert fix_of(batch) == ("data.num_simulations=80", "data.batch_size=8")
    assert batch.endswith("but the smallest shard holds 4; raise data.num_simulations to at least 80 and set "
                          "data.batch_size=8")
    # without a budget to name, no override to type: no fix
    assert fix_of(batch_size_problem(12, shards=1, data_parallel=8, train_rows=4)) is None
    cfg = OmegaConf.create({"mesh": {"spec": "dict", "devices": None, "model_axis": 4},
                            "data": {"batch_size": 63, "shards": None}})
    group = model_group_problem(cfg, 2, 3)
    assert fix_of(group) == ("mesh.model_axis=3", "data.batch_size=62"), group
    assert "; set mesh.model_axis=3 and data.batch_size=62 (the batch is split over 2 data shards" in group


@pytest.mark.slow
@pytest.mark.parametrize("overrides, fix, note", [
    # GenSBI's default 4 does not divide the attention size 10 that qkv_features sets
    (["model=simformer", "model.num_heads=0", "model.qkv_features=10"], "model.num_heads=2",
     "; e.g. model.num_heads=2 (model.num_heads=4 is refused too: it must divide the attention size 10 "
     "(model.qkv_features, or the token size when null); pick one of [1, 2, 5, 10])"),
    # a fix that passes is offered as it was, its note kept
    (["model=flux1", "model.num_heads=0"], "model.num_heads=6", "; e.g. model.num_heads=6 (GenSBI's default)"),
])
def test_a_config_refusals_fix_passes_every_check_of_the_run(devices, overrides, fix, note):
    # Was: a refusal made once the config composed (range checks, model checks, at launch or in a sweep's
    # preflight) offered its fix unchecked: "e.g. model.num_heads=4 (GenSBI's default)", refused next.
    from omegaconf import OmegaConf

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    cfg = compose_tiny(*overrides)
    problem = job_problem(cfg)
    assert fix_of(problem) == fix and problem.endswith(note), problem
    OmegaConf.update(cfg, fix.split("=")[0], int(fix.split("=")[1]), merge=False)
    assert job_problem(cfg) is None


@pytest.mark.slow
def test_a_fix_is_not_called_refused_for_a_value_it_left_as_it_was(devices):
    # Was: data.batch_size=-8 mesh.model_axis=3 -> "e.g. data.batch_size=256, though data.batch_size=256 is refused
    # too: mesh.model_axis=3: 8 devices are not divisible by model_axis=3": 256 is fine, the mesh was refused as typed.
    # On the command line: eval.num_samples=2.5 seed=-1 -> "e.g. eval.num_samples=2, though eval.num_samples=2 is
    # refused too: seed=-1 must be >= 0" (the seed's own fault; 2 itself refused, unsaid).
    # (the other value is then the list's next line, its own refusal)
    for other in ("seed=-1", "mesh.model_axis=3"):
        first, then = parts_of(problem := command_problem(["experiment=quick", "eval.num_samples=2.5", other]))
        assert first.endswith("; e.g. eval.num_samples=4 (eval.num_samples=2 is refused too: it must be >= 2 * "
                              "eval.c2st_folds (eval.c2st_folds=2))"), problem
        assert then.startswith(f"ConfigError: {other}"), problem
    first, then = parts_of(problem := command_problem(["experiment=quick", "data.batch_size=2.5", "mesh.model_axis=3"]))
    assert first.endswith("; e.g. data.batch_size=2"), problem  # 2 runs on the mesh's fix (model_axis=4)
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    problem = job_problem(compose_tiny("data.batch_size=-8", "mesh.model_axis=3"))
    first, mesh = parts_of(problem)  # each on a line of its own (was: the batch alone, the mesh said the next run)
    assert first == "ConfigError: data.batch_size=-8 must be >= 1; e.g. data.batch_size=256", problem  # the preset's
    assert fix_of(first) == "data.batch_size=256" and mesh.startswith("ConfigError: mesh.model_axis=3: 8 devices")
    fixed = job_problem(compose_tiny("data.batch_size=256", "mesh.model_axis=3"))  # the mesh named next, as it is
    assert fixed.startswith("ConfigError: mesh.model_axis=3: 8 devices are not divisible by model_axis=3"), fixed


@pytest.mark.parametrize("preset", ["replicated", "fsdp", "tensor"])
@pytest.mark.fast_cases(1)
def test_a_new_rule_label_names_an_entry_change_that_then_passes(preset):
    # Was: rule=fsdp rule.name=my named "change entries of this table (rule.embed=data rule.name=my)", fsdp's own
    # embed, so that command was refused again alike; now an entry the preset's table does not already hold
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.name_hints import registered_name_problem

    problem = registered_name_problem(compose_tiny(f"rule={preset}", "rule.name=my"), {"rule": preset})
    change = re.search(r"change entries of this table \((rule\.\w+=\w+) rule\.name=my\)", problem).group(1)
    assert change == {"fsdp": "rule.mlp=model"}.get(preset, "rule.embed=data"), problem
    fixed = compose_tiny(f"rule={preset}", change, "rule.name=my")
    assert registered_name_problem(fixed, {"rule": preset}) is None


def test_a_rule_file_labelled_with_a_builtins_name_is_refused_naming_a_label_that_keeps_its_table(tmp_path):
    # Was: a rule file of one's own with "name: fsdp" over another table refused as "rule.name=fsdp only labels the
    # rule table, which rule=mine loaded; to use the fsdp rule, choose it with rule=fsdp", a fix that drops the table
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.name_hints import registered_name_problem

    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / "mine.yaml").write_text("name: fsdp\nembed: null\nmlp: model\n")
    searched = f"hydra.searchpath=[file://{tmp_path}]"
    problem = registered_name_problem(compose_tiny(searched, "rule=mine"), {"rule": "mine"})
    assert fix_of(problem) == "rule.name=mine", problem
    assert problem == ("rule.name=fsdp labels the table rule=mine loaded, which is not the fsdp rule's: the run would "
                       "be reported as fsdp; name it otherwise: rule.name=mine (or name: mine in its file), or choose "
                       "the fsdp rule with rule=fsdp")
    fixed = compose_tiny(searched, "rule=mine", "rule.name=mine")
    assert registered_name_problem(fixed, {"rule": "mine"}) is None and fixed.rule.mlp == "model"


@pytest.mark.slow
def test_several_overrides_refused_at_once_are_one_list_whose_fixes_together_pass():
    # Was: "+seeed=2: ... write seed=2" alone; train.steps=1.5 and data.batch_size=x were refused one run later each.
    args = ["experiment=quick", "train.steps=1.5", "data.batch_size=x", "+seeed=2"]
    problem = command_problem(args)
    assert problem.splitlines() == [
        "3 overrides are refused, each with its fix:",
        "  +seeed=2: seeed is not a setting (did you mean seed?); its settings: seed, strict, dry_run, debug, verbose; "
        "a run takes no other key, so write seed=2",
        "  train.steps=1.5: train.steps takes a whole number (Value '1.5' of type 'float' could not be converted to "
        "Integer); e.g. train.steps=2",
        "  data.batch_size=x: data.batch_size: Value 'x' of type 'str' could not be converted to Integer; e.g. "
        "data.batch_size=64",
        "  all fixed together: seed=2 train.steps=2 data.batch_size=64"]
    assert _checks(["experiment=quick", *fixes_of(fix_of(problem))]) is None  # the command it leads to runs


@pytest.mark.slow
def test_an_override_refused_beside_a_value_the_run_refuses_lists_both_in_one_refusal():
    # Was: `launch.py train.steps=1.5 seed=-1` named train.steps=1.5 alone; once fixed, seed=-1 was refused next run
    # (the command checks' list ended where the run's own checks of the config begin)
    problem = command_problem(["experiment=quick", "train.steps=1.5", "seed=-1"])
    assert problem.splitlines() == [
        "2 overrides are refused, each with its fix:",
        "  train.steps=1.5: train.steps takes a whole number (Value '1.5' of type 'float' could not be converted to "
        "Integer); e.g. train.steps=2",
        "  seed=-1 must be >= 0; e.g. seed=0",
        "  all fixed together: train.steps=2 seed=0"]
    assert _checks(["experiment=quick", *fixes_of(fix_of(problem))]) is None  # the command it leads to runs
    # one override refused, the config passing once it is fixed: that refusal alone, as before
    assert command_problem(["experiment=quick", "train.steps=1.5"]).endswith("e.g. train.steps=2")


def test_a_top_level_value_refused_first_does_not_hide_the_values_refused_after_it():
    # Was: seed=-1 model.depth=0 named seed=-1 alone: its fix, seed=0, a key without a dot, was taken for a group
    # (mesh=auto) that only composing sets, so the list ended there and model.depth=0 was refused the next run
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    problem = job_problem(compose_tiny("model.depth=0", "seed=-1"))
    assert problem.splitlines() == ["ConfigError: 2 settings are refused, each with its fix:",
                                    "  seed=-1 must be >= 0; e.g. seed=0",
                                    "  model.depth=0 must be >= 1; e.g. model.depth=3",
                                    "  all fixed together: seed=0 model.depth=3"]
    assert job_problem(compose_tiny("model.depth=3", "seed=0")) is None


@pytest.mark.slow  # ~0.8 s on 2 cores
def test_a_renamed_key_whose_value_is_refused_next_is_fixed_together_by_that_refusals_fix():
    # Was: +model.dpeth=0 seed=-1 listed "write model.depth=0", then "model.depth=0 must be >= 1; e.g. model.depth=3",
    # and no fix together (two fixes set model.depth): the later, found with the earlier set, is the one to type
    problem = command_problem(["experiment=quick", "+model.dpeth=0", "seed=-1"])
    assert [line.split(": ")[0] for line in problem.splitlines()[1:]] == [
        "  +model.dpeth=0", "  seed=-1 must be >= 0; e.g. seed=0", "  model.depth=0 must be >= 1; e.g. model.depth=3",
        "  all fixed together"], problem
    assert fixes_of(fix_of(problem)) == ("model.depth=3", "seed=0")
    assert _checks(["experiment=quick", *fixes_of(fix_of(problem))]) is None


@pytest.mark.slow  # ~0.8 s on 2 cores
def test_the_runs_refusals_in_launch_pys_list_are_said_as_overrides_not_as_python_settings():
    # Was: `python launch.py experiment=quick train.stpes=5 train.resume=''` listed "cfg.train.resume='' is empty: pass
    # cfg.train.resume='auto' ...": the run's check, made by the command-line checks before Hydra's app starts, took
    # itself for run(cfg) from Python.
    problem = command_problem(["experiment=quick", "train.stpes=5", "train.resume=''"])
    assert parts_of(problem)[1] == ("ConfigError: train.resume='' is empty: pass train.resume=auto (this run's "
                                    "folder), a run or checkpoint folder, or leave it out to start fresh"), problem
    assert config_problem(["experiment=quick", "train.resume=AUTO"]) == (
        "ConfigError: train.resume=AUTO is read as a folder name; to continue from this run's own folder, pass "
        "train.resume=auto (lower case)")


@pytest.mark.slow
def test_a_multiruns_refusal_composes_each_job_once(monkeypatch):
    # Was: `-m train.stpes=1.5 +model.dpeth=0 eval.num_samples=2 seed=0,1 model.width=8,16 train.learning_rate=0.1,0.01`
    # composed its jobs 36 times, 25 of them distinct (each fix checked against the 8 jobs): the cache of 8
    # compositions dropped a job before the next check of the same command composed it again.
    import hydra

    from gensbi_sharding.harness import command_defaults

    composed, real = [], hydra.compose
    monkeypatch.setattr(hydra, "compose", lambda **kw: composed.append(tuple(kw["overrides"])) or real(**kw))
    command_defaults.composed.cache_clear()
    problem = command_problem(["-m", "train.stpes=1.5", "+model.dpeth=0", "eval.num_samples=2", "seed=0,1",
                               "model.width=8,16", "train.learning_rate=0.1,0.01"])
    assert fix_of(problem) == ("train.steps=2", "model.depth=3", "eval.num_samples=10"), problem
    assert len(composed) == len(set(composed)) > 8, composed


@pytest.mark.slow  # ~0.7 s on 2 cores
def test_too_few_c2st_folds_are_fixed_by_the_nearest_valid_values():
    # Was: "set eval.c2st_folds=5" (the default), and with eval.num_samples=1 "set eval.num_samples=10", where two
    # folds of four samples would do
    assert config_problem(["eval.c2st_folds=1"]) == (
        "ConfigError: eval.c2st_folds=1 must be >= 2 (cross-validation needs two folds); set eval.c2st_folds=2")
    assert config_problem(["eval.c2st_folds=1", "eval.num_samples=1"]) == (
        "ConfigError: eval.c2st_folds=1 must be >= 2 (cross-validation needs two folds); set eval.c2st_folds=2, "
        "though eval.c2st_folds=2 is refused too: eval.num_samples=1 must be >= 2 * eval.c2st_folds "
        "(eval.c2st_folds=2); set eval.num_samples=4")
    assert config_problem(["eval.c2st_folds=2", "eval.num_samples=4"]) is None


def test_a_fix_of_a_group_and_a_value_is_checked_against_the_devices_and_the_command_it_shows_passes(devices):
    # Was: launch.py mesh.spec=auto mesh.model_axis=3 on 8 devices -> "use mesh=dict mesh.model_axis=3 instead of
    # mesh=auto", which the next run refused ("8 devices are not divisible by model_axis=3; set mesh.model_axis=2").
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    problem = job_problem(compose_tiny("mesh=auto", "mesh.model_axis=3"))
    assert fix_of(problem) == ("mesh.spec=dict", "mesh.model_axis=2"), problem
    assert problem == ("ConfigError: mesh.model_axis / mesh.devices need the dict form: use mesh=dict "
                       "mesh.model_axis=2 (mesh=dict mesh.model_axis=3 is refused too: mesh.model_axis=3: 8 devices "
                       "are not divisible by model_axis=3)")
    assert job_problem(compose_tiny("mesh=dict", "mesh.model_axis=2")) is None  # the command it shows
    # a fix that passes is offered as it was
    assert job_problem(compose_tiny("mesh=auto", "mesh.model_axis=4")).endswith(
        "use mesh=dict mesh.model_axis=4 instead of mesh=auto")
