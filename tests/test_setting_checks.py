"""Settings checked as typed: a value named as the override that gives it, settings without effect named, rule
overrides and rule files refused before Hydra, a refused run leaving no folder.
"""

import dataclasses
import importlib.metadata
import importlib.util
import os
import subprocess
import sys

import pytest

from checkout_files import options_on_disk, shipped_options
from faults_helpers import REPO, compose_tiny, registered
from gensbi_sharding.harness.command_checks import command_problem

# The rules the checks list: every conf/rule/*.yaml on disk, so a user's own (the README's my_rule.yaml) too. The
# tests' own rule files are named r69rule, which no user picks: Hydra reads conf/ first, so a user's file of the same
# name would be composed in place of theirs.
RULES = ", ".join(options_on_disk("rule"))


@pytest.mark.slow
@pytest.mark.parametrize("text, said", [
    ("name: r69rule\nembd: data\n", "rule.embd is not a logical axis; valid keys: embed, mlp, heads, vocab, in, out "
                                    "(and name); did you mean rule.embed?"),
    ("name: r69rule\nembed: 3\n", "rule.embed=3 must be a mesh axis name, a list of them, or null; e.g. "
                                  "rule.embed=data, or rule.embed=null (unsplit)"),
    ("name: r69rule\nembed: [data, data]\n", "rule.embed=[data,data] names a mesh axis twice; list each mesh axis "
                                             "once: set rule.embed=data"),
    ("name: r69rule\nembed: dta\n", "rule.embed=dta (rule r69rule) names mesh axis dta, which the mesh lacks; valid "
                                    "values: data, model or null; set rule.embed=data"),
])
def test_a_rule_files_table_is_refused_with_the_command_lines_checks(tmp_path, text, said):
    # Was: `python launch.py rule=my_rule` with a key typo in conf/rule/my_rule.yaml passed launch.py's checks of the
    # command line; the run refused the table after Hydra had made its folder, which kept error.txt and metrics.json.
    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / "r69rule.yaml").write_text(text)
    searched = f"hydra.searchpath=[file://{tmp_path}]"
    written = f" (written in {tmp_path / 'rule' / 'r69rule.yaml'}: fix it there)"
    assert command_problem([searched, "rule=r69rule"]) == said + written
    assert command_problem([searched, "experiment=quick", "dry_run=true", "rule=r69rule"]) == said + written
    assert command_problem(["-m", searched, "rule=fsdp,r69rule"]) == said + written
    assert command_problem([searched, "rule=fsdp"]) is None  # a file this command never reads stops nothing
    if "dta" in text:  # no mesh: no mesh axis to lack (as the run takes it)
        assert command_problem([searched, "rule=r69rule", "mesh=none"]) is None
        assert command_problem([searched, "rule=r69rule", "rule.embed=data"]) is None  # the override wins


def test_rules_listed_are_the_shipped_four_and_any_of_the_users():
    assert shipped_options("rule") == ["fsdp", "fsdp_tensor", "replicated", "tensor"]
    assert set(shipped_options("rule")) <= set(RULES.split(", "))


def readme_rule_searched(tmp_path):
    """The README's conf/rule/my_rule.yaml (name, embed, mlp: heads and vocab left out) in tmp_path/rule, named
    r69rule (see RULES), and the search path override that finds it."""
    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / "r69rule.yaml").write_text("name: r69rule\nembed: data\nmlp: model\n")
    return f"hydra.searchpath=[file://{tmp_path}]"


@pytest.mark.slow
def test_overriding_an_axis_a_rule_file_leaves_out_names_the_override_that_sets_it(tmp_path):
    # Typed: python launch.py rule=my_rule rule.heads=model model=transformer, with the README's conf/rule/my_rule.yaml
    # (name, embed, mlp: "keys left out are not split"). Was: Hydra's seven lines, "Could not override 'rule.heads'.
    # To append to your config use +rule.heads=model ... Key 'heads' is not in struct ... HYDRA_FULL_ERROR=1", whose
    # + is refused for a rule listing heads (-m rule=fsdp,my_rule rule.heads=model: job 1 refused with those lines).
    searched = readme_rule_searched(tmp_path)
    said = ("rule.heads=model: rule=r69rule leaves heads out of its table (not split), so Hydra cannot override it; "
            "write ++rule.heads=model (sets it whether a rule's table lists heads or not), or add heads: model to the "
            "rule's file")
    assert command_problem([searched, "experiment=quick", "rule=r69rule", "rule.heads=model"]) == said
    assert said in command_problem(["-m", searched, "experiment=quick", "rule=fsdp,r69rule", "rule.heads=model"])
    for fixed in ("++rule.heads=model", "rule.mlp=null"):  # the fix followed; a key the file lists: as before
        assert command_problem([searched, "experiment=quick", "rule=r69rule", fixed]) is None
        assert command_problem(["-m", searched, "experiment=quick", "rule=fsdp,r69rule", fixed]) is None


@pytest.mark.slow
def test_removing_an_axis_a_rule_file_leaves_out_advises_an_override_that_passes(tmp_path):
    # Typed: python launch.py rule=my_rule '~rule.heads' (the README's rule file, which leaves heads out). Was: "set
    # rule.heads=null to leave it unsplit", which the next command refused in turn (needs ++rule.heads=null).
    searched = readme_rule_searched(tmp_path)
    for rule, fix in (("rule=r69rule", "++rule.heads=null"), ("rule=fsdp", "rule.heads=null")):
        said = command_problem([searched, "experiment=quick", rule, "~rule.heads"])
        assert said == f"~rule.heads: a rule's axis cannot be removed; set {fix} to leave it unsplit"
        assert command_problem([searched, "experiment=quick", rule, fix]) is None  # the advice itself passes


@pytest.mark.slow
def test_a_sweep_over_an_axis_a_rule_file_leaves_out_names_the_sweeps_fix_not_each_jobs(tmp_path):
    # Typed: python launch.py -m rule=my_rule rule.heads=model,data (README's my_rule.yaml leaves heads out). Was: each
    # job refused with its own value (job 0: "write ++rule.heads=model", job 1: "++rule.heads=data"), and beside
    # another rule override, "write ++rule.heads=model|data", which no command line takes.
    searched = readme_rule_searched(tmp_path)
    said = ("rule.heads=model,data: rule=r69rule leaves heads out of its table (not split), so Hydra cannot override "
            "it; write ++rule.heads=model,data (sets it whether a rule's table lists heads or not), or add heads: model "
            "to the rule's file")
    assert command_problem(["-m", searched, "experiment=quick", "rule=r69rule", "rule.heads=model,data"]) == said
    # beside another axis the file leaves out: the first of the two listed (test_every_axis_a_rule_file_leaves_out...)
    assert f"\n  {said}\n" in command_problem(["-m", searched, "experiment=quick", "rule=r69rule",
                                                "rule.heads=model,data", "rule.vocab=model"])
    assert said in command_problem(["-m", searched, "experiment=quick", "rule=fsdp,r69rule", "rule.heads=model,data"])
    for fixed in ("++rule.heads=model,data", "rule.mlp=model,data"):  # the fix followed; a key the file lists
        assert command_problem(["-m", searched, "experiment=quick", "rule=r69rule", fixed]) is None


