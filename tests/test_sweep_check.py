"""A multirun checks every job's config before the first job starts (harness/sweep_check.py).

Was: a value only one job's config refuses (``-m train.steps=100,-5``, ``mesh.model_axis=1,2,3`` on 8 devices,
a batch larger than one job's data) was refused when that job started, after every earlier job had trained.
The launch end to end (nothing written, the message on the console) is tests/test_launch.py's refused sweep.
"""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import open_dict

from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.sweep_check import sweep_config_problem

CONF = str(Path(__file__).resolve().parents[1] / "conf")
HEAD = ("this sweep's config is refused for {} jobs, before any job ran (nothing was written); fix or drop the "
        "values named, then run the sweep again:")


#: Master configs composed before, by their plain overrides: a copy handed out again (13 of this file's sweeps share
#: experiment=quick's, ~0.07 s of Hydra each). This file's tests never change the working folder Hydra's config reads.
_MASTERS = {}


def master_of(plain: tuple) -> object:
    """The master config Hydra composes of the overrides ``plain`` (with its own config), inside Hydra's context: a
    copy of the one composed before, if any (the caller may change its copy)."""
    import copy

    if plain not in _MASTERS:
        _MASTERS[plain] = compose("config", overrides=list(plain), return_hydra_config=True)
    return copy.deepcopy(_MASTERS[plain])


def sweep_refusal(*command: str) -> str | None:
    """``sweep_config_problem`` of ``python launch.py -m <command>``'s master config, as Hydra composes it."""
    register_configs()
    plain = tuple(o.input_line for o in OverridesParser.create().parse_overrides(list(command))
                  if not o.is_sweep_override())
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        master = master_of(plain)
        with open_dict(master):  # a multirun's master config lists every override of the command, sweeps too
            master.hydra.overrides.task = list(command)
        return sweep_config_problem(master)


AXIS_3 = ("ConfigError: mesh.model_axis=3: 8 devices are not divisible by model_axis=3; set mesh.model_axis=2 "
          "(divisors of 8: [1, 2, 4, 8])")


