"""Runs continuing other runs (``train.resume=<run>``, ``auto``), requeued, stopped and rerun as sweeps: each
continues the run it should, sets an earlier attempt's outputs aside, and names the commands that continue it.
"""

import csv
import json
import logging
import shlex
import shutil

import numpy as np
import pytest
from omegaconf import OmegaConf

from faults_helpers import as_hydra_job, compose_tiny, save_step
from gensbi_sharding.harness import folder_claim, outputs, run_folder, sweep_continue
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.summary import write_summary
from gensbi_sharding.harness.sweep_hints import CONTINUE_ENV, continue_command, job_command


@pytest.mark.slow
def test_a_requeued_continuation_continued_once_by_auto_still_resumes_its_own_checkpoint(tmp_path, monkeypatch,
                                                                                       caplog):
    # Was: `python launch.py train.resume=a hydra.run.dir=b`, preempted after b's own save, continued once by hand
    # with train.resume=auto (which saved b's newest checkpoint), then preempted and requeued with the original
    # command: refused, "rerun with train.resume=auto", as if b continued another run; the requeued job ended in error.
    import shutil

    import pytest
    from omegaconf import OmegaConf

    from gensbi_sharding.checkpoint import committed_steps
    from gensbi_sharding.harness import outputs, run_folder
    from gensbi_sharding.harness.resume import resume_point

    monkeypatch.chdir(tmp_path)  # the launch folder, which a relative train.resume is read against
    out = tmp_path / "b"
    save_step(tmp_path / "a", 10, info={"n": 1})
    save_step(out, 30, resume="a", info={"n": 1})  # the original command's own save
    save_step(out, 40, resume="auto", info={"n": 1})  # the attempt continued by hand
    outputs.write_json(out / "metrics.json", {"status": "preempted", "stopped_at_step": 40})
    assert run_folder.ensure_fresh(out, resume="a")["status"] == "preempted"
    with caplog.at_level("INFO", logger="gensbi_sharding"):
        assert resume_point(OmegaConf.create({"train": {"resume": "a"}}), out) == (out / "checkpoints" / "40").resolve()
    assert f"{out} already holds its own checkpoint (step 40) of this continuation" in caplog.text
    # Another lineage under the auto save: refused as before, naming the override that continues it here.
    save_step(tmp_path / "a2", 5, info={"n": 1})
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder"):
        run_folder.ensure_fresh(out, resume="a2")
    # Every checkpoint kept saved by auto (the original's deleted, train.keep): which run b continues is not known,
    # so the requeue is refused, naming the one override that continues it.
    save_step(out, 50, resume="auto", info={"n": 1})
    shutil.rmtree(out / "checkpoints" / "30", ignore_errors=True)  # the writer keeps two: gone already
    assert committed_steps(out / "checkpoints") == [40, 50]
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder"):
        run_folder.ensure_fresh(out, resume="a")


def _accepted(args, resume):
    """``args`` (one printed command's words after ``python launch.py``) as launch.py's folder callback sees them:
    raises SystemExit where that folder would be refused."""
    out = dict(a.split("=", 1) for a in args if a.startswith("hydra.run.dir="))["hydra.run.dir"]
    config = OmegaConf.create({"hydra": {"run": {"dir": out}, "sweep": {"dir": None},
                                         "overrides": {"task": [a for a in args if not a.startswith("hydra.")]}},
                               "train": {"resume": resume, "steps": 3000},
                               "distributed": {"mode": "none", "process_id": None}})
    callback = folder_claim.RefuseCompletedRun()
    callback.on_run_start(config)
    callback.on_run_end(config)


def test_a_continuation_stopped_during_its_first_save_is_still_continued_from_the_run_it_continues(
        tmp_path, monkeypatch):
    # Was: killed while its first save was written (checkpoints/ holding only Orbax's temporary folder), the printed
    # command was train.resume=auto, which said "no checkpoint in <cont> yet, starting fresh" and trained from step 0,
    # and the job's own train.resume=r1 was refused ("rerun with train.resume=auto").
    out, task = tmp_path / "cont", ["experiment=quick", "train.steps=3000", "train.resume=r1"]
    (out / "checkpoints" / "20.orbax-checkpoint-tmp-1700000000" / "arrays").mkdir(parents=True)
    outputs.write_json(out / "metrics.json", {"status": "interrupted", "stopped_at_step": 20})
    command = job_command(task, out, multirun=False)
    assert command == f"python launch.py experiment=quick train.steps=3000 train.resume=r1 hydra.run.dir={out}"
    _accepted(shlex.split(command)[2:], "r1")
    save_step(out, 20, resume="r0")  # a complete one of its own, saved continuing another run: auto, not r1
    assert "train.resume=auto" in job_command(task, out, multirun=False)
    with pytest.raises(SystemExit):
        _accepted(shlex.split(command)[2:], "r1")
    # Saved continuing r1 (this command's own save): the same command, requeued, is taken (a deliberate change, was
    # refused "rerun with train.resume=auto": a SLURM/submitit requeue of the very same command ended in error).
    save_step(out, 40, resume="r1")
    _accepted(shlex.split(command)[2:], "r1")
    assert "train.resume=auto" in job_command(task, out, multirun=False)  # auto continues it as well


@pytest.mark.slow
def test_a_requeued_continuation_resumes_its_own_checkpoint_and_another_lineage_is_still_refused(
        tmp_path, monkeypatch, caplog):
    # Was: `python launch.py train.resume=a hydra.run.dir=b` preempted after b's own first save, then requeued by
    # SLURM/submitit with the very same command: refused, "rerun with train.resume=auto to continue it in this
    # folder", the requeued job ended in error until someone retyped it.
    from gensbi_sharding.harness.resume import resume_point

    monkeypatch.chdir(tmp_path)  # the launch folder, which a relative train.resume is read against
    run_a, out = tmp_path / "a", tmp_path / "b"
    save_step(run_a, 10)
    save_step(out, 30, resume="a")  # b's own save, its config as typed: train.resume=a
    outputs.write_json(out / "metrics.json", {"status": "preempted", "stopped_at_step": 30})
    _accepted(["train.resume=a", f"hydra.run.dir={out}"], "a")
    for resume in ("a", str(run_a), "./a/"):  # as typed, or the same folder typed otherwise
        assert run_folder.ensure_fresh(out, resume=resume)["status"] == "preempted"
        assert run_folder.ensure_fresh(out, resume=resume, multirun=True)["status"] == "preempted"  # a sweep's job
    cfg = OmegaConf.create({"train": {"resume": str(run_a)}})
    with caplog.at_level("INFO", logger="gensbi_sharding"):
        assert resume_point(cfg, out) == (out / "checkpoints" / "30").resolve()  # its own, not a's step 10
    assert f"{out} already holds its own checkpoint (step 30) of this continuation, as after a requeue" in caplog.text
    # Killed (checkpoints, no record): the same.
    (out / "metrics.json").unlink()
    assert run_folder.ensure_fresh(out, resume="a") is None
    with pytest.raises(FileExistsError, match="holds the checkpoints of a run with no record"):
        run_folder.ensure_fresh(out, resume_from=True)  # no run named: not known to be this continuation
    # Another lineage, no train.resume, a completed run, a dry run: refused as before.
    save_step(tmp_path / "a2", 5)
    outputs.write_json(out / "metrics.json", {"status": "preempted", "stopped_at_step": 30})
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder"):
        run_folder.ensure_fresh(out, resume="a2")
    with pytest.raises(SystemExit):
        _accepted(["train.resume=a2", f"hydra.run.dir={out}"], "a2")
    assert resume_point(OmegaConf.create({"train": {"resume": "a2"}}), out) == (tmp_path / "a2" / "checkpoints" / "5")
    save_step(out, 50)  # a newer save of its own with no train.resume: the newest decides
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto"):
        run_folder.ensure_fresh(out, resume="a")
    save_step(out, 60, resume="a")
    with pytest.raises(FileExistsError, match="writes only into a fresh folder"):
        run_folder.ensure_fresh(out, resume="a", dry_run=True)
    outputs.write_json(out / "metrics.json", {"status": "ok", "final_step": 60})
    with pytest.raises(FileExistsError, match="status ok"):
        run_folder.ensure_fresh(out, resume="a")