@pytest.mark.slow
@pytest.mark.parametrize("sweep", [False, True])
def test_every_axis_a_rule_file_leaves_out_is_named_in_one_run(tmp_path, sweep):
    # Typed: python launch.py rule=my_rule rule.heads=model rule.vocab=model (README's my_rule.yaml leaves both out).
    # Was: heads alone refused ("write ++rule.heads=model"); the command so fixed was refused for vocab, a second round.
    head = [*(["-m"] if sweep else []), readme_rule_searched(tmp_path), "experiment=quick", "rule=r69rule"]
    heads = "model,data" if sweep else "model"
    said = command_problem([*head, f"rule.heads={heads}", "rule.vocab=model"]).splitlines()
    assert said[0] == "2 overrides are refused, each with its fix:" and len(said) == 4, said
    for line, key, value in zip(said[1:3], ("heads", "vocab"), (heads, "model")):
        assert line.startswith(f"  rule.{key}={value}: rule=r69rule leaves {key} out of its table") and \
            f"write ++rule.{key}={value} (sets it" in line, line
    assert said[3] == f"  all fixed together: ++rule.heads={heads} ++rule.vocab=model"
    assert command_problem([*head, f"++rule.heads={heads}", "++rule.vocab=model"]) is None  # the advice passes


@pytest.mark.parametrize("folder", ["work", "my dir/ünï"])
@pytest.mark.parametrize("where", ["conf/rule", "rule"])
@pytest.mark.fast_cases(1)
def test_a_rule_file_beside_a_launch_from_another_folder_is_named_with_the_search_path_to_add(tmp_path, monkeypatch,
                                                                                           folder, where):
    # Was: `cd my_project && python /path/to/launch.py rule=my_rule` beside the README's conf/rule/my_rule.yaml:
    # "Could not find 'rule/my_rule' (rule options: ...); pick one, e.g. rule=fsdp", which drops the user's rule.
    import shlex

    here = tmp_path / folder
    (here / where).mkdir(parents=True)
    (here / where / "r69rule.yaml").write_text("name: r69rule\nembed: data\nmlp: model\n")
    monkeypatch.chdir(here)
    said = command_problem(["rule=r69rule", "mesh.model_axis=2"])
    conf = here / where.removesuffix("rule").rstrip("/")
    # every rule in the checkout's conf/rule, a user's there too (see RULES)
    assert said.startswith(f"rule=r69rule: Could not find 'rule/r69rule' (rule options: {RULES}); "
                           f"{where}/r69rule.yaml here is not read: launch.py reads its own "), said
    add = said.rsplit("; add ", 1)[1]
    assert shlex.split(add)[0].startswith("hydra.searchpath=[") and f"file://{conf}" in add, add
    assert command_problem([*shlex.split(add), "rule=r69rule", "mesh.model_axis=2"]) is None  # the fix, followed
    assert command_problem(["rule=r69rul"]).endswith("; pick one, e.g. rule=fsdp")  # no such file here: as before


@pytest.mark.parametrize("typed, said", [
    ("rule.embed=dta", "rule.embed=dta (rule replicated+overrides) names mesh axis dta, which the mesh lacks; "
                       "valid values: data, model or null; set rule.embed=data"),
    ("rule.embed=3", "rule.embed=3 must be a mesh axis name, a list of them, or null; e.g. rule.embed=data, or "
                     "rule.embed=null (unsplit)"),
    # an empty value said as typed (was: "rule.embed= ... names mesh axis , which the mesh lacks")
    ("rule.embed=''", "rule.embed='' (rule replicated+overrides) names mesh axis '', which the mesh lacks; valid "
                      "values: data, model or null; set rule.embed=null"),
    ("rule.embed=[data,'']", "rule.embed=[data,''] (rule replicated+overrides) names mesh axis '', which the mesh "
                             "lacks; valid values: data, model or null; set rule.embed=[data]"),
])
@pytest.mark.fast_cases(2)
def test_a_rule_override_the_run_would_refuse_is_refused_before_hydra(typed, said):
    # The same tables typed on the command line: refused too only after the run's folder was made.
    assert command_problem(["experiment=quick", typed]) == said
    assert command_problem(["experiment=quick", "rule.embed=data"]) is None


@pytest.mark.slow
def test_a_refused_rule_file_leaves_no_folder(tmp_path):
    (tmp_path / "conf" / "rule").mkdir(parents=True)
    (tmp_path / "conf" / "rule" / "r69rule.yaml").write_text("name: r69rule\nembd: data\n")
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                          "experiment=quick", "rule=r69rule", f"hydra.run.dir={out}"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines()[-1] == (
        "[ERROR] rule.embd is not a logical axis; valid keys: embed, mlp, heads, vocab, in, out (and name); did you "
        "mean rule.embed? (written in conf/rule/r69rule.yaml: fix it there)")
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("args, said", [
    (["eval.num_samples=3"], "eval.num_samples=3 must be >= 2 * eval.c2st_folds (eval.c2st_folds=2); set "
                             "eval.num_samples=4"),
    (["mesh.model_axis=3"], "mesh.model_axis=3: 8 devices are not divisible by model_axis=3; set mesh.model_axis=2 "
                            "(divisors of 8: [1, 2, 4, 8])"),
    # Was: passed the checks before any folder (an empty list read as null), then make_mesh refused it once JAX had
    # started: "mesh.devices=[]: make_mesh got an empty device list ..." and error.txt, metrics.json in the folder
    (["mesh.devices=[]"], "mesh.devices=[] lists no device; pass mesh.devices=null for all devices"),
    (["mesh.devices=[]", "dry_run=true"], "mesh.devices=[] lists no device; pass mesh.devices=null for all devices"),
    # Was: refused by the run once JAX had started (platform_problem), inside the folder Hydra had made
    (["model=flux1", "model.dtype=float16"], "model.dtype=float16 does not compile for model=flux1 on cpu: XLA's CPU "
     "backend has no float16 matmul with float32 accumulation (F16_F16_F32, GPU only); set model.dtype=bfloat16 or "
     "model.dtype=float32, or run on a GPU"),
    # Was: refused by the run's data step, once the task was loaded, inside the folder Hydra had made
    (["data.x_transform=log"], "data.x_transform=log needs positive data, but observation 1 of task 'two_moons' holds "
     "-0.639671: the posterior cannot be conditioned on its log; set data.x_transform=none (log suits positive "
     "data spanning decades, as data=lotka_volterra's), or keep it and read only observations of positive data "
     "(two_moons's 7, 8): data.num_observation=7"),
])
def test_a_run_its_config_checks_refuse_leaves_no_folder(tmp_path, args, said):
    # Was: values the command-line checks pass but the run's own checks refuse (validate, the mesh against the
    # devices) were refused inside the run's folder, which Hydra had made: .hydra/, .run.lock, launch.log, error.txt
    # and metrics.json were left behind ("error after 27.7 ms; traceback in .../error.txt").
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), "experiment=quick", *args, f"hydra.run.dir={out}"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert ran.returncode == 1, ran.stderr
    assert not out.exists()
    assert ran.stderr.strip().splitlines() == [f"[ERROR] {said}"] and ran.stdout == ""  # the run's words
    assert "Traceback" not in ran.stderr + ran.stdout and "error.txt" not in ran.stderr + ran.stdout


NOT_HERE = "is not available here: JAX has cpu; "
NO_ACCELERATOR = pytest.mark.skipif(  # JAX finds GPU/TPU backends as jax_plugins packages or libtpu
    bool(importlib.metadata.entry_points(group="jax_plugins"))
    or any(importlib.util.find_spec(name) for name in ("jax_plugins", "libtpu")), reason="an accelerator plugin is here")


