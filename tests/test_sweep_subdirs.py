"""``hydra.sweep.subdir`` with an interpolation: each job's folder resolved as the launcher will, before any job runs.

Was: ``-m hydra.sweep.subdir='${rule.name}' mesh.model_axis=1,2`` ran job 0 into ``replicated/``, then Hydra
wrote job 1's ``.hydra/`` record over it before job 1 was refused the folder, so the sweep summary showed
job 0's 8x1 results under ``mesh.model_axis=2``.
"""

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from gensbi_sharding.harness import folder_claim
from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.sweep_plan import every_job
from gensbi_sharding.harness.sweep_subdirs import (colliding_subdirs_problem, foreign_runs_problem, job_subdirs,
                                                   unused_folder_problem)

REPO = Path(__file__).resolve().parents[1]


def claim_sweep(sweep: Path, subdir: str, task: list[str]) -> None:
    """``RefuseCompletedRun.on_multirun_start`` on the master config of ``-m <task>`` with ``subdir``.

    As Hydra calls it: inside a running app (the config loader is Hydra's), before the sweeper starts.
    """
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        fixed = [o for o in task if "," not in o]  # compose is run mode: the swept values come as Hydra's task list
        config = compose("config", overrides=[*fixed, f"hydra.sweep.dir={sweep}", f"hydra.sweep.subdir={subdir}"],
                         return_hydra_config=True)
        with open_dict(config):
            config.hydra.overrides.task = task
        callback = folder_claim.RefuseCompletedRun()
        callback.on_multirun_start(config)
        callback.on_multirun_end(config)