def test_a_continuation_refused_rerun_without_its_run_names_the_run_to_keep(tmp_path, capsys):
    # Was: `python launch.py experiment=quick train.resume=r1 hydra.run.dir=cont` stopped before its first save, then
    # rerun as `python launch.py experiment=quick hydra.run.dir=cont`: refused, "rerun with train.resume=auto to
    # continue it in this folder", which trained from step 0 (r1 unused, status ok).
    out = tmp_path / "cont"
    (out / ".hydra").mkdir(parents=True)
    (out / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- train.resume=r1\n")
    outputs.write_json(out / "metrics.json", {"status": "interrupted", "stopped_at_step": None})
    with pytest.raises(FileExistsError, match="rerun with train.resume=r1 to continue it in this folder"):
        run_folder.ensure_fresh(out)
    run_folder.ensure_fresh(out, resume_from=True)  # as named: the folder takes it
    # train.resume=auto there (was: accepted, "no checkpoint in <cont> yet, starting fresh", trained from step 0).
    auto = ["experiment=quick", "train.resume=auto", f"hydra.run.dir={out}"]
    with pytest.raises(SystemExit):
        _accepted(auto, "auto")
    assert "train.resume=auto would train it from step 0 instead; rerun with train.resume=r1" in capsys.readouterr().err
    _accepted(["experiment=quick", "train.resume=r1", f"hydra.run.dir={out}"], "r1")
    save_step(out, 20)
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder"):
        run_folder.ensure_fresh(out)
    _accepted(auto, "auto")  # its own checkpoint now: auto continues it


def test_a_continuation_stopped_before_its_first_checkpoint_is_continued_from_the_run_it_continues(
        tmp_path, monkeypatch):
    # Was: `python launch.py experiment=quick train.steps=3000 train.resume=r1 hydra.run.dir=cont` Ctrl-C'd while
    # compiling printed "continue with: python launch.py ... train.resume=auto hydra.run.dir=<cont>", which, run,
    # said "no checkpoint in <cont> yet, starting fresh" and trained steps 0..3000: r1's 20 steps unused, status ok.
    out, task = tmp_path / "cont", ["experiment=quick", "train.steps=3000", "train.resume=r1"]
    out.mkdir()
    as_hydra_job(monkeypatch, out, task)
    command = continue_command(out)
    assert command == f"python launch.py experiment=quick train.steps=3000 train.resume=r1 hydra.run.dir={out}"
    outputs.write_json(out / "metrics.json", {"status": "interrupted", "stopped_at_step": None})
    _accepted(shlex.split(command)[2:], "r1")  # the folder takes the retry (run_folder.ensure_fresh)
    # distributed=local's parent makes its processes' command as they start, before any checkpoint.
    monkeypatch.setenv(CONTINUE_ENV, command)
    assert continue_command(out) == command
    save_step(out, 20)  # once it saved, its own checkpoint is the one to continue
    auto = f"python launch.py experiment=quick train.steps=3000 train.resume=auto hydra.run.dir={out}"
    assert continue_command(out) == auto
    monkeypatch.delenv(CONTINUE_ENV)
    assert continue_command(out) == auto
    _accepted(shlex.split(auto)[2:], "auto")
    # A job that named no run to continue: auto, as before (null as well).
    assert "train.resume=auto" in job_command(["train.resume=null"], tmp_path / "new", multirun=False)


def test_a_stopped_sweep_over_runs_to_continue_names_each_jobs_own_command(tmp_path, monkeypatch):
    # Was: `-m experiment=quick train.steps=3000 train.resume=/r1,/int1` SIGTERM'd in job 0 printed "to continue the
    # whole sweep, this job and those not started: python launch.py -m experiment=quick train.steps=3000
    # train.resume=auto hydra.sweep.dir=<sweep>", which, run, ran job 0 alone and ended "sweep done: 1 ok, 0 failed"
    # (its multirun.yaml rewritten): job 1, to continue /int1, dropped without a word.
    sweep, task = tmp_path / "sw", ["experiment=quick", "train.steps=3000", "train.resume=/r1,/int1"]
    sweep.mkdir()
    OmegaConf.save({"hydra": {"overrides": {"task": task, "hydra": [f"hydra.sweep.dir={sweep}"]}}},
                   sweep / "multirun.yaml")
    job0 = ["experiment=quick", "train.steps=3000", "train.resume=/r1"]
    (sweep / "0" / ".hydra").mkdir(parents=True)
    (sweep / "0" / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in job0))
    save_step(sweep / "0", 1034)
    monkeypatch.setattr(sweep_continue, "hydra_job_overrides", lambda: (job0, True))
    hint = sweep_continue.whole_sweep_hint(sweep / "0", ["/repo/launch.py", "-m", *task])
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "preempted", "stopped_at_step": 1034})
    assert " -m " not in hint and "no one command for the sweep can" in hint, hint
    commands = [shlex.split(c) for c in hint.split(": python launch.py ", 1)[1].split(" ; ")]
    assert [c[-1] for c in commands] == [f"hydra.run.dir={sweep / '0'}", f"hydra.run.dir={sweep / '1'}"]
    assert "train.resume=auto" in commands[0] and "train.resume=/int1" in commands[1]
    for args, resume in zip(commands, ("auto", "/int1")):
        _accepted([a for a in args if a not in ("python", "launch.py")], resume)