@pytest.mark.slow
@NO_ACCELERATOR
@pytest.mark.parametrize("env, args, said", [
    ({"JAX_PLATFORMS": "cuda"}, [], f"JAX_PLATFORMS=cuda {NOT_HERE}unset JAX_PLATFORMS for JAX's default, or set "
     "JAX_PLATFORMS=cpu"),
    ({"JAX_PLATFORMS": "CPU"}, ["-m", "seed=0,1"], f"JAX_PLATFORMS=CPU {NOT_HERE}unset JAX_PLATFORMS for JAX's "
     "default, or set JAX_PLATFORMS=cpu"),
    ({}, ["devices.platform=gpu"], f"devices.platform=gpu {NOT_HERE}set devices.platform=cpu, or "
     "devices.platform=null for JAX's default"),
    ({}, ["-m", "devices.platform=cpu,tpu"], f"devices.platform=tpu {NOT_HERE}set devices.platform=cpu, or "
     "devices.platform=null for JAX's default"),
])
def test_a_platform_no_plugin_here_can_start_is_refused_before_any_folder(tmp_path, env, args, said):
    # Was: `JAX_PLATFORMS=cuda python launch.py` (devices.platform=gpu alike) on a machine with no CUDA plugin was
    # refused by the run once it probed JAX, inside the folder Hydra had made (.hydra/, .run.lock, launch.log,
    # error.txt, metrics.json), which then refused the corrected command: "metrics.json already exists (status
    # error)"; a sweep's devices.platform=tpu job was refused only after the cpu job had trained.
    out = tmp_path / "out"
    folder = "hydra.sweep.dir" if "-m" in args else "hydra.run.dir"
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), *args, "experiment=quick", f"{folder}={out}"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert ran.returncode == 1, ran.stderr
    assert not out.exists()
    lines = ran.stderr.strip().splitlines()
    if "devices.platform=cpu,tpu" in args:  # a sweep ends with the sweep its refused value dropped (session 73)
        assert lines.pop() == ("or drop the values refused from the sweep: devices.platform=cpu "
                               "(was devices.platform=cpu,tpu)")
    assert said in lines[-1] and "Traceback" not in ran.stderr
    assert "ConfigError" not in ran.stderr  # the refusal without its class name, as every refusal (console.tagged)


@pytest.mark.slow
@NO_ACCELERATOR
@pytest.mark.parametrize("env, failing", [("cpu,", "''"), ("tpu,cpu", "'tpu'")])
def test_a_platform_list_with_cpu_jax_fails_on_is_refused_before_any_folder(tmp_path, env, failing):
    # Was: let through as a list with cpu, then refused by the run's probe inside the folder Hydra had made
    # ("JAX_PLATFORMS=cpu, is not available here: JAX has cpu", naming no entry), which refused the corrected command
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), "experiment=quick", f"hydra.run.dir={out}"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": env})
    assert ran.returncode == 1 and not out.exists(), ran.stderr
    assert ran.stderr.strip().splitlines()[-1] == (
        f"[ERROR] JAX_PLATFORMS={env} {NOT_HERE.rstrip('; ')}, and fails on {failing} in the list; unset "
        "JAX_PLATFORMS for JAX's default, or set JAX_PLATFORMS=cpu")