@pytest.mark.parametrize("command, count, lines", [
    (("experiment=quick", "train.steps=100,-5"), "1 of the 2",
     ["job 1 (train.steps=-5): ConfigError: train.steps=-5 must be >= 1; e.g. train.steps=20"]),  # quick's (was 4000)
    # Only with the other key of the job: 7 does not split over 8 devices, 2000 is more than 1000 simulations hold.
    (("experiment=quick", "data.batch_size=256,7,2000", "data.num_simulations=1000"), "2 of the 3",
     ["job 1 (data.batch_size=7): ConfigError: data.batch_size=7 cannot be used: the global batch size 7 must be a "
      "multiple of 8 (it is split over the data-parallel size 8); set data.batch_size=8; or keep data.batch_size=7 "
      "on another mesh: mesh.model_axis=8 (data-parallel size 1) or devices.cpu_count=7 (data-parallel size 7)",
      "job 2 (data.batch_size=2000): ConfigError: data.batch_size=2000 cannot be used: the global batch size 2000 "
      "must be at most 900 (the 900 training pairs); set data.batch_size=896"]),
    (("experiment=quick", "mesh.model_axis=2,3"), "1 of the 2", [f"job 1 (mesh.model_axis=3): {AXIS_3}"]),
    # A preset's sweep (rule x model_axis 1,2,4): the command's values of its keys in their place, in its order.
    (("sweep=rules_x_model_axis", "mesh.model_axis=3,1", "rule=tensor,fsdp"), "2 of the 4",
     [f"job {n} (rule={rule} mesh.model_axis=3): {AXIS_3}" for n, rule in ((0, "tensor"), (2, "fsdp"))]),
    (("experiment=quick", "data=two_moons,sir", "data.theta_transform=nonee"), "2 of the 2",
     [f"job {n} (data={data}): ConfigError: data.theta_transform=nonee is not one of support, none; e.g. "
      f"data.theta_transform={fix}" for n, data, fix in ((0, "two_moons", "none"), (1, "sir", "support"))]),
    # Was: that job alone failed, once the jobs before it had run (and the summary named it).
    (("experiment=quick", "train.steps=2,${nope}"), "1 of the 2",
     ["job 1 (train.steps=${nope}): ConfigError: train.steps=${nope} cannot be resolved (Interpolation key 'nope' not "
      "found); give a value, e.g. train.steps=20, or point the ${...} at an existing key of the right type (python "
      "launch.py --cfg job lists the keys)"]),
    # distributed=local shares this machine's CPU devices over its processes. Was: refused when job 1 started, after
    # job 0 had run (the sweep check left every job of several processes to itself).
    (("experiment=quick", "distributed=local", "distributed.local_processes=2,3"), "1 of the 2",
     ["job 1 (distributed.local_processes=3): ConfigError: devices.cpu_count=8 does not split over "
      "distributed.local_processes=3 (the count from default); set distributed.local_processes=2 or "
      "devices.cpu_count=9"]),
    # Was: the sbibm job ran one config (two_moons, 10^3 simulations) of its preset's 24, labelled "sbibm": Hydra
    # reads hydra.sweeper.params from the command's config only.
    (("experiment=quick,sbibm", "train.steps=2"), "1 of the 2",
     ["job 1 (experiment=sbibm): experiment=sbibm is a sweep of its own (hydra.sweeper.params: data, "
      "data.num_simulations), which Hydra starts only from a command's own config: in this sweep it would run as one "
      "job; run it in a command of its own: python launch.py experiment=sbibm ..."]),
    # One process runs the jobs: its CPU device count is fixed by the first.
    (("experiment=quick", "devices.cpu_count=8,4"), "1 of the 2",
     ["job 1 (devices.cpu_count=4): ConfigError: devices.cpu_count=4 after an earlier job's 8: the jobs run one after "
      "another in this process, whose CPU device count is fixed when the first job starts JAX; sweep each device "
      "count in a sweep of its own (devices.cpu_count=4 in another command), or set devices.cpu_count=8"]),
    # Hydra would refuse the sweep composing this job too, but after making its folder. Worded as the job's command
    # alone is refused (was Hydra's "ConfigCompositionException: Error merging override ...", which names no fix).
    (("experiment=quick", "model.depth=1,x"), "1 of the 2",
     ["job 1 (model.depth=x): model.depth=x: model.depth (model=mlp): Value 'x' of type 'str' could not be converted "
      "to Integer; e.g. model.depth=1"]),  # experiment=quick's mlp (was the schema's 3)
    # Was: "ConfigCompositionException: Could not override 'model.width'.\nTo append to your config use
    # +model.width=3 (...)": two lines, and a fix launch.py refuses (+ on a key the mlp has).
    (("experiment=quick,slcp_transformer", "model.width=3"), "1 of the 2",
     ["job 1 (experiment=slcp_transformer): model.width=3: model=transformer has no field width; model=mlp has it: "
      "set model=mlp for it, or drop model.width=3"]),
])
@pytest.mark.fast_cases(2)
def test_a_sweep_with_a_refused_job_is_refused_whole_naming_each(command, count, lines):
    drop = DROPPED.get(command[-1])
    assert sweep_refusal(*command) == (HEAD.format(count) + "".join(f"\n  {line}" for line in lines)
                                       + (f"\nor drop the values refused from the sweep: {drop}" if drop else ""))


# Session 73: each refused value of a sweep whose every job is refused, dropped (a job's own fix typed into the
# sweep repeated a kept value: mesh.model_axis=2,3 told "set mesh.model_axis=2" ran 2,2, the same job twice).
DROPPED = {"train.steps=100,-5": "train.steps=100 (was train.steps=100,-5)",
           "data.num_simulations=1000": "data.batch_size=256 (was data.batch_size=256,7,2000)",
           "mesh.model_axis=2,3": "mesh.model_axis=2 (was mesh.model_axis=2,3)",
           "rule=tensor,fsdp": "mesh.model_axis=1 (was mesh.model_axis=3,1)",
           "train.steps=2,${nope}": "train.steps=2 (was train.steps=2,${nope})",
           "distributed.local_processes=2,3": "distributed.local_processes=2 (was distributed.local_processes=2,3)",
           "train.steps=2": "experiment=quick (was experiment=quick,sbibm)",
           "devices.cpu_count=8,4": "devices.cpu_count=8 (was devices.cpu_count=8,4)",
           "model.depth=1,x": "model.depth=1 (was model.depth=1,x)",
           "model.width=3": "experiment=quick (was experiment=quick,slcp_transformer)"}