@pytest.mark.slow
def test_a_sweeps_summary_says_which_run_each_job_continued(tmp_path):
    # Was: `-m train.resume=<run a>,<run b> train.steps=3000` wrote a table with no train.resume column (how a job
    # ran was never a swept key): two rows alike but for their numbers, which run each continued said nowhere.
    jobs = [["train.steps=3000", "train.resume=/runs/a"], ["train.steps=3000", "train.resume=/runs/b"],
            ["train.steps=3000", "train.resume=/runs/c"]]
    for number, recorded in enumerate([["train.steps=3000", "train.resume=auto"], jobs[1]]):  # job 0 continued alone
        (tmp_path / str(number) / ".hydra").mkdir(parents=True)
        OmegaConf.save(OmegaConf.create(recorded), tmp_path / str(number) / ".hydra" / "overrides.yaml")
        (tmp_path / str(number) / "metrics.json").write_text(json.dumps({"config": {"dry_run": False},
                                                                          "status": "ok", "c2st": 0.6 + number / 10}))
    summary = write_summary(tmp_path, ["train.resume"], all_jobs=jobs)
    assert summary.keys == ["train.resume"]
    rows = list(csv.DictReader((tmp_path / "sweep_summary.csv").open()))
    assert [(r["job"], r["train.resume"], r["status"]) for r in rows] == [
        ("0", "/runs/a", "ok"), ("1", "/runs/b", "ok"), ("2", "/runs/c", "not run")]
    assert "| train.resume |" in summary.text and "/runs/b" in summary.text
    # Job 1 retried in its folder with its path corrected: the run it continued, as its record says.
    OmegaConf.save(OmegaConf.create(["train.steps=3000", "train.resume=/runs/b2"]),
                   tmp_path / "1" / ".hydra" / "overrides.yaml")
    write_summary(tmp_path, ["train.resume"], all_jobs=jobs)
    rows = list(csv.DictReader((tmp_path / "sweep_summary.csv").open()))
    assert [r["train.resume"] for r in rows] == ["/runs/a", "/runs/b2", "/runs/c"]
    # Not declared (a job continued alone records train.resume=auto): still no column.
    assert write_summary(tmp_path, [], all_jobs=[j[:1] for j in jobs]).keys == []


@pytest.mark.parametrize("words", [["train.resume=auto"], ["train.resume=null"], ["++train.resume=/x"], [],
                                   ["train.resume='auto'"], ['train.resume="auto"']])  # quoted as typed: auto too
def test_named_resume_reads_only_a_run(words):
    from gensbi_sharding.harness.resume_command import named_resume

    assert named_resume(words) == ("train.resume=/x" if words == ["++train.resume=/x"] else None)


@pytest.mark.parametrize("typed, fix", [
    ("train.resume=true", "train.resume=auto"), ("train.resume=false", "train.resume=null"),
    ("mesh.spec=false", "mesh.spec=null"), ("data.x_transform=false", "data.x_transform=none"),
    ("activation.strategy=False", "activation.strategy=rule"),
    ("-m train.schedule=cosine,true", "train.schedule=cosine,cosine"),
])
def test_a_yes_no_for_a_setting_that_takes_a_name_is_refused_as_typed(typed, fix):
    # Was: `train.resume=true` (meaning "resume") trained to "[3/7] data", then "train.resume=True: checkpoint path
    # 'True' does not exist"; `mesh.spec=false` (meaning no mesh) "mesh.spec=True is not one of null, auto, dict":
    # OmegaConf turns a YAML boolean given to a text setting into the text 'True', and every message echoed that.
    from gensbi_sharding.harness.override_types import override_problem

    problem = override_problem(["experiment=quick", *typed.split()])
    assert problem is not None and "takes a name" in problem and problem.endswith(f"e.g. {fix}"), problem
    value = typed.rsplit("=", 1)[1].split(",")[-1].lower()
    assert f"{value} is a yes/no" in problem and "True" not in problem.split("(it would read")[0], problem
    assert override_problem(["experiment=quick", "train.resume=auto", "mesh.spec=null"]) is None
    # A folder or name that is the word itself (was: refused naming no way to pass it): quoted as the refusal shows.
    quoted = problem.split("quoted: ", 1)[1].split(")", 1)[0]
    assert override_problem(["experiment=quick", *shlex.split(quoted)]) is None, quoted
    from hydra.core.override_parser.overrides_parser import OverridesParser

    assert OverridesParser.create().parse_overrides(shlex.split(quoted))[0].value() == value  # the text, as Hydra reads it


def test_a_yes_no_in_a_list_for_one_value_is_swept_as_typed():
    # Was: `train.resume=[true]` "for one job per value, sweep them: -m train.resume=True", Python's spelling.
    from gensbi_sharding.harness.override_types import override_problem

    problem = override_problem(["experiment=quick", "train.schedule=[cosine,false]"])
    assert "sweep them: -m train.schedule=cosine,false;" in problem, problem


@pytest.mark.parametrize("resume", ["/r1,/int1", "auto"])
def test_a_sweep_over_runs_to_continue_rerun_as_a_whole_is_refused_naming_each_jobs_command(
        tmp_path, monkeypatch, capsys, resume):
    # Was, after `-m experiment=quick train.resume=/r1,/int1` stopped in job 0: rerun as typed, "rerun with
    # train.resume=auto to continue it in this folder"; and `-m experiment=quick train.resume=auto
    # hydra.sweep.dir=<it>` was accepted: it ran job 0 alone, rewrote multirun.yaml and ended "sweep done: 1 ok,
    # 0 failed", the job to continue /int1 gone from the sweep and its summary.
    monkeypatch.chdir(tmp_path)
    sweep, task = tmp_path / "sw", ["experiment=quick", "train.resume=/r1,/int1"]
    (sweep / "0" / ".hydra").mkdir(parents=True)
    OmegaConf.save({"hydra": {"overrides": {"task": task, "hydra": []}}}, sweep / "multirun.yaml")
    (sweep / "0" / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- train.resume=/r1\n")
    save_step(sweep / "0", 1034)
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "preempted", "stopped_at_step": 1034})
    saved = (sweep / "multirun.yaml").read_text()
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep), "subdir": "${hydra.job.num}"},
                                         "overrides": {"task": ["experiment=quick", f"train.resume={resume}"],
                                                       "hydra": []}},
                               "train": {"resume": "auto" if resume == "auto" else None, "steps": 20},
                               "dry_run": False, "distributed": {"mode": "none", "process_id": None}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    refusal = capsys.readouterr().err
    assert "train.resume=auto to continue it" not in refusal and "no one command for the sweep can" in refusal
    commands = refusal.split("one by one: ")[1].strip().split(" ; ")
    # launch.py's path: in tmp_path, "python launch.py" pasted finds no launch.py (was pinned, the fault)
    assert commands == [f"{command_for()} experiment=quick {resumed} hydra.mode=RUN hydra.run.dir={sweep / job}"
                        for resumed, job in (("train.resume=auto", "0"), ("train.resume=/int1", "1"))]
    assert (sweep / "multirun.yaml").read_text() == saved  # refused before Hydra writes