@pytest.mark.slow
@pytest.mark.parametrize("value, refused", [("1", True), ("True", True), ("0", False), ("off", False)])
def test_a_training_run_with_jit_disabled_is_refused_before_any_folder(tmp_path, value, refused):
    # Was: `JAX_DISABLE_JIT=1 python launch.py ...` (a user debugging) trained nothing: minutes later "[ERROR]
    # ValueError: Disable jit is not supported in the AOT path since the function is not available for (jit(build))",
    # naming no fix, inside the run's new folder. A dry run compiles with it, and is left to run.
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_DISABLE_JIT": value}
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), "experiment=quick", f"hydra.run.dir={out}",
                          "--cfg", "job"], capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)
    said = (f"JAX_DISABLE_JIT={value}: a run compiles its steps ahead of time (jax.jit(...).lower()), which JAX "
            "refuses with jit disabled; unset JAX_DISABLE_JIT (debug=true gives a failing run's whole traceback; "
            "dry_run=true runs with it)")
    assert (said in ran.stderr) == refused and "Traceback" not in ran.stderr, ran.stderr
    if refused:  # the run itself: refused before its folder
        ran = subprocess.run([sys.executable, str(REPO / "launch.py"), "experiment=quick", f"hydra.run.dir={out}"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)
        assert ran.returncode == 1 and ran.stderr.strip().splitlines() == [f"[ERROR] {said}"]
        assert not out.exists()


@NO_ACCELERATOR
@pytest.mark.parametrize("platform, env, refused", [
    (None, "cuda,cpu", False), (None, "cpu,cuda", False),  # JAX skips cuda beside cpu: the run's probe decides
    (None, "", False), (None, None, False), ("cpu", "cuda", False),  # devices.platform wins over JAX_PLATFORMS
    (None, "rocm", True), ("cuda", None, True), ("gpu", "cpu", True), (None, " cpu", True),
    # JAX starts every entry beside cpu, skipping only cuda: "Unable to initialize backend ''" ('tpu', 'rocm')
    (None, "cpu,", True), (None, "tpu,cpu", True), (None, "gpu,cpu", True), (None, "cpu,cpu", False),
])
def test_only_a_platform_list_jax_can_start_here_is_let_through_before_jax_starts(monkeypatch, platform, env, refused):
    from gensbi_sharding.harness.cpu_count import platform_start_problem

    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    if env is not None:
        monkeypatch.setenv("JAX_PLATFORMS", env)
    assert (platform_start_problem(platform) is not None) == refused


@pytest.mark.slow
@NO_ACCELERATOR
def test_jax_platforms_is_read_alike_by_both_checks_before_jax_starts():
    # Was: cpu_devices_known stripped JAX_PLATFORMS (' cpu': the simulated CPU devices, counted in the checks) while
    # platform_start_problem, as JAX, did not (' cpu': refused, JAX fails "Unknown backend ' cpu'")
    values = [" cpu", "cpu ", "cpu", "cpu,cuda", "cuda,cpu", "CPU"]
    code = ("import os, sys\nfrom gensbi_sharding.harness.cpu_count import cpu_devices_known, platform_start_problem\n"
            "for v in sys.argv[1:]:\n    os.environ['JAX_PLATFORMS'] = v\n"
            "    print(cpu_devices_known(None), platform_start_problem(None) is None, 'jax' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    proc = subprocess.run([sys.executable, "-c", code, *values], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [line.split() for line in proc.stdout.splitlines()]
    assert said == [[known, starts, "False"] for known, starts in (
        ("False", "False"), ("False", "False"), ("True", "True"), ("True", "True"), ("False", "True"),
        ("False", "False"))]


@pytest.mark.parametrize("overrides, named", [
    (["eval.observations=[1,1]"], "eval.observations=[1,1] lists an observation twice"),
    (["eval.observations=[1,2]", "data.num_observation=3"], "eval.observations=[1,2] is scored"),
    (["mesh.spec=foo"], "mesh.spec=foo is not one of null, auto, dict"),
    (["model.init=foo"], "model.init=foo is not one of sharded, eager"),
    (["train.schedule=linear"], "train.schedule=linear is not one of cosine, constant"),
    # (train.resume=AUTO: outside Hydra's app in run(cfg)'s settings, cfg.train.resume='AUTO'; test_resume_refusals)
    (["data.theta_transform=x"], "data.theta_transform=x is not one of support, none"),
    (["data.x_transform=x"], "data.x_transform=x is not one of none, log"),
    (["distributed.mode=x"], "distributed.mode=x is not one of none, auto, explicit"),
    (["model=flux1", "model.id_merge_mode=x"], "model.id_merge_mode=x is not one of"),
    (["rule.embed=[data,data]"], "rule.embed=[data,data] names a mesh axis twice"),
    (["activation.batch_axis=[data,model,data]"], "batch_axis=[data,model,data] names a mesh axis twice"),
    (["activation.head_axis=foo"], "head_axis=foo names mesh axis foo, which the mesh lacks"),
])
@pytest.mark.fast_cases(2)
def test_a_refusal_names_the_value_as_the_override_that_gives_it(compose_config, overrides, named):
    # Was: Python's repr, for launch.py and run(cfg) alike (the same check of the composed config):
    # "eval.observations=[1, 1]" (two shell words), "mesh.spec='foo'", "batch_axis=['data', 'model', 'data']".
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import scored_observations, validate

    cfg = compose_config(*overrides)
    if "is scored" in named:
        problem = scored_observations(cfg)[1]
    else:
        with pytest.raises(ConfigError) as raised:
            validate(cfg)
        problem = str(raised.value)
    assert named in problem and "'" not in problem.split(" is ")[0].split(" names ")[0], problem


def test_an_empty_mesh_axis_is_said_as_typed(compose_config):
    # Was: "activation: head_axis= names mesh axis , which the mesh lacks" (rule.embed='' alike: above)
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as raised:
        validate(compose_config("activation.head_axis=''"))
    assert str(raised.value) == ("activation: head_axis='' names mesh axis '', which the mesh lacks (axes: data, "
                                 "model); set activation.head_axis=null")

@pytest.mark.parametrize("key, registered, fix", [
    ("data.name", "bernoulli_glm, gaussian_linear, gaussian_linear_uniform, gaussian_mixture, lotka_volterra, sir, "
     "slcp, two_moons", "two_moons"),
    ("model.name", "flux1, mlp, simformer, transformer", "mlp"),
    ("rule.name", RULES, "replicated")])
def test_an_empty_name_is_said_as_typed_with_no_steps_to_add_it(key, registered, fix):
    # Was: "unknown data '' (data.name=); ...; or drop data.name= and choose one with data=<name>; to add '', register
    # its factory ... with @register_data('') ... and add conf/data/.yaml" (rule.name='' and model.name='' alike).
    from gensbi_sharding.harness.name_hints import registered_name_problem

    kind = key.split(".")[0]
    assert registered_name_problem(compose_tiny(f"{key}=''"), CHOICES) == (
        f"unknown {kind} '' ({key}=''); registered: {registered}; set {key}={fix}, or drop {key}='' and choose one "
        f"with {kind}=<name>")


@pytest.mark.slow
def test_a_launcher_given_without_m_is_refused_not_ignored(tmp_path, capsys):
    # Was: python launch.py hydra/launcher=slurm ... (no -m) trained here, on the login node, with no word of SLURM:
    # Hydra reads a launcher (and a sweeper, hydra.sweep.subdir) only in a multirun.
    from hydra import compose, initialize_config_dir

    from faults_helpers import REPO
    from gensbi_sharding.harness import folder_claim
    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.sweep_subdirs import unused_folder_problem

    register_configs()

    def composed(*overrides, run_dir=f"hydra.run.dir={tmp_path / 'run'}"):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            return compose("config", overrides=[run_dir, *overrides], return_hydra_config=True)

    config = composed("hydra/launcher=slurm")
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_run_start(config)
    assert capsys.readouterr().err.strip() == (
        "[ERROR] hydra/launcher=slurm: only a multirun (-m) reads it; this single run would run here, in this "
        "process, without it: add -m (python launch.py -m ...), or leave it out")
    assert not (tmp_path / "run").exists()
    assert unused_folder_problem(composed("hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5",
                                          "hydra.sweep.subdir=a"), multirun=False).startswith(
        "hydra/launcher=submitit_local hydra.launcher.timeout_min=5 hydra.sweep.subdir=a: only a multirun (-m) "
        "reads them; ")
    assert unused_folder_problem(composed("hydra/launcher=slurm", run_dir=f"hydra.sweep.dir={tmp_path}"),
                                 multirun=True) is None  # where it is read
    assert unused_folder_problem(composed("hydra/launcher=basic"), multirun=False) is None  # the default: as is


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mlp", "simformer"])
def test_activation_fields_set_where_no_activation_is_placed_are_named(model):
    # Was: activation=none activation.head_axis=model and mesh=none activation.batch_axis=model ran without a word
    # (the fields were checked against the model's reads only under activation=rule or fixed, on a mesh).
    from gensbi_sharding.harness.model_checks import ignored_settings

    cfg = compose_tiny(f"model={model}", "activation=none", "activation.head_axis=model")
    assert ignored_settings(cfg.model, cfg.activation, cfg.mesh) == (
        "no effect: activation.head_axis=model (activation=none adds no activation constraints; activation=rule or "
        "activation=fixed applies them)")
    cfg = compose_tiny(f"model={model}", "mesh=none", "activation.batch_axis=model", "activation.head_axis=null")
    assert ignored_settings(cfg.model, cfg.activation, cfg.mesh) == (
        "no effect: activation.batch_axis=model activation.head_axis=null (mesh=none: one device, no activation is "
        "placed)")
    for quiet in (("activation=none",), ("mesh=none",), ("activation.batch_axis=null",)):  # nothing set, or read
        cfg = compose_tiny(f"model={model}", *quiet)
        assert ignored_settings(cfg.model, cfg.activation, cfg.mesh) is None, quiet


def test_mesh_devices_is_named_as_typed():
    # Was: "mesh.devices=[0, 1, 1, 9] lists device 1 more than once ..." and "[2/7] mesh: ... mesh.devices=[0, 1, 2,
    # 3]": Python's list, words apart in a shell, where every other message writes a value as an override is typed.
    from gensbi_sharding.harness.hints import mesh_devices_problem

    assert mesh_devices_problem([0, 1, 1, 9], range(8)).startswith(
        "mesh.devices=[0,1,1,9] lists device 1 more than once and names device id 9")


@pytest.mark.slow
def test_every_command_a_config_file_suggests_sets_nothing_without_effect():
    # Was: conf/activation/fixed.yaml and rule.yaml suggested `activation=fixed activation.sequence_axis=model` and
    # `... activation.head_axis=null` on the default model=mlp, which reads neither: "no effect" at once.
    import re

    from faults_helpers import REPO
    from gensbi_sharding.harness.model_checks import ignored_settings

    commands = [re.split(r"\s{2,}", line.split("python launch.py", 1)[1])[0].split()  # its description cut off
                for path in sorted((REPO / "conf").rglob("*.yaml")) for line in path.read_text().splitlines()
                if line.lstrip().startswith("# python launch.py")]
    single = [words for words in commands if "-m" not in words and not any("<" in w for w in words)]
    assert ["model=transformer", "activation=fixed", "activation.sequence_axis=model"] in single
    for words in single:
        cfg = compose_tiny(*words)
        assert ignored_settings(cfg.model, cfg.activation, cfg.mesh) is None, words


def test_the_override_that_splits_on_an_odd_device_count_splits():
    # Was: devices.cpu_count=7 mesh=auto rule=tensor: "to split, run with mesh=dict mesh.model_axis=7", under which
    # every mlp variable (width 64) fell back to replicated: the hint's own command split nothing either.
    from gensbi_sharding import RULES
    from gensbi_sharding.harness.run_report import splits_nothing_hint

    for devices in (3, 7, 9):
        hint = splits_nothing_hint({"data": devices, "model": 1}, dict(RULES["tensor"]), "tensor", "auto")
        ids = ",".join(map(str, range(devices - 1)))
        assert hint.endswith(f"; to split, run with mesh=dict mesh.model_axis=2 mesh.devices=[{ids}] (an odd count "
                             "divides no power-of-2 width)"), hint
    assert splits_nothing_hint({"data": 6, "model": 1}, dict(RULES["tensor"]), "tensor", "auto").endswith(
        "; to split, run with mesh=dict mesh.model_axis=2")  # an even count: as it was


def test_a_model_file_listing_a_schema_never_stored_names_the_missing_step(tmp_path):
    # Typed (README, "A model of your own in the harness", its steps begun with the config file):
    # conf/model/tiny.yaml listing /tiny_schema, then python launch.py model=tiny experiment=quick. Was Hydra's
    # "In 'model/tiny': Could not load 'tiny_schema'." and its config search path, naming no step.
    from gensbi_sharding.harness.override_types import override_problem

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tiny.yaml").write_text("defaults:\n  - /tiny_schema\n  - _self_\n")
    (tmp_path / "model" / "wide.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nwidth: 256\n")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    assert override_problem([search, "model=tiny", "experiment=quick"]) == (
        f"model=tiny: {tmp_path / 'model' / 'tiny.yaml'} lists /tiny_schema, which no schema is stored as: add its "
        "settings' dataclass to gensbi_sharding/harness/config.py (subclassing ModelConfig, name: str = \"tiny\"), "
        "stored by register_configs as tiny_schema, or list one that is: /flux1_schema, /mlp_schema, "
        "/simformer_schema, /transformer_schema (README: A model of your own in the harness)")
    assert override_problem([search, "-m", "model=wide,tiny"]).startswith("model=wide,tiny: ")  # one of a sweep
    assert override_problem([search, "model=wide"]) is None and override_problem(["model=flux1"]) is None
    (tmp_path / "model" / "broken.yaml").write_text("defaults: [\n")  # YAML cannot read it: Hydra's error names it
    assert override_problem([search, "model=broken"]) is None


BAD_VALUES = [
    ("mesh.model_axis=0",), ("data.num_simulations=0",), ("data.batch_size=-1",), ("data.num_observation=0",),
    ("data.val_fraction=1.5",), ("train.steps=0",), ("train.log_every=0",), ("train.learning_rate=0",),
    ("train.checkpoint_every=-1",), ("train.keep=0",), ("eval.c2st_folds=1",), ("eval.ode_steps=0",),
    ("eval.num_samples=5", "eval.c2st_folds=3"), ("eval.observations=[0,3]",), ("eval.c2st_jobs=0",),
    ("train.schedule=linear",), ("train.warmup_steps=4000",), ("train.ema_decay=1.0",), ("train.ema_decay=-0.5",),
    ("train.val_every=-1",), ("train.patience=-1",), ("train.val_draws=0",), ("data.theta_transform=logit",),
    ("data.x_transform=sqrt",), ("train.weight_decay=-1",), ("data.shards=0",), ("devices.cpu_count=0",),
    ("distributed.timeout_s=0",), ("distributed.heartbeat_s=0",), ("distributed.mode=mpi",), ("model.init=lazy",),
    # Scored twice and counted twice in the mean and spread over observations; files named _1 for the second.
    ("eval.observations=[1,1]",),
    # Early stopping without validations during training: silently never stopped.
    ("train.patience=3", "train.val_every=0"),
]


@pytest.mark.parametrize("overrides", BAD_VALUES, ids=lambda o: " ".join(o))
@pytest.mark.fast_cases(2)
def test_every_refused_value_names_an_override_that_fixes_it(overrides):
    import re

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    bad = compose_tiny("train.steps=4000", *overrides)
    with pytest.raises(ConfigError) as err:
        validate(bad)
    message = str(err.value)
    assert overrides[0].split("=")[0] in message
    fixes = re.findall(r"(?:e\.g\.|set|add|use) ((?:[a-z_]+\.)+[a-z0-9_]+=(?:\[[^\]]*\]|[^\s;,)]+))", message)
    assert fixes, message
    followed = compose_tiny("train.steps=4000", *overrides, *fixes)
    validate(followed)  # the hint is enough: the run then passes validation


#: Hydra's choices of launch.py's default config (compose() alone does not record them).
CHOICES = {"model": "mlp", "data": "two_moons", "rule": "replicated"}


UNKNOWN_NAMES = [  # (overrides, the value named, the names listed, the fix, the second option)
    (("model.name=nope",), "model.name=nope", "flux1, mlp, simformer, transformer", "model.name=mlp",
     "@register_model('nope')"),
    (("model=transformer", "model.name=mlpp"), "model.name=mlpp", "flux1, mlp, simformer, transformer",
     "model.name=transformer", "@register_model('mlpp')"),
    (("model.name=transformer",), "model.name=transformer", "model=mlp loaded", "model.name=mlp",
     "choose the model with model=transformer"),
    (("data.name=two_moon",), "data.name=two_moon", "sir, slcp, two_moons", "data.name=two_moons",
     "@register_data('two_moon')"),
    (("rule.name=nope",), "rule.name=nope", RULES, "rule.name=replicated",
     "write conf/rule/nope.yaml"),
    (("rule.name=fsdp",), "rule.name=fsdp", "rule=replicated loaded", "rule=fsdp", None),
]


@pytest.mark.parametrize("overrides, named, listed, fix, second", UNKNOWN_NAMES, ids=lambda o: str(o))
@pytest.mark.fast_cases(2)
def test_an_unknown_name_names_the_override_that_fixes_it(overrides, named, listed, fix, second):
    # Was: "unknown model 'nope'; known models: ... Register a new one with @register_model('nope')."
    import re

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.name_hints import registered_name_problem

    choices = {**CHOICES, **dict(o.split("=") for o in overrides if "." not in o.split("=")[0])}
    message = registered_name_problem(compose_tiny(*overrides), choices)
    assert message and named in message and listed in message, message
    found = re.findall(r"(?:set|choose it with) ((?:[a-z_]+\.)?[a-z_]+=\w+)", message)
    assert found and found[0] == fix, message
    assert second is None or message.index(second) > message.index(fix)  # registering comes second
    if not named.startswith("rule."):  # only Hydra knows which file a rule table came from
        with pytest.raises(ConfigError, match=re.escape(named)):
            validate(compose_tiny(*overrides))
    followed = compose_tiny(*overrides, fix)  # the fix typed after the bad override is enough
    validate(followed)
    assert registered_name_problem(followed, {**choices, **dict([fix.split("=")] if "." not in fix else [])}) is None


def test_a_model_of_ones_own_is_told_every_step_and_its_borrowed_schema_is_named(tmp_path, request):
    # Was, for model=tiny (conf/model/tiny.yaml: /mlp_schema, name: tiny): "register it with
    # @register_model('tiny') and add conf/model/tiny.yaml" (a factory registered in the user's own module is
    # never imported); registered, "model.name=tiny does not fit the settings model=mlp loaded ...; choose the
    # model with model=tiny", the very choice the command made.
    from dataclasses import dataclass

    from hydra.core.config_store import ConfigStore

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import MLPConfig
    from gensbi_sharding.harness.models.mlp import make_mlp
    from gensbi_sharding.harness.name_hints import registered_name_problem

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tiny.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nname: tiny\n")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    choices = {**CHOICES, "model": "tiny"}
    unknown = registered_name_problem(compose_tiny(search, "model=tiny"), choices)
    # Was "(model.name=tiny); ...; set model.name=mlp, or drop model.name=tiny": the user typed model=tiny.
    assert unknown.startswith("unknown model 'tiny' (model=tiny, whose file sets name: tiny); registered: flux1, "
                              "mlp, simformer, transformer; choose one with model=<name> (e.g. model=mlp) instead of "
                              "model=tiny; to add 'tiny', "), unknown
    assert "model.name" not in unknown
    assert unknown.endswith("to add 'tiny', register its factory with @register_model('tiny') in a module that "
                            "gensbi_sharding/harness/models/__init__.py imports, give it a schema in "
                            "gensbi_sharding/harness/config.py stored as tiny_schema, and add conf/model/tiny.yaml "
                            "listing /tiny_schema (README: A model of your own in the harness)"), unknown
    registered(request, "model", "tiny", lambda **kw: make_mlp(**kw))  # a factory of ones own, built as mlp
    borrowed = registered_name_problem(compose_tiny(search, "model=tiny"), choices)
    assert borrowed == (
        "model=tiny holds the fields of mlp (its defaults name /mlp_schema); a model of your own needs a schema of "
        "its own: a dataclass in gensbi_sharding/harness/config.py (as MLPConfig is mlp's) stored as tiny_schema by "
        "register_configs, listed in conf/model/tiny.yaml's defaults (README: A model of your own in the "
        "harness); or set name: mlp in that file to build mlp")

    @dataclass
    class TinyConfig(MLPConfig):
        name: str = "tiny"

    ConfigStore.instance().store(name="tiny_schema", node=TinyConfig)  # the steps it names, followed
    try:
        (tmp_path / "model" / "tiny.yaml").write_text("defaults:\n  - /tiny_schema\n  - _self_\nname: tiny\n")
        assert registered_name_problem(compose_tiny(search, "model=tiny"), choices) is None
    finally:
        ConfigStore.instance().repo.pop("tiny_schema.yaml")


def test_an_unknown_data_set_chosen_by_its_file_is_named_as_typed(tmp_path):
    # Was "(data.name=mysim); ...; set data.name=mysim, or drop data.name=mysim" for data=mysim (a file of the
    # user's own saying name: mysim): the fix named the bad value itself, and a key the user never typed.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.name_hints import registered_name_problem

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mysim.yaml").write_text("defaults:\n  - two_moons\n  - _self_\nname: mysim\n")
    cfg = compose_tiny(f"hydra.searchpath=[file://{tmp_path}]", "data=mysim")
    unknown = registered_name_problem(cfg, {**CHOICES, "data": "mysim"})
    assert unknown.startswith("unknown data 'mysim' (data=mysim, whose file sets name: mysim); registered: "), unknown
    assert "; choose one with data=<name> (e.g. data=two_moons) instead of data=mysim; to add 'mysim', " in unknown
    assert "data.name" not in unknown.split("; to add")[0]


@pytest.mark.slow  # ~0.6 s on 2 cores
def test_a_data_set_of_ones_own_is_refused_evaluation_before_training(request):
    # Was: trained every step, then "ValueError: unknown sbibm task 'mysim'; registered here: two_moons, ...
    # (e.g. data=slcp)" at evaluation, status error; eval.enabled=false, the fix, named nowhere.
    import dataclasses

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.data import load_task

    from gensbi_sharding.harness.name_hints import registered_name_problem

    unknown = registered_name_problem(compose_tiny("data.name=mysim"), CHOICES)
    assert unknown.endswith(  # was "register it with @register_data('mysim') and add conf/data/mysim.yaml"
        "to add 'mysim', register its factory, returning a SimulationData (harness/simulation_data.py), with "
        "@register_data('mysim') in gensbi_sharding/harness/data.py or a module it imports, and add "
        "conf/data/mysim.yaml; with no sbibm reference posterior it trains with eval.enabled=false"), unknown
    registered(request, "data", "mysim",
               lambda **kw: dataclasses.replace(load_task("two_moons", **kw), name="mysim"))
    with pytest.raises(ConfigError) as err:
        validate(compose_tiny("data.name=mysim", "eval.enabled=true"))
    assert str(err.value) == (
        "data.name=mysim is a data set of your own, not an sbibm task: the evaluation (posterior samples scored by "
        "C2ST) reads sbibm's observations and reference posterior samples, which it has none of; set "
        "eval.enabled=false to train it (checkpoints and losses are written as usual)")
    validate(compose_tiny("data.name=mysim", "eval.enabled=false"))  # the fix it names
    validate(compose_tiny("data.name=mysim", "eval.enabled=true", "dry_run=true"))  # a dry run evaluates nothing


@pytest.mark.parametrize("override, fix", [
    ("rule.embed=modle", "rule.embed=model"), ("rule.embed=[data,modle]", "rule.embed=[data,model]"),
    ("activation.head_axis=modle", "activation.head_axis=model"), ("activation.head_axis=xyz", "activation.head_axis=null")])
@pytest.mark.fast_cases(2)
def test_a_mesh_axis_the_mesh_lacks_names_the_override_that_fixes_it(override, fix):
    # Was "valid values: data, model or null" / "use one of them, a tuple of them, or None" (no override).
    from faults_helpers import compose_tiny
    from gensbi_sharding import make_mesh
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.rule_config import check_table_against_mesh, rule_table
    from gensbi_sharding.harness.state import partition_axis_for

    mesh = make_mesh(model_axis=2)

    def check(cfg):
        name, table = rule_table(cfg.rule)
        check_table_against_mesh(name, table, tuple(mesh.axis_names))
        partition_axis_for(cfg, table, mesh)

    with pytest.raises(ConfigError) as err:
        check(compose_tiny(override))
    assert f"set {fix}" in str(err.value), str(err.value)
    check(compose_tiny(override, fix))  # the hint, followed, passes


#: Commands the run would refuse, each (name, its args, what it leaves): run by ``refused_launches``, one launch.py
#: process each. {tmp} is the test's folder; "out" and "sweep" the folders the command names for its outputs.
REFUSED_LAUNCHES = {
    "cfg job": ["--cfg", "job", "experiment=quick", "train.steps=-1"],
    "cfg hydra": ["--cfg", "hydra", "experiment=quick", "train.steps=-1", "seed=-1"],
    "info": ["--info", "defaults", "experiment=quick", "mesh.model_axis=3"],
    "cfg passes": ["--cfg", "job", "experiment=quick"],
    "info passes": ["--info", "searchpath", "experiment=quick"],
    "cfg resumes a sweep": ["--cfg", "job", "experiment=quick", "train.resume=sw"],
    "resume a sweep": ["experiment=quick", "train.resume={tmp}/sw", "hydra.run.dir={tmp}/out"],
    "resume nothing": ["experiment=quick", "train.resume={tmp}/none", "hydra.run.dir={tmp}/out"],
    "sweep resumes a sweep": ["-m", "experiment=quick", "seed=0,1", "train.resume={tmp}/sw", "hydra.sweep.dir={tmp}/out"],
}


@pytest.fixture(scope="module")
def refused_launches(tmp_path_factory):
    """``{name: (its process, its folder)}`` for ``REFUSED_LAUNCHES``, forked from one process (tests/fork_launch.py);
    each folder holds ``sw``, a sweep's folder whose job 0 saved a checkpoint (step 8) and job 1 none."""
    from faults_helpers import launches_in_folders, save_step

    def sweep_folder(folder):
        (folder / "sw" / "1").mkdir(parents=True)
        (folder / "sw" / "multirun.yaml").write_text("{}\n")
        save_step(folder / "sw" / "0", 8)

    return launches_in_folders(tmp_path_factory.mktemp("refused_launches"), REFUSED_LAUNCHES, sweep_folder)


@pytest.mark.slow  # launch.py processes (forked: about a second each)
@pytest.mark.parametrize("name, shown, said", [
    ("cfg job", "steps: -1", ["train.steps=-1 must be >= 1; e.g. train.steps=3000"]),
    ("cfg hydra", "run:", ["2 settings are refused, each with its fix:",
                           "  train.steps=-1 must be >= 1; e.g. train.steps=3000", "  seed=-1 must be >= 0; e.g. seed=0",
                           "  all fixed together: train.steps=3000 seed=0"]),
    ("info", "Defaults List", ["mesh.model_axis=3: 8 devices are not divisible by model_axis=3; set mesh.model_axis=2 "
                               "(divisors of 8: [1, 2, 4, 8])"]),
    ("cfg resumes a sweep", "resume: sw", ["train.resume={sw} is a sweep's folder: resume one of its jobs, e.g. "
                                           "train.resume={sw}/0 (jobs with a checkpoint: 0)"])])
def test_a_config_shown_that_a_run_refuses_says_so_after_it(refused_launches, name, shown, said):
    # Was: --cfg (job, hydra, all) and --info printed the config and exited 0, no word that a run of it is refused: a
    # user checking a config before a long run was misled.
    proc, folder = refused_launches[name]
    assert proc.returncode == 1 and shown in proc.stdout, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"[ERROR] a run of the config shown is refused: {said[0].format(sw=folder / 'sw')}", *said[1:]]
    passes, _ = refused_launches["cfg passes"]
    assert passes.returncode == 0 and "steps: 20" in passes.stdout and passes.stderr == ""


@pytest.mark.slow  # launch.py processes (forked: about a second each)
def test_info_ends_with_what_it_shows(refused_launches):
    # Was: 'launch.py --info searchpath' (or --info alone) ended its table with Hydra's debug line 'Setting
    # JobRuntime:name=app': the run's check of the config shown composed it again under the DEBUG logging --info set.
    proc, _ = refused_launches["info passes"]
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "Config search path" in proc.stdout and "JobRuntime" not in proc.stdout, proc.stdout
    assert set(proc.stdout.strip().splitlines()[-1]) == {"-"}, proc.stdout


@pytest.mark.slow  # launch.py processes (forked: about a second each)
@pytest.mark.parametrize("name", ["resume a sweep", "resume nothing", "sweep resumes a sweep"])
def test_a_resume_of_no_checkpoint_is_refused_before_any_folder_is_made(refused_launches, name):
    # Was: train.resume=<a sweep's folder> (or a folder that does not exist) was refused by the run, inside the folder
    # Hydra had made for it (.hydra/, .run.lock, launch.log, error.txt, metrics.json left behind); a sweep ran every
    # job, each failing so, and wrote its summary.
    proc, folder = refused_launches[name]
    assert proc.returncode == 1 and not (folder / "out").exists(), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    said = proc.stderr.strip().splitlines()
    if name == "resume nothing":
        assert said == [f"[ERROR] train.resume={folder / 'none'}: checkpoint path '{folder / 'none'}' does "
                        f"not exist (resolved to {folder / 'none'}); pass a run dir, its checkpoints/ dir or one step "
                        "dir, as train.resume=<folder>; or leave train.resume out to start fresh"]
        return
    sweep = folder / "sw"
    refusal = (f"train.resume={sweep} is a sweep's folder: resume one of its jobs, e.g. "
               f"train.resume={sweep / '0'} (jobs with a checkpoint: 0)")
    assert said == ([f"[ERROR] {refusal}"] if name == "resume a sweep" else [
        "[ERROR] this sweep's config is refused for 2 of the 2 jobs, before any job ran (nothing was written); fix or "
        "drop the values named, then run the sweep again:", f"  all 2 jobs: {refusal}"])  # once (was: once a job)


@pytest.mark.slow  # composes a model file of its own several times: ~1.7 s
def test_a_model_file_listing_no_schema_names_the_defaults_line_it_needs(tmp_path):
    # Typed: my_conf/model/small.yaml holding 'name: mlp' and 'width: 32' (no defaults list), then python launch.py
    # 'hydra.searchpath=[file://my_conf]' model=small. Was Hydra's multi-line "In 'model/small': ConfigKeyError
    # raised while composing config: Key 'width' not in 'ModelConfig'", naming no fix.
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "small.yaml").write_text("name: mlp\nwidth: 32\n")
    (tmp_path / "model" / "bare.yaml").write_text("defaults:\n  - _self_\nembed: 16\n")
    (tmp_path / "model" / "named.yaml").write_text("name: mlp\ninit: eager\n")  # ModelConfig's own keys: composes
    (tmp_path / "model" / "on_mlp.yaml").write_text("defaults:\n  - mlp\n  - _self_\nwidth: 32\n")  # another option
    search = f"hydra.searchpath=[file://{tmp_path}]"
    stored = "/flux1_schema, /mlp_schema, /simformer_schema, /transformer_schema"
    assert command_problem([search, "model=small", "experiment=quick"]) == (
        f"model=small: {tmp_path / 'model' / 'small.yaml'} sets width but lists no schema: start it with defaults: "
        f"[/mlp_schema, _self_] (as conf/model/mlp.yaml does; stored: {stored})")
    assert command_problem([search, "model=bare"]) == (
        f"model=bare: {tmp_path / 'model' / 'bare.yaml'} sets embed but lists no schema: start it with defaults: "
        f"[/<model>_schema, _self_] (as conf/model/mlp.yaml does; stored: {stored})")
    assert command_problem([search, "model=named"]) is None
    assert command_problem([search, "model=on_mlp"]) is None
    (tmp_path / "model" / "small.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nname: mlp\nwidth: 32\n")
    assert command_problem([search, "model=small", "experiment=quick"]) is None  # the fix it names composes