@pytest.mark.parametrize("command", [
    ("experiment=quick", "rule=fsdp,tensor", "mesh.model_axis=2"),
    ("experiment=quick", "model=glob(*former)"),  # a glob of a group's options: expanded as Hydra's sweeper does
    ("experiment=quick", "hydra/launcher=slurm", "mesh.model_axis=3"),  # run elsewhere: its devices are the cluster's
    ("experiment=quick", "dry_run=true", "mesh=none", "data.batch_size=5000,6000"),  # builds no batches: as its run
])
@pytest.mark.fast_cases(2)
def test_a_sweep_whose_jobs_are_all_valid_is_let_through(command):
    assert sweep_refusal(*command) is None


def test_a_presets_sweep_the_basic_sweeper_cannot_run_or_that_has_no_job_is_refused():
    # Was: the basic sweeper's traceback (an interval), or "Launching 0 jobs" and exit 0 (an empty sweep).
    register_configs()
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        master = compose("config", overrides=["sweep=rules_x_model_axis"], return_hydra_config=True)
        with open_dict(master):
            master.hydra.sweeper.params["train.steps"] = "interval(1,5)"
        assert sweep_config_problem(master).startswith(
            "train.steps=interval(1,5) (in the preset's hydra.sweeper.params): Hydra's basic sweeper cannot sweep an "
            "interval")
        with open_dict(master):
            master.hydra.sweeper.params["train.steps"] = "range(3,1)"
        assert sweep_config_problem(master).startswith(
            "train.steps=range(3,1) (in the preset's hydra.sweeper.params): the range has no value")


@pytest.mark.parametrize("module, name", [
    ("sweep_check", "refused_jobs"), ("sweep_check", "job_problem"), ("sweep_check", "cpu_devices_known"),
    ("sweep_check", "refused_jobs_message"), ("preflight", "launcher_problem")])
@pytest.mark.fast_cases(2)
def test_a_crash_of_the_pre_sweep_check_itself_is_one_warning_line_and_the_sweep_goes_on(module, name, monkeypatch,
                                                                                          capsys):
    # Was: Hydra turned the exception into a UserWarning quoting its own `warnings.warn(` line, and the sweep started
    # unchecked. A fault of our checker must not block a valid sweep (each job is still checked when it starts), nor
    # pass unsaid. One job refused too: the crash is the checker's, whatever the jobs hold.
    import importlib

    from gensbi_sharding.harness.preflight import LauncherPreflight

    def crash(*args, **kwargs):
        raise RuntimeError("no such node\nsecond line")

    monkeypatch.setattr(importlib.import_module(f"gensbi_sharding.harness.{module}"), name, crash)
    command = ["experiment=quick", "rule=fsdp,tensor"] + (["train.steps=100,-5"] if name == "refused_jobs_message" else [])
    register_configs()
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        master = master_of(("experiment=quick",))
        with open_dict(master):
            master.hydra.overrides.task = command
        LauncherPreflight().on_multirun_start(config=master)  # returns: the sweep starts
    check = "the launcher" if module == "preflight" else "every job's config"
    assert capsys.readouterr().err.splitlines() == [
        f"[WARNING] the pre-sweep check of {check} could not run (RuntimeError: no such node; a fault of gensbi_sharding's "
        "own, not of this command): the sweep starts without it, and each job's config is still checked when that "
        "job starts (debug=true prints the check's traceback)"]