def test_a_sweep_rerun_over_jobs_stopped_with_checkpoints_is_refused_before_any_job_naming_each_and_the_fix(
        tmp_path, monkeypatch, capsys):
    # Was: `-m experiment=quick seed=0,1,2 hydra.sweep.dir=<it>` rerun after jobs 0 and 1 were killed (checkpoints, no
    # metrics.json) started the sweep: each such job was refused its folder inside its own run, one after another
    # (a job before it trained first), each naming hydra.run.dir, and the sweep ended "no job metrics".
    monkeypatch.chdir(tmp_path)
    sweep, task = tmp_path / "sw", ["experiment=quick", "seed=0,1,2"]
    for job in ("0", "1"):  # job 2 never started
        (sweep / job / ".hydra").mkdir(parents=True)
        (sweep / job / ".hydra" / "overrides.yaml").write_text(f"- experiment=quick\n- seed={job}\n")
        save_step(sweep / job, 8)
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep), "subdir": "${hydra.job.num}"},
                                         "overrides": {"task": task, "hydra": []}},
                               "train": {"resume": None, "steps": 20},
                               "dry_run": False, "distributed": {"mode": "none", "process_id": None}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == (f"[ERROR] hydra.sweep.dir={sweep}: 2 of the sweep's 3 jobs would be refused their folders, "
                        "before any job ran (nothing was written):"), lines
    for line, job in zip(lines[1:3], ("0", "1")):
        assert line.startswith(f"  job {job} (seed={job}): {sweep / job / 'checkpoints'} holds the checkpoints of a "
                               "run with no record"), line
    assert command_for() == command_for(folder=tmp_path) != "python launch.py"  # its path, pasted in tmp_path
    assert lines[3:] == [f"  continue them all from their checkpoints: {command_for()} -m experiment=quick seed=0,1,2 "
                         f"train.resume=auto hydra.sweep.dir={sweep}, or choose another hydra.sweep.dir"]
    assert not (sweep / "multirun.yaml").exists() and not (sweep / "2").exists()  # nothing written
    # the command it names passes the sweep's start
    config.train.resume = "auto"
    config.hydra.overrides.task.append("train.resume=auto")
    (callback := folder_claim.RefuseCompletedRun()).on_multirun_start(config)
    callback.on_multirun_end(config)


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_sweeps_stopped_jobs_are_each_said_in_what_their_folder_holds_and_the_fix_once(tmp_path, dry_run):
    # Was: each job's line went on with a single run's fix ("continue it here with the same command plus
    # train.resume=auto, or in a new folder with train.resume=<job> hydra.run.dir=<new folder>"; a dry run's: "choose
    # another hydra.run.dir"), wrong for a sweep's job and beside the one fix the last line names for them all.
    from gensbi_sharding.harness.stopped_jobs import stopped_jobs_problem

    sweep = tmp_path / "sw"
    save_step(sweep / "0", 4)
    save_step(sweep / "0", 8)
    save_step(sweep / "2", 6)
    jobs = [["experiment=quick", f"seed={n}"] for n in range(3)]
    fresh = dict(resume=None, resume_from=False, steps=20, dry_run=dry_run, multirun=True)
    lines = stopped_jobs_problem(sweep, [sweep / str(n) for n in range(3)], jobs, ["experiment=quick", "seed=0,1,2"],
                                 fresh).splitlines()
    held = ("holds a run's checkpoints" if dry_run else
            "holds the checkpoints of a run with no record (stopped, or its record could not be written)")
    assert lines[1:3] == [f"  job 0 (seed=0): {sweep / '0' / 'checkpoints'} {held}, newest step 8",
                          f"  job 2 (seed=2): {sweep / '2' / 'checkpoints'} {held}, newest step 6"]
    assert lines[3:] == [("  choose another hydra.sweep.dir for the dry run (a dry run writes only into fresh folders)"
                          if dry_run else "  continue them all from their checkpoints: python launch.py -m "
                          f"experiment=quick seed=0,1,2 train.resume=auto hydra.sweep.dir={sweep}, or choose another "
                          "hydra.sweep.dir")]

def test_continuing_a_sweeps_stopped_jobs_carries_the_sweeps_settings_not_the_refused_commands(tmp_path):
    # Was: '-m experiment=quick seed=1 hydra.sweep.dir=<a seed=0 sweep, job 0 stopped>' was told "continue them all
    # ...: python launch.py -m experiment=quick seed=1 train.resume=auto ...", which pasted ran (status ok): the seed-0
    # job continued on seed 1's held-out pairs and draws. Now the sweep's own (multirun.yaml); the same: as typed.
    import shlex

    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.stopped_jobs import stopped_jobs_problem

    sweep = tmp_path / "sw"
    save_step(sweep / "0", 8)
    OmegaConf.save({"hydra": {"overrides": {"task": ["experiment=quick", "seed=0"], "hydra": []}}},
                   sweep / "multirun.yaml")
    fresh = dict(resume=None, resume_from=False, steps=20, dry_run=False, multirun=True)
    said = stopped_jobs_problem(sweep, [sweep / "0"], [["experiment=quick", "seed=1"]], ["experiment=quick", "seed=1"],
                                fresh).splitlines()[-1]
    printed = said.split("continue them all from their checkpoints: ")[1].split(", or choose")[0]
    assert printed == f"python launch.py -m experiment=quick seed=0 train.resume=auto hydra.sweep.dir={sweep}"
    args = shlex.split(printed)[2:]
    assert command_problem(args) is None
    assert stopped_jobs_problem(sweep, [sweep / "0"], [["experiment=quick", "seed=0"]], args[1:-1],
                                {**fresh, "resume": "auto"}) is None  # its jobs' folders pass, as printed
    again = stopped_jobs_problem(sweep, [sweep / "0"], [["experiment=quick", "seed=0"]],
                                 ["seed=0", "experiment=quick", "train.steps=40"], fresh)
    assert "python launch.py -m seed=0 experiment=quick train.steps=40 train.resume=auto" in again  # as typed


def test_continuing_a_sweeps_stopped_jobs_of_ones_own_preset_carries_the_sweeps_search_path(tmp_path):
    # Was: '-m experiment=quick seed=1 hydra.sweep.dir=<a sweep of hydra.searchpath=[file://my_conf] model=small
    # seed=0, job 0 stopped>' was told "... python launch.py -m experiment=quick model=small seed=0 train.resume=auto
    # ...": the refused command's search path (none), so Hydra could not find model=small pasted. Now the sweep's own.
    import shlex

    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.stopped_jobs import stopped_jobs_problem

    (tmp_path / "my_conf" / "model").mkdir(parents=True)
    (tmp_path / "my_conf" / "model" / "small.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nwidth: 8\n")
    sweep, searched = tmp_path / "sw", f"hydra.searchpath=[file://{tmp_path / 'my_conf'}]"
    save_step(sweep / "0", 8)
    OmegaConf.save({"hydra": {"overrides": {"task": ["experiment=quick", "model=small", "seed=0"],
                                            "hydra": [searched, f"hydra.sweep.dir={sweep}"]}}}, sweep / "multirun.yaml")
    fresh = dict(resume=None, resume_from=False, steps=20, dry_run=False, multirun=True)
    said = stopped_jobs_problem(sweep, [sweep / "0"], [["experiment=quick", "seed=1"]], ["experiment=quick", "seed=1"],
                                fresh).splitlines()[-1]
    printed = said.split("continue them all from their checkpoints: ")[1].split(", or choose")[0]
    assert printed == (f"python launch.py -m {shlex.quote(searched)} experiment=quick model=small seed=0 "
                       f"train.resume=auto hydra.sweep.dir={sweep}"), printed
    assert command_problem(shlex.split(printed)[2:]) is None