@pytest.mark.slow
def test_a_subdir_that_resolves_to_one_folder_for_two_jobs_is_refused_before_any_job(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    with pytest.raises(SystemExit):
        claim_sweep(sweep, "${rule.name}", ["mesh.model_axis=1,2", "experiment=quick"])
    assert capsys.readouterr().err.strip() == (
        "[ERROR] hydra.sweep.subdir=${rule.name} gives job 0 (mesh.model_axis=1) and job 1 (mesh.model_axis=2) one "
        f"folder ({sweep / 'replicated'}); make it differ per job, e.g. "
        "hydra.sweep.subdir='${hydra.job.num}_${rule.name}', or leave hydra.sweep.subdir out (a folder per job number)")
    assert not sweep.exists()
    with pytest.raises(SystemExit):  # the group choice decides rule.name: rules x model axes collide in pairs
        claim_sweep(sweep, "${rule.name}_x", ["rule=fsdp,tensor", "mesh.model_axis=1,2"])
    assert "gives job 0 (mesh.model_axis=1) and job 1 (mesh.model_axis=2) one folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a subdir that resolves to nothing: the sweep's own folder
        claim_sweep(sweep, "${oc.env:GENSBI_NO_SUCH_VARIABLE,''}", ["rule=fsdp,tensor"])
    assert capsys.readouterr().err.strip() == (
        "[ERROR] hydra.sweep.subdir=${oc.env:GENSBI_NO_SUCH_VARIABLE,''} is empty for job 0 (rule=fsdp): the job "
        f"would write into the sweep's own folder {sweep}; make it differ per job, e.g. "
        "hydra.sweep.subdir='${hydra.job.num}_${oc.env:GENSBI_NO_SUCH_VARIABLE,''}'")
    with pytest.raises(SystemExit):  # a key no job has: every job would fail in Hydra's launcher
        claim_sweep(sweep, "${nope}", ["rule=fsdp,tensor"])
    assert capsys.readouterr().err.strip() == (
        "[ERROR] hydra.sweep.subdir=${nope} does not resolve for the jobs of this sweep (Interpolation key 'nope' "
        "not found); name keys of the config, e.g. hydra.sweep.subdir='${hydra.job.num}_${rule.name}', or leave "
        "hydra.sweep.subdir out (a folder per job number)")
    assert not sweep.exists()


@pytest.mark.slow
def test_a_subdir_that_is_a_path_is_refused_before_any_job(tmp_path, capsys):
    # Was: jobs in <sweep>/fsdp/1/ ...: the summary (and the completed-job checks) read <sweep>/<job>/ only,
    # so the sweep ended with "multirun finished with no job metrics" and no table.
    sweep = tmp_path / "sweep"
    for subdir, flat in (("${rule.name}/${mesh.model_axis}", "${rule.name}_${mesh.model_axis}"),
                         ("${hydra.job.num}/a", "${hydra.job.num}_a"), ("../x_${hydra.job.num}", "x_${hydra.job.num}")):
        with pytest.raises(SystemExit):
            claim_sweep(sweep, subdir, ["rule=fsdp,tensor", "mesh.model_axis=1,2"])
        assert capsys.readouterr().err.strip() == (
            f"[ERROR] hydra.sweep.subdir={subdir} is a path, not one folder name: the jobs' folders would not lie "
            f"directly in the sweep's {sweep}, where its summary and checks find them; name one folder, e.g. "
            f"hydra.sweep.subdir='{flat}'")
        claim_sweep(sweep, flat, ["rule=fsdp,tensor", "mesh.model_axis=1,2"])  # the fix it names
    assert not (tmp_path / "x_0").exists()


@pytest.mark.slow
def test_subdirs_that_differ_per_job_are_accepted_as_the_launcher_resolves_them(tmp_path):
    sweep = tmp_path / "sweep"
    claim_sweep(sweep, "${rule.name}_${mesh.model_axis}", ["rule=fsdp,tensor", "mesh.model_axis=1,2"])
    claim_sweep(sweep, "${hydra.job.override_dirname}", ["rule=fsdp,tensor", "seed=1"])
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        config = compose("config", overrides=["hydra.sweep.subdir=${rule.name}_${mesh.model_axis}"],
                         return_hydra_config=True)
        with open_dict(config):
            config.hydra.overrides.task = ["rule=fsdp,tensor", "mesh.model_axis=1,2"]
        assert job_subdirs(config, every_job(config)) == ["fsdp_1", "fsdp_2", "tensor_1", "tensor_2"]


@pytest.mark.slow
def test_a_stopped_sweep_names_the_jobs_not_run_by_the_folders_its_subdir_gives_them(tmp_path):
    # Was: with hydra.sweep.subdir='${rule.name}_${mesh.model_axis}', the summary's jobs never started were rows
    # "2" and "3", and their continue commands ran them in <sweep>/2 and <sweep>/3: folders no job of the sweep has.
    import json
    import re

    from gensbi_sharding.harness.summary import refresh_sweep_summary
    from gensbi_sharding.harness.sweep_continue import whole_sweep_hint

    sweep, task = tmp_path / "sweep", ["rule=fsdp,tensor", "mesh.model_axis=1,2"]
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        config = compose("config", return_hydra_config=True,
                         overrides=[f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${rule.name}_${mesh.model_axis}"])
        with open_dict(config):
            config.hydra.overrides.task = task
        sweep.mkdir()
        OmegaConf.save(config, sweep / "multirun.yaml")  # the sweep's record, as Hydra writes it
        for name, status in (("fsdp_1", "ok"), ("fsdp_2", "preempted")):
            (sweep / name / ".hydra").mkdir(parents=True)
            OmegaConf.save(OmegaConf.create([f"rule={name[:4]}", f"mesh.model_axis={name[-1]}"]),
                           sweep / name / ".hydra" / "overrides.yaml")
            (sweep / name / "metrics.json").write_text(json.dumps({"status": status}))
        rows = refresh_sweep_summary(sweep / "fsdp_2").rows
        hint = whole_sweep_hint(sweep / "tensor_1", ["launch.py", "-m", *task, f"hydra.sweep.dir={sweep}"],
                                started=False)
    assert [(row["job"], row["metrics"]["status"]) for row in rows] == [
        ("fsdp_1", "ok"), ("fsdp_2", "preempted"), ("tensor_1", "not run"), ("tensor_2", "not run")]
    assert "(2 never started)" in hint
    assert re.findall(r"mesh.model_axis=(\d) train.resume=auto hydra.mode=RUN hydra.run.dir=(\S+)", hint) == [
        ("2", str(sweep / "fsdp_2")), ("1", str(sweep / "tensor_1")), ("2", str(sweep / "tensor_2"))]


def test_per_job_subdirs_and_literal_ones_need_no_composition(tmp_path):
    config = OmegaConf.create({})  # nothing composed: these are decided by the text alone
    jobs = [["rule=fsdp"], ["rule=tensor"]]
    assert colliding_subdirs_problem(config, "${hydra.job.num}_${rule.name}", jobs, tmp_path) is None
    assert colliding_subdirs_problem(config, "${rule.name}", jobs[:1], tmp_path) is None  # one job
    assert colliding_subdirs_problem(config, "job", jobs, tmp_path) is None  # sweep_hints.shared_folder_problem's


#: The module's ``python launch.py`` commands, each refused before any job, by the test that reads it.
REFUSED_LAUNCHES = {"test_launch_refuses_a_colliding_subdir_before_any_job_runs": "colliding",
                    "test_a_folder_override_the_mode_ignores_is_refused_naming_the_one_to_use": "sweep_dir"}


@pytest.fixture(scope="module")
def refused_launches(request, tmp_path_factory):
    """``{name: (its launch, a folder)}``: those of the module's two ``python launch.py`` commands whose tests the
    session runs (a fast run: one), forked one after the other from one process that imported launch.py's modules
    once (tests/fork_launch.py: each still a process of its own, from launch.py's first line, with this process's
    environment): "colliding" (``-m`` with a subdir two jobs share, in the repository; its folder: the sweep's, never
    made) and "sweep_dir" (a single run given ``hydra.sweep.dir=mine``; its folder: its working folder, empty)."""
    from fork_launch import run_forked

    wanted = {REFUSED_LAUNCHES[item.originalname] for item in request.session.items
              if item.path == request.path and item.originalname in REFUSED_LAUNCHES}
    sweep, cwd = tmp_path_factory.mktemp("colliding") / "sweep", tmp_path_factory.mktemp("sweep_dir")
    commands = {"colliding": ({"args": ["-m", "hydra.sweep.subdir=${rule.name}", "mesh.model_axis=1,2",
                                        "experiment=quick", f"hydra.sweep.dir={sweep}"], "cwd": REPO}, sweep),
                "sweep_dir": ({"args": ["experiment=quick", "hydra.sweep.dir=mine"], "cwd": cwd}, cwd)}
    names = [name for name in commands if name in wanted]
    procs = run_forked([commands[name][0] for name in names], env=dict(os.environ), timeout=2 * 300,
                       workdir=tmp_path_factory.mktemp("fork"))
    return {name: (proc, commands[name][1]) for name, proc in zip(names, procs)}


@pytest.mark.slow
def test_launch_refuses_a_colliding_subdir_before_any_job_runs(refused_launches):
    proc, sweep = refused_launches["colliding"]
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "[ERROR] hydra.sweep.subdir=${rule.name} gives job 0 (mesh.model_axis=1) and job 1 (mesh.model_axis=2) one "
        f"folder ({sweep / 'replicated'}); ")
    assert not sweep.exists()


@pytest.mark.slow
def test_a_folder_override_the_mode_ignores_is_refused_naming_the_one_to_use(tmp_path, capsys, refused_launches):
    # Was: -m ... hydra.run.dir=<folder> wrote the sweep into multirun/<date>/<time>/ (and a single run
    # with hydra.sweep.dir into outputs/<date>/<time>/), the folder named left empty, without a word.
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        config = compose("config", overrides=[f"hydra.run.dir={tmp_path / 'mine'}"], return_hydra_config=True)
        with open_dict(config):
            config.hydra.overrides.task = ["rule=fsdp,tensor"]
        with pytest.raises(SystemExit):
            folder_claim.RefuseCompletedRun().on_multirun_start(config)
    assert capsys.readouterr().err.strip() == (
        f"[ERROR] hydra.run.dir={tmp_path / 'mine'} is not used here: a multirun (-m, or a preset such as "
        f"experiment=sbibm) writes into hydra.sweep.dir ({config.hydra.sweep.dir}); set "
        f"hydra.sweep.dir={tmp_path / 'mine'} instead")
    assert not (tmp_path / "mine").exists()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):  # one shell word (was: bare, so
        config = compose("config", overrides=[f"hydra.run.dir={tmp_path / 'my runs'}"], return_hydra_config=True)
    assert unused_folder_problem(config, multirun=True).endswith(  # pasted, a word per part of the path)
        f"; set 'hydra.sweep.dir={tmp_path / 'my runs'}' instead")
    proc, cwd = refused_launches["sweep_dir"]  # python launch.py experiment=quick hydra.sweep.dir=mine, in cwd
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith(
        "[ERROR] hydra.sweep.dir=mine is not used here: a single run writes into hydra.run.dir (outputs/")
    assert proc.stderr.strip().endswith("); set hydra.run.dir=mine instead, or add -m for a sweep")
    assert list(cwd.iterdir()) == []  # nothing written: not outputs/ either
    claim_sweep(tmp_path / "sweep", "${hydra.job.num}", ["rule=fsdp,tensor"])  # hydra.sweep.dir given: as meant


def test_a_sweep_folder_holding_other_runs_and_no_sweeps_record_is_refused_before_any_job(tmp_path, capsys):
    # Was: -m seed=0,1 hydra.sweep.dir=runs (a folder of one's own runs a, b) read them as the sweep's jobs: "2 of its 2
    # jobs complete (a, b)", then offered to continue jobs 0 and 1 one by one into runs/0 and runs/1, among them.
    sweep = tmp_path / "runs"
    for name in ("a", "b"):
        (sweep / name / ".hydra").mkdir(parents=True)
        (sweep / name / "metrics.json").write_text('{"status": "ok"}')
    before = sorted(sweep.rglob("*"))
    with pytest.raises(SystemExit):
        claim_sweep(sweep, "${hydra.job.num}", ["seed=0,1", "experiment=quick"])
    assert capsys.readouterr().err.strip() == (
        f"[ERROR] hydra.sweep.dir={sweep} holds the folders of other runs (a, b), none of this sweep's jobs (0, 1), and "
        f"no sweep's multirun.yaml: a sweep never writes among other runs; choose a new folder, e.g. "
        f"hydra.sweep.dir={tmp_path / 'runs_sweep1'}")  # beside it (was runs/new_sweep: among the runs refused)
    assert sorted(sweep.rglob("*")) == before  # nothing written, not even a lock
    assert foreign_runs_problem(tmp_path / "runs_sweep1", ["0", "1"]) is None  # the folder it names passes
    claim_sweep(tmp_path / "runs_sweep1", "${hydra.job.num}", ["seed=0,1", "experiment=quick"])
    with pytest.raises(SystemExit):  # that one taken, the next is named
        claim_sweep(sweep, "${hydra.job.num}", ["seed=0,1", "experiment=quick"])
    assert capsys.readouterr().err.strip().endswith(f"e.g. hydra.sweep.dir={tmp_path / 'runs_sweep2'}")
    assert foreign_runs_problem(sweep, ["a", "b"]) is None  # the sweep's own jobs: its completed-job checks judge
    (sweep / "multirun.yaml").write_text("")  # a sweep's folder whose jobs a custom subdir named: likewise
    assert foreign_runs_problem(sweep, ["0", "1"]) is None
