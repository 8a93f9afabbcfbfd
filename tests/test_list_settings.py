"""Settings that take lists (``eval.observations``, ``mesh.devices``, ...) given scalars, quoted lists or items past
their end: refused naming the list to write, in launch.py before anything is written. The module's launch.py runs
are forked from one process (``forked_launches``), the refused resume's among them.
"""

import json
import os
import re

import pytest
from omegaconf import OmegaConf

import gensbi_sharding as contract
from faults_helpers import REPO, compose_tiny
from gensbi_sharding.checkpoint import CheckpointWriter
from gensbi_sharding.harness import outputs
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.override_keys import ListField, list_fields
from gensbi_sharding.harness.override_lists import list_override_problem
from gensbi_sharding.harness.state import build_state
from gensbi_sharding.harness.train import make_step_functions


def _preempted_run(run, devices_mesh):
    """A folder as a preempted ``experiment=quick model.width=16`` run leaves it: checkpoint 3 and Hydra's record."""
    saved = compose_tiny("model.width=16", "model.init=eager")
    ts = build_state(saved, dim_theta=2, dim_x=2, mesh=devices_mesh, rule_name="replicated",
                     table=dict(contract.RULES["replicated"]), resume_dir=None)
    _, state = make_step_functions(ts.model, ts.optimizer, devices_mesh, ema=ts.ema)
    with CheckpointWriter(run / "checkpoints", config=OmegaConf.to_container(saved, resolve=True)) as w:
        w.save(3, state, ts.key)
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- model.width=16\n")
    outputs.write_json(run / "metrics.json", {"status": "preempted", "preempted_at_step": 3})