@pytest.mark.slow
def test_a_search_path_without_file_scheme_is_checked_as_hydra_reads_it(tmp_path):
    # Hydra reads a search path entry with no scheme ('hydra.searchpath=[my_conf]') as file://my_conf. The checks
    # before Hydra read only file:// entries: a YAML error there was Hydra's traceback, a key typo its multi-line
    # ConfigKeyError, a rule file's bad axis the run's refusal, each where the file:// spelling got one line.
    (tmp_path / "model").mkdir()
    (tmp_path / "rule").mkdir()
    (tmp_path / "model" / "broken.yaml").write_text("defaults:\n  - /mlp_schema\nwidth: [64\n")
    (tmp_path / "model" / "typo.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nwidht: 32\n")
    (tmp_path / "rule" / "r69rule.yaml").write_text("embed: model\nheads: modle\n")
    for override in ("model=broken", "model=typo", "rule=r69rule"):
        with_scheme = command_problem([f"hydra.searchpath=[file://{tmp_path}]", override, "experiment=quick"])
        assert with_scheme is not None, override
        assert command_problem([f"hydra.searchpath=[{tmp_path}]", override, "experiment=quick"]) == with_scheme
    assert "typo.yaml sets widht, which is not a setting of /mlp_schema" in command_problem(
        [f"hydra.searchpath=[{tmp_path}]", "model=typo"])