@pytest.mark.parametrize("sweep", [False, True])
@pytest.mark.parametrize("held", [False, True])
def test_a_crash_of_the_folder_check_stops_only_where_hydra_would_overwrite_files(tmp_path, monkeypatch, capsys, sweep,
                                                                                  held):
    # Was, for a crash of the check Hydra runs before it writes into the folder: its UserWarning, then Hydra wrote
    # .hydra/ over a completed run's (its record of the command that made it). A new folder has nothing to lose.
    from omegaconf import OmegaConf

    from gensbi_sharding.harness import folder_claim, outputs

    def crash(*args, **kwargs):
        raise RuntimeError("no such node")

    monkeypatch.setattr(folder_claim, "folder_problem", crash)  # the callback's check
    folder = tmp_path / "runs" / "a"
    if held:
        outputs.write_json(folder / ("0" if sweep else ".") / "metrics.json", {"status": "ok"})
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    config = OmegaConf.create({"hydra": {"sweep" if sweep else "run": {"dir": str(folder)}}, "train": {"resume": None},
                               "distributed": {"mode": "none", "process_id": None}})
    callback = folder_claim.RefuseCompletedRun()
    start = callback.on_multirun_start if sweep else callback.on_run_start
    lead = (f"the check of {folder} before Hydra writes into it could not run (RuntimeError: no such node; a fault of "
            "gensbi_sharding's own, not of this command): ")
    if held:
        with pytest.raises(SystemExit) as stop:
            start(config=config)
        assert stop.value.code == 1
        assert capsys.readouterr().err.splitlines() == [
            f"[ERROR] {lead}stopped before Hydra writes into {folder}, which holds files (an earlier run's?) it would "
            "overwrite; give a new hydra.run.dir (or hydra.sweep.dir) (debug=true prints the check's traceback)"]
    else:
        start(config=config)
        assert capsys.readouterr().err.splitlines() == [
            f"[WARNING] {lead}{folder} is new, so nothing in it can be lost: the run goes on, and checks it again "
            "before writing (debug=true prints the check's traceback)"]
    callback.on_run_end(config)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # no lock file left behind


def test_a_resume_on_a_disk_still_full_is_told_to_free_space_not_to_give_a_new_folder(tmp_path, monkeypatch,
                                                                                       capsys):
    # Round 43: a run stopped by a full disk after its checkpoint, resumed with the same command plus
    # train.resume=auto while the disk was still full: "the check of <folder> ... could not run (OSError: [Errno 28]
    # ...; a fault of gensbi_sharding's own, not of this command): ... give a new hydra.run.dir", where a new folder
    # would not hold the checkpoint that the resume continues.
    import errno
    import os

    from omegaconf import OmegaConf

    from gensbi_sharding.harness import folder_claim, launch_record, outputs

    folder = tmp_path / "run é"
    (folder / "checkpoints" / "20").mkdir(parents=True)
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "overrides.yaml").write_text("- train.steps=20\n")
    outputs.write_json(folder / "metrics.json", {"status": "error", "error": "posterior_samples.npz ..."})
    before = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    def full(src, dst, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src), None, str(dst))

    monkeypatch.setattr(launch_record.shutil, "copy2", full)
    config = OmegaConf.create({"hydra": {"run": {"dir": str(folder)}, "overrides": {"task": ["train.steps=20"]}},
                               "train": {"resume": "auto", "steps": 20},
                               "distributed": {"mode": "none", "process_id": None}})
    callback = folder_claim.RefuseCompletedRun()
    with pytest.raises(SystemExit) as stop:
        callback.on_run_start(config=config)
    assert stop.value.code == 1
    assert capsys.readouterr().err.splitlines() == [
        f"[ERROR] {folder / '.hydra' / 'saved_by.partial' / 'overrides.yaml'} could not be written (No space left on "
        f"device) as {folder} was checked before Hydra writes into it: its files are as they were; free space there "
        "(or make it writable), then run the same command again"]
    after = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".run.lock"}
    assert after == before  # the lock's file stays, as after every run


@pytest.mark.parametrize("multirun, named", [(False, "hydra.run.dir"), (True, "hydra.sweep.dir")])
def test_a_failed_jobs_folder_names_the_folder_setting_of_its_mode(tmp_path, multirun, named):
    # Was: a sweep re-run into its folder, whose jobs had failed, was told "or choose another hydra.run.dir",
    # which a multirun does not read.
    import json

    from gensbi_sharding.harness.run_folder import ensure_fresh

    (tmp_path / "metrics.json").write_text(json.dumps({"status": "error", "error": "ConfigError: x"}))
    from faults_helpers import saved_checkpoint

    saved_checkpoint(tmp_path, {"seed": 0}, {})  # a complete step (an empty folder is a save cut short: none)
    with pytest.raises(FileExistsError) as refused:
        ensure_fresh(tmp_path, multirun=multirun)
    assert str(refused.value).endswith(f"rerun with train.resume=auto to continue it in this folder, or choose another "
                                       f"{named}")