@pytest.mark.parametrize("saved", ["/r1", "/r0"])
def test_a_sweep_continuing_one_run_rerun_as_typed_takes_the_jobs_that_saved_continuing_it(
        tmp_path, monkeypatch, capsys, saved):
    # Was: `-m experiment=quick train.resume=/r1 seed=0,1` stopped in job 0 after its first save, rerun as typed (a
    # requeue): refused, "continue it by its own command". Now the same rule as a single run's: job 0's newest
    # checkpoint saved under train.resume=/r1 is this sweep's own, continued; one saved under /r0 is still refused.
    monkeypatch.chdir(tmp_path)
    sweep, task = tmp_path / "sw", ["experiment=quick", "train.resume=/r1", "seed=0,1"]
    (sweep / "0" / ".hydra").mkdir(parents=True)
    OmegaConf.save({"hydra": {"overrides": {"task": task, "hydra": []}}}, sweep / "multirun.yaml")
    (sweep / "0" / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- train.resume=/r1\n- seed=0\n")
    save_step(sweep / "0", 1034, resume=saved)
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "preempted", "stopped_at_step": 1034})
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep), "subdir": "${hydra.job.num}"},
                                         "overrides": {"task": task, "hydra": []}},
                               "train": {"resume": "/r1", "steps": 20},
                               "dry_run": False, "distributed": {"mode": "none", "process_id": None}})
    callback = folder_claim.RefuseCompletedRun()
    if saved == "/r1":
        callback.on_multirun_start(config)
        callback.on_multirun_end(config)
        return
    with pytest.raises(SystemExit):
        callback.on_multirun_start(config)
    assert "continue it by its own command" in capsys.readouterr().err


def _stopped_run(folder, attempts=0):
    """A run folder as a stop during its evaluation leaves it: its record, scores and samples of two observations."""
    (folder / "checkpoints" / "8").mkdir(parents=True)
    earlier = [{"status": "preempted", "steps": 4}] * attempts
    (folder / "metrics.json").write_text(json.dumps({"status": "interrupted", "previous_attempts": earlier}))
    (folder / "error.txt").write_text("Traceback: interrupted\n")
    (folder / "c2st.csv").write_text("observation,c2st\n1,0.9\n2,0.8\n")
    (folder / "posterior.png").write_bytes(b"png")
    (folder / "sharding.txt").write_text("rule fsdp, mesh data=8 x model=1: 8 devices\n")  # placed, then stopped
    for name, k in (("posterior_samples.npz", 1), ("posterior_samples_2.npz", 2)):
        np.savez(folder / name, samples=np.zeros((4, 2)), num_observation=k)
    for rank in (0, 1):  # distributed=local's processes append to their logs
        (folder / f"process_{rank}.log").write_text("[2026-12-04 10:00:00][gensbi_sharding][ERROR] - [process "
                                                    f"{rank}/2] ConfigError: refused\nPermissionError: [Errno 13] x\n")
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_a_continued_run_sets_its_earlier_attempts_outputs_aside_under_names_of_their_own(tmp_path, caplog):
    # Was: only error.txt was renamed; the earlier attempt's c2st.csv, posterior.png and posterior_samples*.npz
    # stayed under the names this attempt writes, so a continuation with eval.enabled=false ended ok (c2st null) beside
    # them, and one scoring eval.observations=[3] beside the earlier observation 2's samples.
    from gensbi_sharding.harness.folder_lock import folder_problem
    from gensbi_sharding.harness.child_errors import refusals, stuck_errors
    from gensbi_sharding.harness.run_folder import RunFolder

    for attempts in (0, 2):
        out = tmp_path / f"run{attempts}"
        before = _stopped_run(out, attempts)
        folder = RunFolder(out, compose_tiny("train.resume=auto", output_dir=out))
        with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
            folder.claim()
        folder.release()
        n = attempts + 1  # the attempt that wrote them
        renamed = {"error.txt": f"error.attempt{n}.txt", "c2st.csv": f"c2st.attempt{n}.csv",
                   "posterior.png": f"posterior.attempt{n}.png",
                   "posterior_samples.npz": f"posterior_samples.attempt{n}.npz",
                   "posterior_samples_2.npz": f"posterior_samples_2.attempt{n}.npz",
                   "process_0.log": f"process_0.attempt{n}.log", "process_1.log": f"process_1.attempt{n}.log",
                   # was left: a continuation failing before it placed its state showed the earlier mesh and rule
                   "sharding.txt": f"sharding.attempt{n}.txt"}
        after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".run.lock"}
        assert after == {renamed.get(name, name): data for name, data in before.items()}  # nothing lost
        assert f"c2st.attempt{n}.csv" in caplog.text
        assert folder_problem(out, sweep=False) is None  # still a run's folder, never a foreign file's
        # This attempt's processes, stuck or failed with nothing logged, are not said to have logged the earlier ones'.
        assert stuck_errors(out, 2) == "" and refusals(out, [0, 1], None) == {}


def test_a_third_attempt_after_one_killed_outright_sets_the_second_attempts_outputs_aside_too(tmp_path):
    # Was: numbered by the record's count of attempts alone; an attempt killed outright (SIGKILL, out of memory) writes
    # no record, so after it the next one's record counted one attempt fewer, named copies that exist, and skipped
    # them: the second attempt's c2st.csv and process logs stayed under the names the third writes (its
    # eval.enabled=false run ended ok beside a c2st.csv sbibm.py table counts; its parent read the old logs' errors).
    from gensbi_sharding.harness.earlier_attempts import ATTEMPT_FILES
    from gensbi_sharding.harness.run_folder import RunFolder

    out = tmp_path / "run"
    before = _stopped_run(out)  # the second attempt's record: no previous_attempts, as the first left none
    for name in ("c2st.attempt1.csv", "process_0.attempt1.log", "error.attempt1.txt"):  # the first attempt's, aside
        (out / name).write_text("the attempt killed outright")
    folder = RunFolder(out, compose_tiny("train.resume=auto", output_dir=out))
    folder.claim()
    folder.release()
    assert not [p.name for p in out.iterdir() if ATTEMPT_FILES.fullmatch(p.name)]
    for name, data in before.items():
        if ATTEMPT_FILES.fullmatch(name):
            stem, suffix = name.rsplit(".", 1)
            assert (out / f"{stem}.attempt2.{suffix}").read_bytes() == data
    assert (out / "c2st.attempt1.csv").read_text() == "the attempt killed outright"