def test_a_search_path_folder_that_does_not_exist_is_named_where_its_option_is_not_found(tmp_path):
    # Typed: 'launch.py hydra.searchpath=[file://my_cnf] model=tiny' (my_conf meant). Hydra skips a folder that does
    # not exist; the refusal said "Could not find 'model/tiny' (...); pick one, e.g. model=flux1", never naming it.
    import warnings

    gone = tmp_path / "my_cnf"
    said = "Could not find '{0}' (model options: flux1, mlp, simformer, transformer); the search path's folder " \
           f"{gone} does not exist, so Hydra skips it; give hydra.searchpath the folder that holds {{0}}.yaml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Hydra's own "path=... is not available"
        assert command_problem([f"hydra.searchpath=[file://{gone}]", "model=tiny"]) == (
            "model=tiny: " + said.format("model/tiny"))
        assert command_problem([f"hydra.searchpath=[file://{gone}]", "model=mlpp"]) == (
            "model=mlpp: " + said.format("model/mlpp") + ", or did you mean model=mlp?")
        (gone / "model").mkdir(parents=True)
        assert command_problem([f"hydra.searchpath=[file://{gone}]", "model=mlpp"]) == (
            "model=mlpp: Could not find 'model/mlpp' (model options: flux1, mlp, simformer, transformer); did you "
            "mean model=mlp?")  # the folder there: as without a search path