def test_a_refused_job_names_a_swept_float_compactly():
    """Was "job 0 (train.weight_decay=1000000000000.0): ..." for a typed -m train.weight_decay=1e12,0.0001."""
    from gensbi_sharding.harness.sweep_check import refused_jobs_message

    jobs = [["train.weight_decay=1000000000000.0"], ["train.weight_decay=0.0001"]]
    message = refused_jobs_message([(0, jobs[0], "ConfigError: x"), (1, jobs[1], "ConfigError: y")], jobs)
    assert "  job 0 (train.weight_decay=1e12): ConfigError: x" in message.splitlines()
    assert "  job 1 (train.weight_decay=0.0001): ConfigError: y" in message.splitlines()



@pytest.mark.slow
def test_a_refused_jobs_fix_that_prefixes_a_swept_override_names_the_sweeps_values(tmp_path):
    """Was, for a preset sweeping ``rule.heads: model,data`` over README's my_rule.yaml (heads left out): job 0 "write
    ++rule.heads=model", job 1 "write ++rule.heads=data", neither the sweep's fix; a value's fix stays the job's own."""
    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.sweep_check import refused_jobs_message

    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / "r69rule.yaml").write_text("name: r69rule\nembed: data\nmlp: model\n")
    jobs = [["rule=r69rule", f"rule.heads={axis}", f"data.batch_size={size}"] for axis in ("model", "data")
            for size in (64, 66)]
    refused = [(n, job, command_problem([f"hydra.searchpath=[file://{tmp_path}]", "experiment=quick", *job[:2]]))
               for n, job in enumerate(jobs)]
    refused[1] = (1, jobs[1], "ConfigError: data.batch_size=66 does not split; set data.batch_size=64")
    lines = refused_jobs_message(refused, jobs).splitlines()
    fix = "write ++rule.heads=model,data (sets it whether a rule's table lists heads or not)"
    assert [line.startswith(f"  job {n} ") and fix in line for n, line in zip((0, 2, 3), lines[1:2] + lines[3:])] \
        == [True] * 3 and "++rule.heads=model " not in lines[1] and "++rule.heads=data " not in lines[3], lines
    assert lines[2] == "  job 1 (rule.heads=model data.batch_size=66): ConfigError: data.batch_size=66 does not " \
        "split; set data.batch_size=64"


def test_a_refusal_every_job_of_a_sweep_shares_is_said_once():
    """Was ``JAX_PLATFORMS=tpu python launch.py -m seed=0,1``: the environment's one refusal, once per job; a job's own
    refusal beside it keeps its job's line."""
    from gensbi_sharding.harness.refusal import listed
    from gensbi_sharding.harness.sweep_check import refused_jobs_message

    env = "ConfigError: JAX_PLATFORMS=tpu is not available here: JAX has cpu; unset JAX_PLATFORMS"
    jobs = [["seed=0", "train.steps=-5"], ["seed=0", "train.steps=4"], ["seed=1", "train.steps=-5"],
            ["seed=1", "train.steps=4"]]
    steps = "ConfigError: train.steps=-5 must be >= 1; e.g. train.steps=3000"
    refused = [(n, job, listed("2 settings:", [env, steps]) if "train.steps=-5" in job else env)
               for n, job in enumerate(jobs)]
    lines = refused_jobs_message(refused, jobs).splitlines()
    assert lines[1:] == [f"  all 4 jobs: {env}", f"  job 0 (seed=0 train.steps=-5): {steps}",
                         f"  job 2 (seed=1 train.steps=-5): {steps}"]
    # one job of two refused: its line names it, as before
    assert refused_jobs_message(refused[:1], jobs[:2]).splitlines()[1:] == [
        f"  job 0 (train.steps=-5): {env}", f"  job 0 (train.steps=-5): {steps}",
        "or drop the values refused from the sweep: train.steps=4 (was train.steps=-5,4)"]


BAD = ("train.steps=-1", "data.batch_size=0", "mesh=dict", "mesh.model_axis=3")