def test_a_score_kept_from_an_earlier_attempt_is_moved_back_and_other_files_are_left_alone(tmp_path):
    from gensbi_sharding.harness.earlier_attempts import set_aside, take_back, with_aside_copies

    _stopped_run(tmp_path)
    (tmp_path / "c2st.attempt1.csv").write_text("an attempt's copy is never written over")
    assert set_aside(tmp_path, {"status": "interrupted"}) == [  # past the copies there, all of them moved
        "c2st.attempt2.csv", "error.attempt2.txt", "posterior.attempt2.png", "posterior_samples.attempt2.npz",
        "posterior_samples_2.attempt2.npz", "process_0.attempt2.log", "process_1.attempt2.log", "sharding.attempt2.txt"]
    assert (tmp_path / "c2st.attempt1.csv").read_text() == "an attempt's copy is never written over"
    (tmp_path / "error.txt").write_text("a run killed outright leaves no record")
    assert set_aside(tmp_path, None) == ["error.attempt3.txt"]  # no record: one past the highest set aside
    for name in ("posterior_samples.npz", "posterior_samples_2.npz"):
        copy = tmp_path / name.replace(".npz", ".attempt2.npz")
        copy.with_name(name.replace(".npz", ".attempt1.npz")).write_bytes(copy.read_bytes())
    names = [tmp_path / "posterior_samples_2.npz", tmp_path / "posterior_samples.npz"]
    assert with_aside_copies(names) == [*names, tmp_path / "posterior_samples_2.attempt2.npz",
                                        tmp_path / "posterior_samples.attempt2.npz",
                                        tmp_path / "posterior_samples_2.attempt1.npz",
                                        tmp_path / "posterior_samples.attempt1.npz"]  # the newest attempt's first
    data = (source := tmp_path / "posterior_samples_2.attempt2.npz").read_bytes()
    assert take_back(source, tmp_path / "posterior_samples.npz") and not source.exists()
    assert (tmp_path / "posterior_samples.npz").read_bytes() == data  # moved as written
    assert not take_back(tmp_path / "posterior_samples.npz", tmp_path / "x.npz")  # a file of this attempt's: not moved


@pytest.mark.slow
def test_an_evaluation_the_weights_failed_names_the_commands_that_get_past_it_not_the_one_that_fails_again(tmp_path):
    # Was: "checkpoint .../40 was saved before it: once that is fixed, continue with: <the same command>", which samples
    # the same weights and fails again; the fix the error named, data.theta_transform=support, is refused on resume.
    import re

    from faults_helpers import under_command
    from gensbi_sharding.harness.stop_record import failure_error
    from gensbi_sharding.harness.weights_failure import SamplingError

    out = tmp_path / "run"
    (out / "checkpoints" / "40").mkdir(parents=True)
    command = ("experiment=quick", "train.steps=40", "data.theta_transform=none", f"hydra.run.dir={out}")
    outside = SamplingError("only 0.00% of 12800 posterior draws lie inside the prior's support", outside=True)
    for before in ([], [40]):  # saved by this attempt, or by the earlier one that only this attempt evaluated
        error = under_command(command, lambda cfg: failure_error(out, before, outside))
        assert "continue with" not in error and f"checkpoint {out}/checkpoints/40 holds the weights that failed" in error
        further, fresh = re.search(r"further in this folder with: (.*); or train afresh through the prior's bijection "
                                   r"in a new folder: (.*)$", error).groups()
        assert further == f"python launch.py experiment=quick data.theta_transform=none train.steps=80 " \
                          f"train.resume=auto hydra.run.dir={out}"
        assert fresh == (f"python launch.py experiment=quick train.steps=40 data.theta_transform=support "
                         f"hydra.run.dir={out}-support")
    (tmp_path / "run-support").mkdir()  # used: the next free name
    not_finite = SamplingError("50 of 50 posterior draws hold NaN or inf", outside=False)
    error = under_command(command, lambda cfg: failure_error(out, [], not_finite))
    assert error.endswith(f"would sample again: retrain in a new folder, with a lower train.learning_rate added to: "
                          f"python launch.py experiment=quick train.steps=40 data.theta_transform=none "
                          f"hydra.run.dir={out}-lower-lr")
    # From Python: the settings of cfg that do so.
    assert failure_error(out, [], outside).endswith(
        f"train them further in this folder with: run(cfg) with cfg.train.steps=80, cfg.train.resume='auto' and "
        f"cfg.output_dir={str(out)!r} set in omegaconf.open_dict(cfg); or train afresh through the prior's bijection "
        f"in a new folder: a new run(cfg) with cfg.data.theta_transform='support' and "
        f"cfg.output_dir={str(out) + '-support-2'!r}")


def test_a_sweep_whose_job_was_continued_alone_on_another_rule_names_its_unfinished_jobs(tmp_path):
    # Typed: python launch.py -m experiment=quick rule=replicated,fsdp train.checkpoint_every=500 hydra.sweep.dir=sp,
    # SIGTERM in job 0; its printed command, edited to continue on another mesh and rule (the README: resume onto
    # whatever mesh and rule you have): ... rule=tensor mesh.model_axis=2 train.resume=auto hydra.mode=RUN
    # hydra.run.dir=sp/0 (completed); then the sweep's own command with train.resume=auto, for job 1. Was: "job 0 of
    # this sweep (rule=replicated) would continue folder sp/0, which ran rule=tensor: ... rerun the sweep with its
    # values in the order it first ran" (they were), and no command for job 1, which never started.
    from gensbi_sharding.harness.resume_command import RESUMABLE
    from gensbi_sharding.harness.sweep_hints import unfinished_jobs_hint
    from gensbi_sharding.harness.sweep_rerun import moved_jobs_problem

    job = tmp_path / "0"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- rule=tensor\n- mesh.model_axis=2\n"
                                                   "- train.resume=auto\n")
    OmegaConf.save({"hydra": {"mode": "RUN"}}, job / ".hydra" / "hydra.yaml")  # a job continued alone
    (job / "metrics.json").write_text('{"status": "ok"}')
    jobs = [["experiment=quick", "rule=replicated"], ["experiment=quick", "rule=fsdp"]]
    assert moved_jobs_problem(tmp_path, jobs) is None
    assert unfinished_jobs_hint([job], RESUMABLE, jobs, sweep_dir=tmp_path) == (
        "; a sweep folder holding completed jobs is never rerun as a whole: continue its one unfinished job (never "
        "started) with: python launch.py experiment=quick rule=fsdp train.resume=auto hydra.mode=RUN "
        f"hydra.run.dir={tmp_path / '1'}")
    # Written by a sweep (its jobs' record says MULTIRUN), other values still mean another sweep's folder.
    OmegaConf.save({"hydra": {"mode": "MULTIRUN"}}, job / ".hydra" / "hydra.yaml")
    assert "which ran rule=tensor" in moved_jobs_problem(tmp_path, jobs)


def _launch_record(folder, *task):
    """``folder``'s Hydra record as a launch of ``task`` that died before its first checkpoint leaves it."""
    (folder / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(list(task)), folder / ".hydra" / "overrides.yaml")
    OmegaConf.save({"hydra": {"overrides": {"task": list(task), "hydra": []}}}, folder / ".hydra" / "hydra.yaml")
    OmegaConf.save({"train": {"steps": 3000}}, folder / ".hydra" / "config.yaml")
    (folder / "launch.log").write_text("[1/7] devices\n")
    return {p.name: p.read_bytes() for p in (folder / ".hydra").iterdir()}