def test_a_group_file_setting_a_key_its_section_lacks_is_named_with_the_key_and_the_fix(tmp_path):
    # Typed: my_conf/train/long.yaml (or an edited conf/train/default.yaml) with 'stesp: 500', then launch.py
    # 'hydra.searchpath=[file://my_conf]' train=long. Was Hydra's multi-line "In 'train/long': ConfigKeyError raised
    # while composing config: Key 'stesp' not in 'TrainConfig'", naming no fix.
    from gensbi_sharding.harness.config import TrainConfig

    (tmp_path / "train").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "train" / "long.yaml").write_text("steps: 500\nstesp: 500\n")
    (tmp_path / "data" / "mine.yaml").write_text("defaults:\n  - two_moons\n  - _self_\nspeed: 3\n")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    fields = ", ".join(f.name for f in dataclasses.fields(TrainConfig))
    assert command_problem([search, "train=long"]) == (
        f"{tmp_path / 'train' / 'long.yaml'} sets stesp, which is not a setting of train (did you mean steps?); its "
        f"settings: {fields}; remove stesp from that file or rename it steps")
    said = command_problem([search, "data=mine", "experiment=quick"])
    assert said.startswith(f"{tmp_path / 'data' / 'mine.yaml'} sets speed, which is not a setting of data; its "
                           "settings: name, num_simulations, "), said
    assert said.endswith("; remove speed from that file"), said
    assert command_problem([search, "train=default"]) is None  # a file the command never reads stops nothing
    (tmp_path / "train" / "long.yaml").write_text("steps: 500\n")
    assert command_problem([search, "train=long"]) is None