@pytest.mark.slow  # a launch (refused before any simulation: about 3 s)
def test_a_refused_resume_leaves_the_folder_s_record_of_the_run_that_saved_it(forked_launches):
    # Hydra rewrites .hydra/overrides.yaml at every launch: a train.resume=auto refused for another model.width
    # left its own command as the folder's record, so the refusal could not name the saving run's command, and
    # every later hint built from the record (a stopped sweep job's continue command) named the refused one.
    proc, run = forked_launches["refused resume"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    error = next(line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("[ERROR]"))
    assert "the checkpoint was saved with model.width=16 (this run: model.width=32)" in error
    assert error.endswith("; the run that saved it was launched with: experiment=quick model.width=16")
    assert (run / ".hydra" / "overrides.yaml").read_text() == "- experiment=quick\n- model.width=16\n"
    assert sorted(p.name for p in (run / ".hydra").iterdir()) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    assert json.loads((run / "metrics.json").read_text())["previous_attempts"][0]["status"] == "preempted"


LIST_REFUSALS = [
    (("eval.observations=3", "dry_run=true"), "eval.observations=3: a list is expected; write eval.observations=[3]"),
    (("model=flux1", "model.id_embedding_strategy=bogus"),
     "model.id_embedding_strategy=bogus: a list is expected: give two of absolute, pos1d, rope1d (parameters, "
     "observations), e.g. model.id_embedding_strategy=[absolute,absolute]"),
    (("model=flux1", "model.axes_dim=8"), "model.axes_dim=8: a list is expected; write model.axes_dim=[8]"),
]


def test_list_typed_keys_come_from_every_schema():
    # From the dataclasses of harness/config.py, every model schema included (the model is chosen at compose time).
    assert list_fields() == {"mesh.devices": ListField(int, "1", frozenset()),
                             "eval.observations": ListField(int, "1", frozenset()),
                             "model.axes_dim": ListField(int, "8,0", frozenset({"flux1"})),
                             "model.id_embedding_strategy": ListField(str, "absolute,absolute", frozenset({"flux1"}))}


@pytest.mark.parametrize("args, message", [
    *LIST_REFUSALS,
    (("-m", "mesh.devices=0", "hydra.run.dir=x"), "mesh.devices=0: a list is expected; write mesh.devices=[0]"),
    # No model= given: the default model (mlp) lacks the key, so the model it belongs to is named too
    # (was: only the list to write, which Hydra then refused as "Key 'id_embedding_strategy' not in 'MLPConfig'").
    (("model.id_embedding_strategy=rope1d",), "model.id_embedding_strategy=rope1d: a key of model=flux1 (add "
     "model=flux1 unless your experiment picks it); a list is expected: give two "
     "of absolute, pos1d, rope1d (parameters, observations), e.g. model.id_embedding_strategy=[rope1d,rope1d]"),
    (("model.axes_dim=8",), "model.axes_dim=8: a key of model=flux1 (add model=flux1 unless your experiment picks "
     "it); a list is expected; write model.axes_dim=[8]"),
    # Not an element either: [true] would be refused in turn, so a value of the element type is shown.
    (("eval.observations=true",), "eval.observations=true: a list of int values is expected and 'true' is not one; "
     "write e.g. eval.observations=[1]"),
    (("model=flux1", "model.axes_dim=x"), "model.axes_dim=x: a list of int values is expected and 'x' is not one; "
     "write e.g. model.axes_dim=[8,0]"),
])
@pytest.mark.fast_cases(3)
def test_a_scalar_for_a_list_is_refused_naming_the_list_to_write(args, message):
    # Was: Hydra's "Error merging override eval.observations=3 / Invalid value assigned: int is not a
    # ListConfig, list or tuple", naming no fix.
    assert list_override_problem(args) == message
    fix = re.search(r"(?:write|e\.g\.) (\S+=\[.*\])$", message).group(1)
    fixed = [fix if a.split("=")[0] == fix.split("=")[0] else a for a in args if not a.startswith(("-", "hydra."))]
    assert list_override_problem(fixed) is None
    section, key = fix.split("=")[0].split(".")
    composed = compose_tiny(*([] if section != "model" else ["model=flux1"]), *fixed)[section][key]
    assert list(composed) == {"eval.observations=[3]": [3], "mesh.devices=[0]": [0], "eval.observations=[1]": [1],
                              "model.axes_dim=[8]": [8], "model.axes_dim=[8,0]": [8, 0],
                              "model.id_embedding_strategy=[absolute,absolute]": ["absolute", "absolute"],
                              "model.id_embedding_strategy=[rope1d,rope1d]": ["rope1d", "rope1d"]}[fix]


@pytest.mark.parametrize("args", [
    ("eval.observations=[3]",), ("eval.observations=null",), ("eval.observations=[]",),
    ("-m", "eval.observations=[1],[2]"), ("-m", "eval.observations=choice([1],[2])"),
    ("+eval.observations=[3]",), ("++eval.observations=[3]",), ("-m", "eval.observations=[1],[2,3]"),
    ("~eval.observations",), ("eval.observations=${data.num_observation}",), ("eval.num_samples=3",),
    ("hydra.run.dir=3",), ("--help",), ("--cfg", "job"), ("model=mlp", "model.axes_dim=8"),
    ("model=flux1", "model.axes_dim=[6,0]", "model.id_embedding_strategy=[absolute,rope1d]"),
])
def test_valid_forms_for_a_list_key_pass(args):
    assert list_override_problem(args) is None


@pytest.mark.parametrize("args, message", [
    # Was: left to Hydra, whose merge error ("Invalid value assigned: int is not a ListConfig") names no fix.
    # (the fix drops the +: Hydra refused +eval.observations=[3], the key exists; test_override_prefixes.py)
    (("+eval.observations=3",), "+eval.observations=3: a list is expected; write eval.observations=[3]"),
    (("++eval.observations=3",), "++eval.observations=3: a list is expected; write ++eval.observations=[3]"),
    # A sweep whose values are scalars gives every job a scalar (Hydra's merge error again).
    (("-m", "eval.observations=3,4"), "eval.observations=3,4: a sweep of eval.observations gives each job one "
     "value, and a list is expected; write eval.observations=[3],[4] (one job per value) or "
     "eval.observations=[3,4] (one job, one list)"),
    (("-m", "eval.observations=range(1,3)"), "eval.observations=range(1,3): a sweep of eval.observations gives "
     "each job one value, and a list is expected; write eval.observations=[1],[2] (one job per value) or "
     "eval.observations=[1,2] (one job, one list)"),
    (("-m", "eval.observations=choice([3],4)"), "eval.observations=choice([3],4): a sweep of eval.observations "
     "gives each job one value, and a list is expected; write eval.observations=[3],[4] (one job per value) or "
     "eval.observations=[3,4] (one job, one list)"),
])
def test_a_prefixed_or_swept_scalar_for_a_list_is_refused(args, message):
    assert list_override_problem(args) == message
    for fix in re.findall(r"(\S+=\S+) \(one job", message) or [message.rsplit("write ", 1)[1]]:
        assert list_override_problem([*args[:-1], fix]) is None


@pytest.mark.parametrize("args, message", [
    # Was: OmegaConf's traceback "AssertionError: Unexpected type for root: NoneType" (a null list), Hydra's
    # multi-line error past a list's end.
    (("eval.observations.0=3",), "eval.observations.0=3: eval.observations is null here, which has no item 0; set "
     "the whole list, e.g. eval.observations=[3]"),
    (("mesh.devices.0=1",), "mesh.devices.0=1: mesh.devices is null here, which has no item 0; set the whole list, "
     "e.g. mesh.devices=[1]"),
    (("model=flux1", "model.axes_dim.2=4"), "model.axes_dim.2=4: model.axes_dim is [8,0] here, which has no item 2; "
     "set the whole list, e.g. model.axes_dim=[8,0,4]"),
    (("model=flux1", "model.axes_dim.5=4"), "model.axes_dim.5=4: model.axes_dim is [8,0] here, which has no item 5; "
     "set the whole list instead, every item written out (model.axes_dim=[...])"),
    # an item the composed list has: Hydra sets it
    (("model=flux1", "model.axes_dim.1=4"), None),
    (("eval.observations=[1,2]", "eval.observations.1=3"), None),  # the list typed too: applied in order
])
def test_an_item_of_a_list_past_its_end_is_refused_naming_the_list_to_write(compose_config, args, message):
    assert list_override_problem(args) == message
    if message is None:
        assert list(compose_config(*args).model.axes_dim if "axes_dim" in args[-1] else
                    compose_config(*args).eval.observations) == ([8, 4] if "axes_dim" in args[-1] else [1, 3])
    elif "e.g. " in message:
        fix = message.rsplit("e.g. ", 1)[1]
        assert list_override_problem([*args[:-1], fix]) is None
        compose_config(*args[:-1], fix)


def test_an_interpolation_resolving_to_a_scalar_for_a_list_is_a_config_error():
    # Was: "TypeError: 'int' object is not iterable" from the range check, naming no key.
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as err:
        validate(compose_tiny("eval.observations=${data.num_observation}"))
    assert str(err.value) == ("eval.observations=${data.num_observation} resolves to 1, not a list; "
                              "set eval.observations=[${data.num_observation}]")
    validate(compose_tiny("eval.observations=[${data.num_observation}]"))  # the fix passes


@pytest.mark.parametrize("args, message, fix", [
    # Was: Hydra's "Error merging override eval.observations="[3]" / Invalid value assigned: str is not a
    # ListConfig, list or tuple", naming no fix (the inner quotes, kept from the shell, make the list a string).
    (('eval.observations="[3]"',), 'eval.observations="[3]": the quotes make [3] a string, and a list is '
     "expected; write eval.observations=[3] (quote the whole override for the shell: 'eval.observations=[3]')",
     ["eval.observations=[3]"]),
    (("model=flux1", "model.axes_dim='[8,0]'"), "model.axes_dim='[8,0]': the quotes make [8,0] a string, and a list "
     "is expected; write model.axes_dim=[8,0] (quote the whole override for the shell: 'model.axes_dim=[8,0]')",
     ["model=flux1", "model.axes_dim=[8,0]"]),
    (("-m", 'eval.observations="[1]","[2,3]"'), 'eval.observations="[1]","[2,3]": the quotes make [1] a string, '
     "and a list is expected; write eval.observations=[1],[2,3] (quote the whole override for the shell: "
     "'eval.observations=[1],[2,3]')", ["-m", "eval.observations=[1],[2,3]"]),
    # A quoted scalar: the list is [3], not ["3"]; swept quoted values were shown as QuotedString(text=...).
    (('eval.observations="3"',), 'eval.observations="3": a list is expected; write eval.observations=[3]',
     ["eval.observations=[3]"]),
    (("-m", 'eval.observations="3",4'), 'eval.observations="3",4: a sweep of eval.observations gives each job one '
     "value, and a list is expected; write eval.observations=[3],[4] (one job per value) or eval.observations=[3,4] "
     "(one job, one list)", ["-m", "eval.observations=[3],[4]"]),
    # Quoted, and no list of ints either: not shown as the fix (Hydra would refuse [a] in turn).
    (('eval.observations="[a]"',), "eval.observations=\"[a]\": a list of int values is expected and '\"[a]\"' is "
     "not one; write e.g. eval.observations=[1]", ["eval.observations=[1]"]),
])
def test_a_quoted_list_for_a_list_key_is_refused_naming_the_unquoted_list(args, message, fix):
    assert list_override_problem(args) == message
    assert list_override_problem(fix) is None
    if "-m" not in fix:
        key = fix[-1].split("=")[0]
        section, name = key.split(".")
        composed = list(compose_tiny(*fix)[section][name])
        assert composed == {"[3]": [3], "[8,0]": [8, 0], "[1]": [1]}[fix[-1].split("=")[1]]


@pytest.fixture(scope="module")
def forked_launches(tmp_path_factory, devices):
    """The module's ``python launch.py`` runs, each forked from one Python process that imported launch.py's
    modules once (tests/fork_launch.py: ~1.5 s of CPU less per launch; each still a process of its own, from
    launch.py's first line): ``{args: (its launch, its empty working folder)}`` for ``LIST_REFUSALS``, and
    ``"refused resume"``: (``experiment=quick model.width=32 train.resume=auto`` in the repository, into a folder
    ``_preempted_run`` left with ``model.width=16``, that folder)."""
    from fork_launch import run_forked

    root = tmp_path_factory.mktemp("list_refusals")
    folders = [root / str(i) for i in range(len(LIST_REFUSALS))]
    for folder in [*folders, root / "fork"]:
        folder.mkdir()
    run = tmp_path_factory.mktemp("refused_resume") / "run"
    _preempted_run(run, contract.make_mesh(model_axis=1))
    runs = [{"args": args, "cwd": folder} for (args, _), folder in zip(LIST_REFUSALS, folders)]
    runs.append({"args": ["experiment=quick", "model.width=32", "train.resume=auto", f"hydra.run.dir={run}"],
                 "cwd": REPO})
    procs = run_forked(runs, env=dict(os.environ), timeout=300 * 2, workdir=root / "fork")
    launches = {args: (proc, folder) for (args, _), proc, folder in zip(LIST_REFUSALS, procs, folders)}
    launches["refused resume"] = procs[-1], run
    return launches


@pytest.fixture(scope="module")
def list_refusal_launches(forked_launches):
    """``{args: (its launch, its empty working folder)}`` for ``LIST_REFUSALS`` (``forked_launches``)."""
    return forked_launches


@pytest.mark.slow  # launch.py processes (refused while composing, forked: about 3 s in all)
@pytest.mark.parametrize("args, message", LIST_REFUSALS)
def test_a_scalar_for_a_list_stops_launch_in_one_line_writing_nothing(list_refusal_launches, args, message):
    proc, tmp_path = list_refusal_launches[args]
    assert proc.returncode == 1 and proc.stderr == f"[ERROR] {message}\n"
    assert list(tmp_path.iterdir()) == []  # no outputs/ folder