def test_a_launch_into_a_folder_whose_launch_died_before_its_first_checkpoint_sets_that_record_aside(tmp_path):
    # Was: only a record of checkpoints was kept (.hydra/saved_by/, dropped once the new attempt trained); a launch
    # killed before its first save had its command record overwritten by Hydra as the next launch started. Copied
    # (Hydra writes over the record as the job starts), not moved.
    out = tmp_path / "run"
    before = _launch_record(out, "experiment=quick", "model.width=24")
    config = OmegaConf.create({"hydra": {"run": {"dir": str(out)}, "sweep": {"dir": None},
                                         "overrides": {"task": ["experiment=quick"]}},
                               "train": {"resume": None, "steps": 3000},
                               "distributed": {"mode": "none", "process_id": None}})
    callback = folder_claim.RefuseCompletedRun()
    callback.on_run_start(config)
    callback.on_run_end(config)
    assert {p.name: p.read_bytes() for p in (out / ".hydra").iterdir()} == {  # Hydra writes over the record next
        **before, **{name.replace(".yaml", ".attempt1.yaml"): data for name, data in before.items()}}
    callback.on_run_start(config)  # the same record again (a launch refused later): not copied twice
    callback.on_run_end(config)
    assert len(list((out / ".hydra").iterdir())) == 6


def test_a_sweep_sets_aside_the_records_of_jobs_killed_before_their_metrics_only_once_no_job_is_refused(
        tmp_path, monkeypatch):
    # Was: a sweep job killed before it wrote metrics.json had its record rewritten by Hydra as the rerun sweep
    # started it (only the jobs with metrics.json were looked at).
    monkeypatch.chdir(tmp_path)
    sweep, task = tmp_path / "sw", ["experiment=quick", "seed=0,1"]
    first = _launch_record(sweep / "0", "experiment=quick", "seed=0")
    OmegaConf.save({"hydra": {"overrides": {"task": task, "hydra": []}}}, sweep / "multirun.yaml")
    killed = _launch_record(sweep / "1", "experiment=quick", "seed=1")
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "ok"})  # completed: the sweep is refused
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep), "subdir": "${hydra.job.num}"},
                                         "overrides": {"task": task, "hydra": []}},
                               "train": {"resume": "auto", "steps": 20},
                               "dry_run": False, "distributed": {"mode": "none", "process_id": None}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    for job, record in (("0", first), ("1", killed)):  # refused: nothing moved
        assert {p.name: p.read_bytes() for p in (sweep / job / ".hydra").iterdir()} == record
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "preempted"})  # stopped: auto continues the sweep
    callback = folder_claim.RefuseCompletedRun()
    callback.on_multirun_start(config)
    callback.on_multirun_end(config)
    for job, record in (("0", first), ("1", killed)):  # copies: a job not reached keeps its record, which a rerun reads
        assert {p.name: p.read_bytes() for p in (sweep / job / ".hydra").iterdir()} == {
            **record, **{name.replace(".yaml", ".attempt1.yaml"): data for name, data in record.items()}}


def test_a_sweep_job_refused_its_folder_puts_back_the_record_of_the_launch_that_saved_its_checkpoints(tmp_path):
    # Was: a job killed after a checkpoint, before its metrics.json, rerun in a sweep without train.resume: its run()
    # refused the folder, leaving the record Hydra wrote for the refused command as the one that saved the checkpoints
    # (.hydra/saved_by/ and a copy of the saver's record beside it, never put back)
    from gensbi_sharding.harness.launch_record import keep_record

    job = tmp_path / "sw" / "1"
    saver = _launch_record(job, "experiment=quick", "seed=1")
    (job / "checkpoints" / "2").mkdir(parents=True)
    keep_record(job)  # as the sweep's start does for a job killed before its metrics.json
    OmegaConf.save(OmegaConf.create(["experiment=quick", "seed=1", "train.learning_rate=0.002"]),
                   job / ".hydra" / "overrides.yaml")  # Hydra's record of the rerun job
    folder = run_folder.RunFolder(job, compose_tiny(output_dir=job))
    with pytest.raises(FileExistsError, match="holds the checkpoints of a run with no record"):
        folder.claim()
    assert {p.name: p.read_bytes() for p in (job / ".hydra").iterdir()} == saver


def test_a_run_refused_its_folder_keeps_the_record_of_a_newer_checkpoint_over_an_older_ones_copy(tmp_path):
    # A copy in .hydra/saved_by/ of the record of step 2's launch, left by an attempt killed after it saved step 4:
    # refused before it copied anything, a later run drops that copy and keeps step 4's record in place (putting it
    # back would name step 2's command as the one that saved the checkpoints)
    from gensbi_sharding.harness.launch_record import keep_record

    job = tmp_path / "run"
    _launch_record(job, "experiment=quick", "seed=1")
    (job / "checkpoints" / "2").mkdir(parents=True)
    keep_record(job)  # the launch that continued step 2 ...
    OmegaConf.save(OmegaConf.create(["experiment=quick", "seed=1", "train.resume=auto"]),
                   job / ".hydra" / "overrides.yaml")
    (job / "checkpoints" / "4").mkdir()  # ... saved step 4 and was killed before it settled
    newer = {p.name: p.read_bytes() for p in (job / ".hydra").iterdir() if p.is_file()}
    with pytest.raises(FileExistsError, match="holds the checkpoints of a run with no record"):
        run_folder.RunFolder(job, compose_tiny(output_dir=job)).claim()
    assert {p.name: p.read_bytes() for p in (job / ".hydra").iterdir()} == newer


def test_a_completed_runs_train_further_command_resumes_its_newest_complete_step(tmp_path):
    # Was: "... already exists (status ok) ...; to train it further from its final checkpoint (step 5) into a new
    # folder: ... train.resume=<run> ...", step 5 read from its folder's name though it lost its Orbax step metadata:
    # pasted, that command was refused in turn, naming step 3. Now step 3 is offered, resumed by its own folder.
    from gensbi_sharding.checkpoint import find_checkpoint
    from library_helpers import steps_with_the_newest_unconfirmed

    run = tmp_path / "run"
    steps_with_the_newest_unconfirmed(run / "checkpoints")
    outputs.write_json(run / "metrics.json", {"status": "ok", "final_step": 5})
    with pytest.raises(FileExistsError) as err:
        run_folder.ensure_fresh(run, steps=5, overrides=["experiment=quick", "train.steps=5"])
    said = str(err.value).split("; to train it further ")[1]
    assert said.startswith("from its newest complete checkpoint (step 3; step 5, newer, is not complete) into a new "
                           "folder: "), said
    resume = shlex.split(said)[-2]  # the command's train.resume=..., which the run's own check accepts
    # further than the run went (5 steps): 10, as for a run whose step 5 is complete (was train.steps=5: to its end again)
    assert resume == f"train.resume={run / 'checkpoints' / '3'}" and said.endswith(f"train.steps=10 {resume} hydra.run.dir={run}-steps10")
    assert find_checkpoint(resume.split("=", 1)[1]) == run / "checkpoints" / "3"
    for step in (3, 5):  # every step lost its metadata: no command offered (it would be refused)
        (run / "checkpoints" / str(step) / "_CHECKPOINT_METADATA").unlink(missing_ok=True)
    with pytest.raises(FileExistsError) as err:
        run_folder.ensure_fresh(run, steps=5, overrides=["experiment=quick"])
    assert "train it further" not in str(err.value) and str(err.value).endswith("choose another hydra.run.dir "
                                                                                "(or hydra.sweep.dir)"), str(err.value)