def test_a_group_file_value_its_section_cannot_take_is_named_with_a_value_that_fits(tmp_path):
    # Typed: my_conf/train/long.yaml with 'steps: abc' (or eval num_samples: 1.5), train=long. Was Hydra's multi-line
    # "In 'train/long': ValidationError ... Value 'abc' of type 'str' could not be converted to Integer", no fix.
    (tmp_path / "train").mkdir()
    (tmp_path / "eval").mkdir()
    (tmp_path / "train" / "long.yaml").write_text("steps: abc\n")
    (tmp_path / "eval" / "big.yaml").write_text("defaults:\n  - default\n  - _self_\nnum_samples: 1.5\n")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    assert command_problem([search, "train=long"]) == (
        f"{tmp_path / 'train' / 'long.yaml'} sets steps: abc, which it cannot take (Value 'abc' of type 'str' could "
        "not be converted to Integer); write e.g. steps: 3000 there")
    assert command_problem([search, "eval=big", "experiment=quick"]) == (
        f"{tmp_path / 'eval' / 'big.yaml'} sets num_samples: 1.5, which it cannot take (Value '1.5' of type 'float' "
        "could not be converted to Integer); write e.g. num_samples: 10000 there")
    (tmp_path / "train" / "long.yaml").write_text("steps: ${oc.env:STEPS,500}\n")  # resolved later: not judged here
    assert command_problem([search, "train=long"]) is None


def test_an_experiment_preset_of_ones_own_setting_a_key_or_value_its_section_refuses_is_named(tmp_path):
    # Typed: my_conf/experiment/mine.yaml ('# @package _global_', 'train:', '  stesp: 5'), experiment=mine. Was Hydra's
    # multi-line "In 'experiment/mine': ConfigKeyError ... Key 'stesp' not in 'TrainConfig'" (or its ValidationError).
    from gensbi_sharding.harness.config import TrainConfig

    (tmp_path / "experiment").mkdir()
    mine = tmp_path / "experiment" / "mine.yaml"
    mine.write_text("# @package _global_\ntrain:\n  stesp: 5\n")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    fields = ", ".join(f.name for f in dataclasses.fields(TrainConfig))
    assert command_problem([search, "experiment=mine"]) == (
        f"{mine} sets train.stesp, which is not a setting of train (did you mean steps?); its settings: {fields}; "
        "remove stesp under train: from that file or rename it steps")
    mine.write_text("# @package _global_\ntrain:\n  steps: abc\n")
    assert command_problem([search, "experiment=mine"]) == (
        f"{mine} sets train.steps: abc, which it cannot take (Value 'abc' of type 'str' could not be converted to "
        "Integer); write e.g. steps: 3000 under train: there")
    mine.write_text("# @package _global_\ntrain:\n  steps: 5\n")
    assert command_problem([search, "experiment=mine"]) is None


@pytest.mark.slow
def test_a_model_file_of_ones_own_with_a_non_ascii_comment_is_checked_under_an_ascii_locale(tmp_path):
    # Was: 'LC_ALL=C PYTHONUTF8=0 python launch.py hydra.searchpath=[file://my_conf] model=small experiment=quick',
    # my_conf/model/small.yaml (a valid preset) holding a comment '# a small MLP - cafe' with a UTF-8 'e' or dash,
    # ended in a UnicodeDecodeError traceback from the check of its keys, which read the file in the locale's ASCII.
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "small.yaml").write_text(
        "# a small MLP \u2014 caf\u00e9\ndefaults:\n  - /mlp_schema\n  - _self_\nname: mlp\nwidth: 32\n", encoding="utf-8")
    (tmp_path / "model" / "typo.yaml").write_text(
        "# caf\u00e9\ndefaults:\n  - /mlp_schema\n  - _self_\nname: mlp\nwidht: 32\n", encoding="utf-8")
    code = ("import sys; from gensbi_sharding.harness.command_checks import command_problem; "
            "[print(command_problem([sys.argv[1], m, 'experiment=quick'])) for m in ('model=small', 'model=typo')]")
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": "utf-8"}
    ran = subprocess.run([sys.executable, "-c", code, f"hydra.searchpath=[file://{tmp_path}]"], env=env, cwd=REPO,
                         capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert ran.returncode == 0, ran.stderr
    small, typo = ran.stdout.splitlines()
    assert small == "None"
    assert typo.startswith(f"model=typo: {tmp_path / 'model' / 'typo.yaml'} sets widht, which is not a setting of "
                           "/mlp_schema (model=mlp) (did you mean width?)"), typo