@pytest.mark.slow
def test_several_bad_values_of_a_run_are_one_list_each_with_its_fix_whose_fixes_together_pass():
    # Was: "ConfigError: data.batch_size=0 must be >= 1; e.g. data.batch_size=256" alone; train.steps=-1 and
    # mesh.model_axis=3 were said one run later each, once the value before them was fixed.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.refusal import fix_of, fixes_of
    from gensbi_sharding.harness.job_check import job_problem

    problem = job_problem(compose_tiny(*BAD))
    assert problem.splitlines() == [
        "ConfigError: 3 settings are refused, each with its fix:",
        "  data.batch_size=0 must be >= 1; e.g. data.batch_size=256",
        "  train.steps=-1 must be >= 1; e.g. train.steps=3000",
        "  " + AXIS_3.removeprefix("ConfigError: "),
        "  all fixed together: data.batch_size=256 train.steps=3000 mesh.model_axis=2"]
    assert fix_of(problem) == ("data.batch_size=256", "train.steps=3000", "mesh.model_axis=2")
    assert job_problem(compose_tiny(*BAD, *fixes_of(fix_of(problem)))) is None  # the command it leads to runs
    assert job_problem(compose_tiny("train.steps=-1")) == (  # one: as it was
        "ConfigError: train.steps=-1 must be >= 1; e.g. train.steps=3000")


@pytest.mark.slow
def test_several_bad_values_of_a_sweep_are_one_refusal_listing_each_job_s_each_value():
    # Was: each job's first refusal only, in a plain str the refusal type could not read.
    from gensbi_sharding.harness.refusal import Refusal, parts_of

    refusal = sweep_refusal("experiment=quick", *BAD, "seed=0,1")
    lines = ["ConfigError: data.batch_size=0 must be >= 1; e.g. data.batch_size=64",
             "ConfigError: train.steps=-1 must be >= 1; e.g. train.steps=20", AXIS_3]
    # each refusal every job shares, once (was: once per job, each job's lines alike)
    assert isinstance(refusal, Refusal) and refusal.splitlines() == [
        HEAD.format("2 of the 2"), *(f"  all 2 jobs: {line}" for line in lines)]
    assert parts_of(refusal) == lines


@pytest.mark.slow
def test_each_job_is_composed_once_for_the_check_hydras_sweeper_and_its_launcher(monkeypatch):
    # Round 60: launch.py -m composed each job three times, ~0.1 s of CPU each: this check, then Hydra's basic sweeper
    # (validate_batch_is_legal) and launcher. They now get a copy of the check's, equal to a fresh composition.
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.sweep_plan import sweep_jobs

    register_configs()
    command = ["experiment=quick", "rule=replicated,fsdp", "mesh.model_axis=1,2"]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        master = compose("config", overrides=command[:1], return_hydra_config=True)
        with open_dict(master):
            master.hydra.overrides.task = command
        loader, composed = GlobalHydra.instance().config_loader(), []
        real = loader.load_configuration
        monkeypatch.setattr(loader, "load_configuration", lambda **kw: composed.append(kw["overrides"]) or real(**kw))
        assert sweep_config_problem(master) is None
        jobs = sweep_jobs(command, None)
        assert len(jobs) == 4 and len(composed) == 4
        for number, job in [*enumerate(jobs)] * 2:  # as the sweeper checks its batch, then as the launcher runs it
            cfg = loader.load_sweep_config(master_config=master, sweep_overrides=list(job))
            fresh = type(loader).load_sweep_config(loader, master, list(job))  # Hydra's own, composed anew
            assert OmegaConf.to_yaml(cfg) == OmegaConf.to_yaml(fresh)
            with open_dict(cfg):  # the launcher numbers its copy: the next reader's is untouched
                cfg.hydra.job.num = number + 100
        assert len(composed) == 4 + 8  # the fresh ones only
        loader.load_sweep_config(master, list(jobs[0]))  # a read after the launcher's: each job's config forgotten
        other = compose("config", overrides=command[:1], return_hydra_config=True)  # another multirun's master
        count = len(composed)
        loader.load_sweep_config(other, list(jobs[1]))
        assert len(composed) == count + 1 == 4 + 8 + 1 + 2  # composed for it