@pytest.mark.parametrize("item, why", [("config", "cannot be read (JSONDecodeError: Expecting value: line 1 column 10 "
                                                  "(char 9))"),
                                       ("arrays", "cannot be read (its folder is missing)")])
def test_a_completed_runs_train_further_command_passes_over_a_damaged_step(tmp_path, item, why):
    # Was: "... already exists (status ok) ...; to train it further from its final checkpoint (step 8) into a new
    # folder: ... train.resume=<run> ...", step 8's config item unreadable (or its arrays gone): pasted, that command
    # was refused in turn ("checkpoint .../8 is damaged ..."), one extra round. Now step 4 is offered, by its folder.
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter, find_checkpoint

    run = tmp_path / "run"
    with CheckpointWriter(run / "checkpoints", config={"seed": 0}, async_save=False) as writer:
        for step in (4, 8):
            writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0), info={})
    if item == "config":  # its JSON cut off (a disk that filled up)
        for written in (run / "checkpoints" / "8" / "config").iterdir():
            written.write_text("{\"seed\": ")
    else:
        shutil.rmtree(run / "checkpoints" / "8" / item)
    outputs.write_json(run / "metrics.json", {"status": "ok", "final_step": 8})
    with pytest.raises(FileExistsError) as err:
        run_folder.ensure_fresh(run, steps=8, overrides=["experiment=quick", "train.steps=8"])
    said = str(err.value).split("; to train it further ")[1]
    assert said.startswith(f"from its newest complete checkpoint (step 4; step 8, newer, is damaged: its {item!r} "
                           f"item {why}) into a new folder: "), said
    resume = shlex.split(said)[-2]
    assert resume == f"train.resume={run / 'checkpoints' / '4'}" and said.endswith(f"{resume} hydra.run.dir={run}-steps16")
    assert find_checkpoint(resume.split("=", 1)[1]) == run / "checkpoints" / "4"


@pytest.mark.slow
def test_a_completed_runs_refusal_is_its_one_line_without_orbaxs_read_of_its_steps(tmp_path):
    # Was: 'python launch.py <a finished run's command>' printed Orbax's info line "[HYDRA] Read Metadata={'item_handlers':
    # ...} from <run>/checkpoints/8/_CHECKPOINT_METADATA" above the refusal, from the look for its newest complete step
    # (Orbax logs that read once in a process: a fresh one asks, as launch.py does).
    import subprocess
    import sys

    run = tmp_path / "run"
    save_step(run, 8)
    outputs.write_json(run / "metrics.json", {"status": "ok", "final_step": 8})
    script = ("import logging, sys; logging.basicConfig(level=logging.INFO, format='%(name)s: %(message)s')\n"
              "from gensbi_sharding.harness import run_folder\n"
              "try: run_folder.ensure_fresh(sys.argv[1], steps=8, overrides=['experiment=quick', 'train.steps=8'])\n"
              "except FileExistsError as err: print(err)\n"
              "print(logging.getLogger('absl').level)")
    done = subprocess.run([sys.executable, "-c", script, str(run)], capture_output=True, text=True, timeout=120)
    assert "to train it further from its final checkpoint (step 8) into a new folder: " in done.stdout, done.stdout
    assert done.stdout.endswith("\n0\n") and "absl: " not in done.stderr, done.stderr  # its level as it was


@pytest.mark.parametrize("damage", ["arrays folder", "largest arrays file"])
def test_a_completed_run_whose_every_step_is_damaged_is_offered_a_fresh_run_that_passes(tmp_path, damage):
    # Was: "... already exists (status ok) ...; choose another hydra.run.dir (or hydra.sweep.dir)" and no command,
    # where every step of the finished run was damaged; or, its arrays' files lost, "to train it further from its final
    # checkpoint (step 8) ...: ... train.resume=<run>", refused when pasted. Now each step is named and the command
    # that runs it again from the start into a folder not used yet, which passes the command and folder checks.
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter
    from gensbi_sharding.harness.override_types import override_problem

    run = tmp_path / "run"
    with CheckpointWriter(run / "checkpoints", config={"seed": 0}, async_save=False) as writer:
        for step in (4, 8):
            writer.save(step, {"w": jnp.arange(64.0)}, jax.random.key(0), info={})
    for step in (4, 8):
        arrays = run / "checkpoints" / str(step) / "arrays"
        if damage == "arrays folder":
            shutil.rmtree(arrays)
        else:
            max((f for f in arrays.rglob("*") if f.is_file()), key=lambda f: f.stat().st_size).unlink()
    outputs.write_json(run / "metrics.json", {"status": "ok", "final_step": 8})
    (tmp_path / "run-again").mkdir()  # used already: the next name is offered
    with pytest.raises(FileExistsError) as err:
        run_folder.ensure_fresh(run, steps=8, overrides=["experiment=quick", "train.steps=8"])
    said = str(err.value).split("; none of its checkpoints can be resumed (", 1)[1]
    assert said.startswith("step 8 is its last; step 8: its 'arrays' item cannot be read ("), said
    assert "; step 4: its 'arrays' item cannot be read (" in said, said
    command = shlex.split(said.split(": to run it again from the start into a new folder: ", 1)[1])
    assert command[2:] == ["experiment=quick", "train.steps=8", f"hydra.run.dir={tmp_path / 'run-again-2'}"], command
    assert override_problem(command[2:]) is None
    assert run_folder.ensure_fresh(tmp_path / "run-again-2", steps=8, overrides=command[2:-1]) is None


def test_a_completed_runs_train_further_command_sets_the_runs_x64_setting(tmp_path, monkeypatch):
    # Was: 'JAX_ENABLE_X64=1 launch.py experiment=quick hydra.run.dir=<run>' (<run> trained without it) offered
    # '... into a new folder: python launch.py ... train.resume=<run> ...', which pasted (the variable still set) was
    # refused: "checkpoint <run>/checkpoints/8 was trained with JAX_ENABLE_X64 off ...". Now the command says so.
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter

    run = tmp_path / "run"
    with CheckpointWriter(run / "checkpoints", config={"seed": 0}, async_save=False) as writer:
        writer.save(8, {"w": jnp.zeros(2)}, jax.random.key(0), info={})
    on = bool(jax.config.jax_enable_x64)
    for saved, prefix in ((not on, "JAX_ENABLE_X64=1 " if not on else "env -u JAX_ENABLE_X64 "), (on, "")):
        outputs.write_json(run / "metrics.json", {"status": "ok", "final_step": 8, "jax_enable_x64": saved})
        with pytest.raises(FileExistsError) as err:
            run_folder.ensure_fresh(run, steps=8, overrides=["experiment=quick", "train.steps=8"])
        said = str(err.value).split("; to train it further from its final checkpoint (step 8) into a new folder: ")[1]
        assert said.startswith(f"{prefix}python ") and said.endswith(f"train.resume={run} hydra.run.dir={run}-steps16")
