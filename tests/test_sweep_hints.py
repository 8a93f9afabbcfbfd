"""The hint a refused sweep folder prints (harness/sweep_hints.py): never to run one sweep's jobs in another's folder.

Was: ``-m experiment=quick train.steps=2,3,4 hydra.sweep.dir=<a finished sweep of rule=fsdp,fsdp_tensor>`` was
refused (good), then advised "continue its unfinished job (1 never started) one by one: python launch.py
experiment=quick train.steps=4 train.resume=auto hydra.mode=RUN hydra.run.dir=<that sweep>/2": a job of the new sweep
written into the old sweep's folder, numbered as its third job, its summary mixing both.
"""

import json

import pytest

from gensbi_sharding.harness.sweep_hints import unfinished_jobs_hint


def finished_sweep(root, jobs):
    for number, overrides in enumerate(jobs):
        (root / str(number) / ".hydra").mkdir(parents=True)
        (root / str(number) / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        (root / str(number) / "metrics.json").write_text('{"status": "ok"}')
    return [root / str(number) for number in range(len(jobs))]


@pytest.mark.parametrize("ran, job0", [
    ([["rule=fsdp", "mesh.model_axis=8"], ["rule=fsdp_tensor", "mesh.model_axis=8"]], "train.steps unset"),
    ([["train.steps=5"], ["train.steps=6"]], "train.steps=5"),
])
def test_a_folder_of_another_sweep_is_named_and_never_offered_for_this_sweeps_jobs(tmp_path, ran, job0):
    runs = finished_sweep(tmp_path, ran)
    hint = unfinished_jobs_hint(runs, ("preempted",), [["train.steps=2"], ["train.steps=3"], ["train.steps=4"]],
                                sweep_dir=tmp_path)
    assert hint == (f"; {tmp_path} holds another sweep (its job 0, {tmp_path / '0'}, ran {job0}; this sweep's job 0 "
                    "is train.steps=2): run this sweep in another hydra.sweep.dir")


def test_the_same_sweep_grown_still_gets_its_never_started_job(tmp_path):
    runs = finished_sweep(tmp_path, [["train.steps=2"], ["train.steps=3"]])
    hint = unfinished_jobs_hint(runs, ("preempted",), [["train.steps=2"], ["train.steps=3"], ["train.steps=4"]],
                                sweep_dir=tmp_path)
    assert hint.endswith(f"one unfinished job (never started) with: python launch.py train.steps=4 train.resume=auto "
                         f"hydra.mode=RUN hydra.run.dir={tmp_path / '2'}")


@pytest.mark.parametrize("typed", ['data="two_moons"', "data='two_moons'"])
def test_a_quoted_value_is_the_same_job_as_the_bare_one(tmp_path, typed):
    # Was: `-m data=two_moons,slcp train.resume=auto` after `-m 'data="two_moons",slcp'` was refused ("job 0 of this
    # sweep (data=two_moons) would continue folder .../0, which ran data="two_moons""): the same task, quoted.
    from gensbi_sharding.harness.sweep_rerun import moved_jobs_problem
    from gensbi_sharding.harness.sweep_plan import job_configuration

    finished_sweep(tmp_path, [[typed], ["data=slcp"]])
    assert job_configuration([typed]) == job_configuration(["data=two_moons"]) == {"data": "two_moons"}
    assert moved_jobs_problem(tmp_path, [["data=two_moons"], ["data=slcp"]]) is None
    assert "ran data=two_moons" in moved_jobs_problem(tmp_path, [["data=slcp"], ["data=two_moons"]])


@pytest.mark.parametrize("completed", [True, False])
def test_the_command_a_stopped_sweep_job_prints_for_the_sweep_is_accepted_as_printed(tmp_path, monkeypatch, completed):
    # Was: with job 0 completed, Ctrl-C in job 1 printed "to continue the whole sweep, this job and those not
    # started: python launch.py -m ... train.resume=auto hydra.sweep.dir=<sweep>", which, run, was refused (exit 1)
    # listing each job's own command: a sweep folder holding a completed job is never rerun as a whole.
    import shlex

    from omegaconf import OmegaConf

    from gensbi_sharding.harness import folder_claim, outputs, sweep_continue

    sweep, task = tmp_path / "swj", ["experiment=quick", "train.steps=40", "rule=replicated,fsdp,tensor"]
    sweep.mkdir()
    OmegaConf.save({"hydra": {"overrides": {"task": task, "hydra": [f"hydra.sweep.dir={sweep}"]}}},
                   sweep / "multirun.yaml")
    ran = [["experiment=quick", "train.steps=40", f"rule={rule}"] for rule in ("replicated", "fsdp")]
    ran = ran if completed else ran[:1]  # job 0 completed; or the stop came in job 0
    for number, overrides in enumerate(ran):
        (sweep / str(number) / ".hydra").mkdir(parents=True)
        (sweep / str(number) / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        (sweep / str(number) / "checkpoints" / "20").mkdir(parents=True)
    if completed:
        outputs.write_json(sweep / "0" / "metrics.json", {"status": "ok", "final_step": 40})
    stopped = sweep / str(len(ran) - 1)
    monkeypatch.setattr(sweep_continue, "hydra_job_overrides", lambda: (ran[-1], True))
    hint = sweep_continue.whole_sweep_hint(stopped, ["/repo/launch.py", "-m", *task])
    outputs.write_json(stopped / "metrics.json", {"status": "interrupted", "stopped_at_step": 20, "final_step": 20})
    commands = [shlex.split(c) for c in hint.split(": python launch.py ", 1)[1].split(" ; ")]
    for args in commands:  # each as launch.py's Hydra callback sees it: accepted, not refused
        multirun = args[0] == "-m"
        args = args[1:] if multirun else args
        dirs = dict(a.split("=", 1) for a in args if a.startswith(("hydra.sweep.dir=", "hydra.run.dir=")))
        config = OmegaConf.create({"hydra": {"sweep": {"dir": dirs.get("hydra.sweep.dir")},
                                             "run": {"dir": dirs.get("hydra.run.dir")},
                                             "overrides": {"task": [a for a in args if not a.startswith("hydra.")]}},
                                   "train": {"resume": "auto", "steps": 40},
                                   "distributed": {"mode": "none", "process_id": None}})
        callback = folder_claim.RefuseCompletedRun()
        (callback.on_multirun_start if multirun else callback.on_run_start)(config)  # SystemExit(1) when refused
        (callback.on_multirun_end if multirun else callback.on_run_end)(config)
    assert len(commands) == (2 if completed else 1), hint
    if completed:  # this job first, then the one never started, each in the folder Hydra gave it
        assert commands[0][-1] == f"hydra.run.dir={sweep / '1'}" and "rule=fsdp" in commands[0]
        assert commands[1][-1] == f"hydra.run.dir={sweep / '2'}" and "rule=tensor" in commands[1]
    else:
        assert commands[0][-1] == f"hydra.sweep.dir={sweep}" and "rule=replicated,fsdp,tensor" in commands[0]


def test_a_sweep_stopped_in_its_last_unfinished_job_prints_its_command_once(tmp_path, monkeypatch):
    # Was, after "[ERROR] interrupted ...; continue with: <command>": "to continue the rest of the sweep, ...:
    # continue its unfinished job one by one: <the same command>", the line above repeated as a list of one.
    from omegaconf import OmegaConf

    from gensbi_sharding.harness import outputs, sweep_continue
    from gensbi_sharding.harness.resume_command import RESUMABLE

    task = ["experiment=quick", "rule=replicated,fsdp"]
    OmegaConf.save({"hydra": {"overrides": {"task": task, "hydra": [f"hydra.sweep.dir={tmp_path}"]}}},
                   tmp_path / "multirun.yaml")
    runs = finished_sweep(tmp_path, [["experiment=quick", "rule=replicated"], ["experiment=quick", "rule=fsdp"]])
    (runs[1] / "metrics.json").unlink()  # job 1 stopped just now: its record is not written yet
    monkeypatch.setattr(sweep_continue, "hydra_job_overrides", lambda: (["experiment=quick", "rule=fsdp"], True))
    hint = sweep_continue.whole_sweep_hint(runs[1], ["/repo/launch.py", "-m", *task])
    assert hint == ("to continue the rest of the sweep, the command above is enough: this job is the sweep's one "
                    "unfinished job (a sweep folder holding completed jobs is never rerun as a whole)")
    # The refused sweep folder names no command above: the one command, worded for one.
    outputs.write_json(runs[1] / "metrics.json", {"status": "interrupted"})
    refused = unfinished_jobs_hint(runs, RESUMABLE, [task[:1] + ["rule=replicated"], task[:1] + ["rule=fsdp"]],
                                   sweep_dir=tmp_path)
    assert refused == ("; a sweep folder holding completed jobs is never rerun as a whole: continue its one "
                       "unfinished job with: python launch.py experiment=quick rule=fsdp train.resume=auto "
                       f"hydra.mode=RUN hydra.run.dir={runs[1]}")


@pytest.mark.parametrize("error, note", [
    ("ValueError: eval.num_samples=20000 exceeds the 10000 reference posterior samples of task 'two_moons' "
     "(observation 1) that C2ST compares them with, row for row; set eval.num_samples=10000",
     " (its error names eval.num_samples=20000: change it in that command first)"),
    ("RuntimeError: the device went away", ""),  # nothing of its own to change: continued as it ran
    # Was: " (its error names experiment=quick, eval.num_samples=20000: change them in that command first)", for
    # the command each record names to continue it, which repeats every override: nothing there to change.
    ("interrupted by Ctrl-C (SIGINT) at step 110; checkpoint /x/1/checkpoints/110; continue with: python launch.py "
     "experiment=quick eval.num_samples=20000 train.resume=auto hydra.mode=RUN hydra.run.dir=/x/1", ""),
    ("OSError: [Errno 28] No space left on device; checkpoint /x/1/checkpoints/8 was saved before it: once that is "
     "fixed, continue with: python launch.py experiment=quick eval.num_samples=20000 train.resume=auto", ""),
    # Round 49: its weights failed its evaluation; its command, as it ran, samples them again (was: "its error names
    # eval.num_samples=20000: change it", read from the commands its error names to get past it).
    ("SamplingError: only 0.00% of 12800 posterior draws lie inside the prior's support (fewer than 1%): train longer, "
     "or set data.theta_transform=support; checkpoint /x/1/checkpoints/20 holds the weights that failed, which the same "
     "command would sample again: train them further in this folder with: python launch.py experiment=quick "
     "eval.num_samples=20000 train.steps=40 train.resume=auto hydra.mode=RUN hydra.run.dir=/x/1",
     " (its weights failed its evaluation, and would again: its metrics.json's error names the commands that get past "
     "it)"),
])
def test_a_job_that_failed_naming_one_of_its_overrides_is_not_offered_as_it_ran(tmp_path, error, note):
    # Was, after `-m experiment=quick eval.num_samples=128,20000` (job 1 refused 20000) typed again with 128,10000:
    # "continue its one unfinished job with: python launch.py experiment=quick eval.num_samples=20000 ...", which
    # failed it alike.

    runs = finished_sweep(tmp_path, [["experiment=quick", "eval.num_samples=128"],
                                     ["experiment=quick", "eval.num_samples=20000"]])
    (runs[1] / "metrics.json").write_text(json.dumps({"status": "error", "error": error}))
    hint = unfinished_jobs_hint(runs, ("preempted", "interrupted", "error"),  # typed again as it ran
                                [["experiment=quick", "eval.num_samples=128"], ["experiment=quick", "eval.num_samples=20000"]],
                                sweep_dir=tmp_path)
    assert hint == ("; a sweep folder holding completed jobs is never rerun as a whole: continue its one unfinished job "
                    "with: python launch.py experiment=quick eval.num_samples=20000 train.resume=auto hydra.mode=RUN "
                    f"hydra.run.dir={tmp_path / '1'}{note}")
    # Typed again with 128,10000 (was: offered with 20000, as it ran): where its error named eval.num_samples, folder 1
    # continues with this sweep's 10000; else it is named, and why, never offered with another value than this sweep's.
    hint = unfinished_jobs_hint(runs, ("preempted", "interrupted", "error"),
                                [["experiment=quick", "eval.num_samples=128"], ["experiment=quick", "eval.num_samples=10000"]],
                                sweep_dir=tmp_path)
    assert hint == ("; a sweep folder holding completed jobs is never rerun as a whole: continue its one unfinished job "
                    "with: python launch.py experiment=quick eval.num_samples=10000 train.resume=auto hydra.mode=RUN "
                    f"hydra.run.dir={tmp_path / '1'} (its error names eval.num_samples=20000: this sweep's "
                    "eval.num_samples=10000 in its place)" if "its error names" in note else
                    f"; folder {tmp_path / '1'} ran eval.num_samples=20000 where this sweep's job 1 is "
                    "eval.num_samples=10000, and its error does not name eval.num_samples (a job folder takes this "
                    "sweep's value only where its error named the key that changed): run this sweep in another "
                    "hydra.sweep.dir")


def test_a_job_whose_record_is_damaged_is_continued_without_reading_it(tmp_path):
    # Was: yaml's ScannerError out of the refusal of the sweep folder (and out of the summary of every later job).
    from gensbi_sharding.harness.sweep_rows import summary_rows

    runs = finished_sweep(tmp_path, [["train.steps=2"], ["train.steps=3"]])
    (runs[1] / ".hydra" / "overrides.yaml").write_text("- train.steps=3\n\t- x\n")
    (runs[1] / ".hydra" / "hydra.yaml").write_text("hydra: [\n")
    (runs[1] / "metrics.json").write_text('{"status": "preempted"}')
    hint = unfinished_jobs_hint(runs, ("preempted",), [["train.steps=2"], ["train.steps=3"]], sweep_dir=tmp_path)
    assert hint == ("; a sweep folder holding completed jobs is never rerun as a whole: continue its one unfinished job "
                    f"with: python launch.py '<its overrides>' train.resume=auto hydra.mode=RUN hydra.run.dir={runs[1]}")
    rows = summary_rows(tmp_path)  # the sweep's table reads the damaged record as none, the other as typed
    assert [(row["job"], row["overrides"], row["choices"]) for row in rows] == [
        ("0", {"train.steps": "2"}, {}), ("1", {}, {})]


def test_the_unfinished_jobs_script_the_disk_refuses_leaves_the_commands_inline(tmp_path, monkeypatch):
    # Round 43: a sweep folder full (or read-only) when its refusal wrote continue_unfinished.sh for its 5 unfinished
    # jobs: the OSError replaced the refusal, and no command to continue them was said.
    import errno
    import os

    from gensbi_sharding.harness import outputs

    def full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    runs = finished_sweep(tmp_path, [[f"train.steps={n}"] for n in range(2, 8)])
    for run in runs[1:]:  # job 0 completed, the 5 others preempted
        (run / "metrics.json").write_text('{"status": "preempted"}')
    monkeypatch.setattr(outputs, "write_atomic", full)
    hint = unfinished_jobs_hint(runs, ("preempted",), [[f"train.steps={n}"] for n in range(2, 8)], sweep_dir=tmp_path)
    commands = [f"python launch.py train.steps={n} train.resume=auto hydra.mode=RUN hydra.run.dir={tmp_path / str(n - 2)}"
                for n in range(3, 8)]
    assert hint.endswith("continue its unfinished jobs one by one: " + " ; ".join(commands)), hint
    assert not (tmp_path / "continue_unfinished.sh").exists()


def test_a_job_stopped_with_checkpoints_and_no_record_is_not_said_never_started(tmp_path):
    # Was: "continue its unfinished jobs (2 never started) one by one" for a sweep of seed=0,1,2 rerun after job 0
    # completed and job 1 was killed (checkpoints, no metrics.json): job 1 had trained, as its command continues it.
    runs = finished_sweep(tmp_path, [["seed=0"]])
    (tmp_path / "1" / "checkpoints" / "8").mkdir(parents=True)
    jobs = [["seed=0"], ["seed=1"], ["seed=2"]]
    hint = unfinished_jobs_hint(runs, ("preempted",), jobs, sweep_dir=tmp_path)
    assert hint.startswith("; a sweep folder holding completed jobs is never rerun as a whole: continue its unfinished "
                           "jobs (1 never started, 1 stopped without a record) one by one: python launch.py seed=1 "
                           "train.resume=auto "), hint
    (tmp_path / "2" / "checkpoints").mkdir(parents=True)  # both stopped so
    assert "unfinished jobs (2 stopped without a record) one by one" in unfinished_jobs_hint(
        runs, ("preempted",), jobs, sweep_dir=tmp_path)
    hint = unfinished_jobs_hint(runs, ("preempted",), jobs[:2], sweep_dir=tmp_path)  # one left
    assert "continue its one unfinished job (stopped without a record) with: python launch.py seed=1" in hint, hint


def test_another_sweep_of_as_many_jobs_is_named_too(tmp_path):
    # Was: only a sweep with a job lacking a folder there was told the folder holds another sweep; one of as many
    # jobs or fewer was offered the other sweep's unfinished job to continue.
    runs = finished_sweep(tmp_path, [["train.learning_rate=0.003"], ["train.learning_rate=0.001"]])
    (runs[1] / "metrics.json").write_text('{"status": "preempted"}')
    hint = unfinished_jobs_hint(runs, ("preempted",), [["rule=fsdp"], ["rule=tensor"]], sweep_dir=tmp_path)
    assert hint == (f"; {tmp_path} holds another sweep (its job 0, {tmp_path / '0'}, ran rule unset; this sweep's job 0 "
                    "is rule=fsdp): run this sweep in another hydra.sweep.dir")


def test_a_folder_that_ran_other_values_than_this_sweeps_job_of_its_number_is_never_offered(tmp_path):
    # Was: -m train.learning_rate=0.003,0.002,0.001 into the folder of -m train.learning_rate=0.003,1e30,0.001 (jobs 1
    # and 2 preempted) offered "python launch.py train.learning_rate=1e+30 ... hydra.run.dir=<dir>/1" beside job 2's
    # command: folder 1 ran 1e30, this sweep's job 1 is 0.002, and no error of its own names the learning rate (its
    # checkpoints are of 1e30). Job 0 matches, so it is no other sweep.
    runs = finished_sweep(tmp_path, [[f"train.learning_rate={r}"] for r in ("0.003", "1e+30", "0.001")])
    for run in runs[1:]:
        (run / "metrics.json").write_text('{"status": "preempted"}')
    jobs = [[f"train.learning_rate={r}"] for r in ("0.003", "0.002", "0.001")]
    moved = (f"; folder {runs[1]} ran train.learning_rate=1e+30 where this sweep's job 1 is train.learning_rate=0.002, "
             "and it ended preempted, no error naming train.learning_rate (a job folder takes this sweep's value only "
             "where its error named the key that changed): run this sweep in another hydra.sweep.dir")
    hint = unfinished_jobs_hint(runs, ("preempted",), jobs, sweep_dir=tmp_path)
    assert hint == (f"{moved}; a sweep folder holding completed jobs is never rerun as a whole: continue its one "
                    "unfinished job with: python launch.py train.learning_rate=0.001 train.resume=auto hydra.mode=RUN "
                    f"hydra.run.dir={runs[2]}")
    assert unfinished_jobs_hint(runs[:2], ("preempted",), jobs[:2], sweep_dir=tmp_path) == moved  # the one left


def test_a_sweep_over_folders_that_failed_on_the_value_it_changes_continues_them_with_its_values(tmp_path):
    # -m train.learning_rate=1e30,1e31 (both diverged) typed again as -m train.learning_rate=0.003,0.002
    # train.resume=auto: each folder failed naming train.learning_rate, so each is this sweep's job, its value
    # corrected (was: "job 0 of this sweep (train.learning_rate=0.003) would continue folder .../0, which ran
    # train.learning_rate=1e+30 ...: rerun the sweep with its values in the order it first ran", the values that failed).

    from gensbi_sharding.harness.sweep_plan import another_sweep
    from gensbi_sharding.harness.sweep_rerun import moved_jobs_problem

    runs = finished_sweep(tmp_path, [["train.learning_rate=1e+30"], ["train.learning_rate=1e+31"]])
    for run, rate in zip(runs, ("1e+30", "1e+31")):
        (run / "metrics.json").write_text(json.dumps({"status": "error", "error": "FloatingPointError: training "
                                                      f"diverged: ... (this run: train.learning_rate={rate}; ...)"}))
    jobs = [["train.learning_rate=0.003"], ["train.learning_rate=0.002"]]
    assert moved_jobs_problem(tmp_path, jobs) is None and another_sweep(tmp_path, jobs) is None
    (runs[1] / "metrics.json").write_text('{"status": "preempted"}')  # one that did not fail on it: still refused
    assert "job 1 of this sweep (train.learning_rate=0.002) would continue folder" in moved_jobs_problem(tmp_path, jobs)


@pytest.mark.parametrize("error", [
    "FileNotFoundError: /runs/train.learning_rate=1e+30/data.npz is missing",  # the key inside a path
    "ValueError: my-train.learning_rate=1e+30 is refused",  # inside a longer name
])
def test_a_folder_whose_error_names_the_changed_key_only_inside_a_path_or_word_is_not_offered(tmp_path, error):
    # Was: offered "python launch.py train.learning_rate=0.002 ... hydra.run.dir=<dir>/1 (its error names
    # train.learning_rate=1e+30 ...)": the error named a folder, not the value that failed the job.
    runs = finished_sweep(tmp_path, [[f"train.learning_rate={r}"] for r in ("0.003", "1e+30")])
    (runs[1] / "metrics.json").write_text(json.dumps({"status": "error", "error": error}))
    hint = unfinished_jobs_hint(runs, ("error",), [[f"train.learning_rate={r}"] for r in ("0.003", "0.002")],
                                sweep_dir=tmp_path)
    assert hint == (f"; folder {runs[1]} ran train.learning_rate=1e+30 where this sweep's job 1 is "
                    "train.learning_rate=0.002, and its error does not name train.learning_rate (a job folder takes "
                    "this sweep's value only where its error named the key that changed): run this sweep in another "
                    "hydra.sweep.dir")


def test_a_folder_whose_error_names_one_of_two_changed_keys_is_said_to_miss_the_other(tmp_path):
    # Was: "its error does not name train.learning_rate train.seed", where it names train.learning_rate=1e+30.
    runs = finished_sweep(tmp_path, [["train.learning_rate=0.003", "train.seed=1"],
                                     ["train.learning_rate=1e+30", "train.seed=2"]])
    (runs[1] / "metrics.json").write_text(json.dumps({"status": "error", "error": (
        "FloatingPointError: training diverged (this run: train.learning_rate=1e+30)")}))
    hint = unfinished_jobs_hint(runs, ("error",), [["train.learning_rate=0.003", "train.seed=1"],
                                                   ["train.learning_rate=0.002", "train.seed=3"]], sweep_dir=tmp_path)
    assert hint == (f"; folder {runs[1]} ran train.learning_rate=1e+30 train.seed=2 where this sweep's job 1 is "
                    "train.learning_rate=0.002 train.seed=3, and its error does not name train.seed (a job folder "
                    "takes this sweep's value only where its error named the key that changed): run this sweep in "
                    "another hydra.sweep.dir")


def test_a_folder_continued_alone_with_a_corrected_value_is_not_the_original_sweeps_complete_job(tmp_path):
    # -m train.learning_rate=0.003,1e30 (job 1 diverged), folder 1 continued as advised with 0.002 (hydra.mode=RUN),
    # then the first sweep typed again into its folder: was "2 of its 2 jobs complete (0, 1)", 0.002's run counted as
    # 1e+30's result. Now folder 1 is named with the value it holds; the corrected sweep still counts it.
    from gensbi_sharding.harness.console_lines import completed_jobs_lead
    from gensbi_sharding.harness.sweep_retyped import moved_folders

    runs = finished_sweep(tmp_path, [["train.learning_rate=0.003"], ["train.learning_rate=0.002", "train.resume=auto"]])
    (runs[1] / ".hydra" / "hydra.yaml").write_text("hydra:\n  mode: RUN\n")
    original = [["train.learning_rate=0.003"], ["train.learning_rate=1e+30"]]
    moved = moved_folders(tmp_path, original)
    assert moved == {"1": f"folder {runs[1]} holds a completed run of train.learning_rate=0.002, continued alone, "
                          "where this sweep's job 1 is train.learning_rate=1e+30: its result is that value's, kept "
                          "there, not counted as this job's; run this sweep in another hydra.sweep.dir"}
    lead = completed_jobs_lead(tmp_path, [r for r in runs if r.name not in moved], jobs=2)
    assert lead == f"hydra.sweep.dir={tmp_path}: 1 of its 2 jobs complete (0); "
    corrected = [["train.learning_rate=0.003"], ["train.learning_rate=0.002"]]
    assert moved_folders(tmp_path, corrected) == {}  # the sweep of the value it ran: its job, complete
    (runs[1] / "metrics.json").write_text('{"status": "preempted"}')  # not complete: named all the same (below)
    assert list(moved_folders(tmp_path, original)) == ["1"]


def test_a_folder_continued_alone_with_a_corrected_value_and_preempted_is_named_not_offered_as_the_original_job(
        tmp_path):
    # -m train.learning_rate=0.003,1e30 (job 1 diverged), folder 1 continued alone with 0.002 (hydra.mode=RUN) and
    # preempted, then the first sweep typed again into its folder: was offered as job 1's unfinished command with
    # 0.002 (the value it ran, not this job's 1e+30). Now named with the value it holds, never offered.
    from gensbi_sharding.harness.sweep_retyped import moved_folders

    runs = finished_sweep(tmp_path, [["train.learning_rate=0.003"], ["train.learning_rate=0.002", "train.resume=auto"]])
    (runs[1] / ".hydra" / "hydra.yaml").write_text("hydra:\n  mode: RUN\n")
    (runs[1] / "metrics.json").write_text('{"status": "preempted"}')
    original = [["train.learning_rate=0.003"], ["train.learning_rate=1e+30"]]
    named = (f"folder {runs[1]} ran train.learning_rate=0.002 where this sweep's job 1 is train.learning_rate=1e+30, "
             "and it ended preempted, no error naming train.learning_rate (a job folder takes this sweep's value only "
             "where its error named the key that changed): run this sweep in another hydra.sweep.dir")
    assert moved_folders(tmp_path, original) == {"1": named}
    assert unfinished_jobs_hint(runs, ("preempted",), original, sweep_dir=tmp_path) == f"; {named}"
    corrected = [["train.learning_rate=0.003"], ["train.learning_rate=0.002"]]  # its own sweep: offered, as it ran
    assert moved_folders(tmp_path, corrected) == {}
    assert unfinished_jobs_hint(runs, ("preempted",), corrected, sweep_dir=tmp_path).endswith(
        "train.learning_rate=0.002 train.resume=auto hydra.mode=RUN hydra.run.dir=" + str(runs[1]))


def test_a_folder_that_ran_another_value_of_a_key_the_sweep_does_not_vary_is_not_its_complete_job(tmp_path):
    # -m train.learning_rate=0.003,0.001 train.steps=50, then the same typed again with train.steps=100 into its
    # folder: was "2 of its 2 jobs complete (0, 1)" (only the swept keys compared), the 50-step results counted as the
    # 100-step jobs'. Now each folder is named with what its own overrides say it ran.
    from gensbi_sharding.harness.sweep_retyped import moved_folders

    ran = [["train.learning_rate=0.003", "train.steps=50"], ["train.learning_rate=0.001", "train.steps=50"]]
    runs = finished_sweep(tmp_path, ran)
    longer = [[job[0], "train.steps=100"] for job in ran]
    assert moved_folders(tmp_path, longer) == {str(n): (
        f"folder {runs[n]} ran train.steps=50 where this sweep's job {n} is train.steps=100, and it completed (a job "
        "folder takes this sweep's value only where its error named the key that changed): run this sweep in another "
        "hydra.sweep.dir") for n in (0, 1)}
    assert moved_folders(tmp_path, ran) == {}  # its own sweep: its jobs, complete
    assert moved_folders(tmp_path, [["train.learning_rate=0.003", 'train.steps="50"'], ran[1]]) == {}  # one value


def test_a_key_the_sweep_sets_and_the_folder_did_not_type_is_compared_with_what_the_folder_ran(tmp_path):
    # -m seed=0,1 (the default rule, replicated; train.steps 50 from a preset), then -m seed=0,1 rule=tensor typed
    # into its folder: was "2 of its 2 jobs complete" (a key set on one side only was not compared), replicated's
    # results counted as tensor's. Now what each folder ran (its .hydra/config.yaml, composed) is compared.
    from gensbi_sharding.harness.sweep_retyped import moved_folders

    runs = finished_sweep(tmp_path, [["seed=0"], ["seed=1"]])
    for n, run in enumerate(runs):
        (run / ".hydra" / "hydra.yaml").write_text("hydra:\n  mode: MULTIRUN\n  runtime:\n    choices:\n"
                                                   "      rule: replicated\n")
        (run / ".hydra" / "config.yaml").write_text(f"seed: {n}\nrule:\n  name: replicated\n  embed: null\n"
                                                    "train:\n  steps: 50\n  learning_rate: 0.003\n")
    ran = [["seed=0"], ["seed=1"]]
    for typed, was in (("rule=tensor", "rule=replicated"), ("train.steps=100", "train.steps=50"),
                       ("train.learning_rate=0.001", "train.learning_rate=0.003")):
        assert moved_folders(tmp_path, [[*job, typed] for job in ran]) == {str(n): (
            f"folder {runs[n]} ran {was} where this sweep's job {n} is {typed}, and it completed (a job folder takes "
            "this sweep's value only where its error named the key that changed): run this sweep in another "
            "hydra.sweep.dir") for n in (0, 1)}
    for typed in ("rule=replicated", "train.steps=50", "train.learning_rate=3e-3"):  # what it ran: its jobs
        assert moved_folders(tmp_path, [[*job, typed] for job in ran]) == {}, typed
    assert list(moved_folders(tmp_path, [["rule=tensor"], ["rule=replicated"]])) == ["0"]  # swept: ran replicated


def test_a_completed_folder_without_a_record_of_its_values_is_not_counted_as_this_sweeps_job(tmp_path):
    # Was: a job folder with no .hydra/overrides.yaml (removed, or written by hydra.output_subdir=null) matched any
    # job: its result counted as this sweep's job's, whatever values it ran.
    from gensbi_sharding.harness.sweep_retyped import moved_folders

    runs = finished_sweep(tmp_path, [["train.learning_rate=0.003"], ["train.learning_rate=0.001"]])
    (runs[1] / ".hydra" / "overrides.yaml").unlink()
    assert moved_folders(tmp_path, [["train.learning_rate=0.003"], ["train.learning_rate=0.005"]]) == {"1": (
        f"folder {runs[1]} holds a completed run with no record of its values (no readable .hydra/overrides.yaml): "
        "not counted as this sweep's job 1; run this sweep in another hydra.sweep.dir")}
    (runs[1] / "metrics.json").write_text('{"status": "preempted"}')  # unfinished: left to the hint, as before
    assert moved_folders(tmp_path, [["train.learning_rate=0.003"], ["train.learning_rate=0.005"]]) == {}


def test_a_string_value_a_folder_ran_is_named_with_its_quotes_not_as_the_number_it_spells(tmp_path):
    # Was: "folder 1 ran train.learning_rate=1e30 where this sweep's job 1 is train.learning_rate=1e+30": the string
    # '1e30' it ran read as the float, the two values as one spelt twice.
    from gensbi_sharding.harness.sweep_retyped import moved_folders

    runs = finished_sweep(tmp_path, [["train.learning_rate=0.003"], ["train.learning_rate='1e30'"]])
    moved = moved_folders(tmp_path, [["train.learning_rate=0.003"], ["train.learning_rate=1e30"]])
    assert moved == {"1": f"folder {runs[1]} ran train.learning_rate='1e30' where this sweep's job 1 is "
                          "train.learning_rate=1e+30, and it completed (a job folder takes this sweep's value only "
                          "where its error named the key that changed): run this sweep in another hydra.sweep.dir"}


@pytest.mark.slow
def test_the_unfinished_jobs_script_runs_from_any_folder_and_stops_at_ctrl_c(tmp_path, monkeypatch):
    # A new user's report: `bash <sweep>/continue_unfinished.sh`, as the refusal prints it (an absolute path), run
    # from another folder gave "python: can't open file '/tmp/launch.py'" once per job (its commands ran where it was
    # typed); and Ctrl-C during its first job stopped that job (exit 130, as the job handles it) and bash started the
    # next. Now it moves to the folder its commands were printed for, and Ctrl-C stops it after the job under way.
    import os
    import signal
    import subprocess
    import sys

    from gensbi_sharding.harness import paste_command

    checkout, elsewhere, bin_dir = tmp_path / "checkout", tmp_path / "elsewhere", tmp_path / "bin"
    for folder in (checkout, elsewhere, bin_dir):
        folder.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    # A stand-in launch.py: records each call; the second is stopped by Ctrl-C (to the script's process group),
    # which it handles as launch.py does: it exits 130
    (checkout / "launch.py").write_text(
        "import os, signal, sys\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "with open('calls', 'a') as f:\n    f.write(' '.join(sys.argv[1:]) + '\\n')\n"
        "if len(open('calls').read().splitlines()) == 2:\n    os.killpg(os.getpgrp(), signal.SIGINT)\n    sys.exit(130)\n")
    monkeypatch.setattr(paste_command, "CHECKOUT", checkout)
    monkeypatch.chdir(checkout)
    sweep = tmp_path / "sweep"
    runs = finished_sweep(sweep, [[f"train.steps={n}"] for n in range(2, 8)])
    for run in runs[1:]:  # job 0 completed, the 5 others preempted
        (run / "metrics.json").write_text('{"status": "preempted"}')
    hint = unfinished_jobs_hint(runs, ("preempted",), [[f"train.steps={n}"] for n in range(2, 8)], sweep_dir=sweep)
    script = sweep / "continue_unfinished.sh"
    assert f"bash {script} (5 commands" in hint, hint
    # SIGINT as a terminal delivers it: a suite started in the background (`make test &`, a CI runner) has it ignored,
    # which bash inherits and then cannot trap (POSIX), so the script would run on through every job
    done = subprocess.run(["bash", str(script)], cwd=elsewhere, start_new_session=True, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    calls = (checkout / "calls").read_text().splitlines() if (checkout / "calls").exists() else []
    assert calls == [f"train.steps={n} train.resume=auto hydra.mode=RUN hydra.run.dir={sweep / str(n - 2)}"
                     for n in (3, 4)], done.stderr
    assert done.returncode == 130, (done.returncode, done.stderr)


@pytest.mark.slow
def test_the_unfinished_jobs_script_runs_the_python_that_ran_the_sweep(tmp_path, monkeypatch):
    # Round 60: `bash <sweep>/continue_unfinished.sh` ran each job with a bare `python`: without the venv activated,
    # the system's (No module named 'jax'). Its lines now start with the sweep's interpreter; the printed line, as typed.
    import os
    import shlex
    import subprocess
    import sys

    from gensbi_sharding.harness import paste_command

    checkout, bin_dir = tmp_path / "checkout", tmp_path / "bin"
    checkout.mkdir(), bin_dir.mkdir()
    (bin_dir / "python").write_text("#!/bin/sh\necho \"the system's python\" >> calls\nexit 1\n")  # no jax there
    (bin_dir / "python").chmod(0o755)
    (checkout / "launch.py").write_text("import sys\nwith open('calls', 'a') as f:\n    f.write(sys.executable + '\\n')\n")
    monkeypatch.setattr(paste_command, "CHECKOUT", checkout)
    monkeypatch.chdir(checkout)
    runs = finished_sweep(tmp_path / "sweep", [[f"train.steps={n}"] for n in range(2, 7)])
    for run in runs[1:]:
        (run / "metrics.json").write_text('{"status": "preempted"}')
    hint = unfinished_jobs_hint(runs, ("preempted",), [[f"train.steps={n}"] for n in range(2, 7)],
                                sweep_dir=tmp_path / "sweep")
    assert "(4 commands, one per line; the first: python launch.py train.steps=3 " in hint, hint
    script = (tmp_path / "sweep" / "continue_unfinished.sh").read_text()
    assert f"each run by {shlex.quote(sys.executable)}, the Python that ran the sweep" in script, script
    done = subprocess.run(["bash", str(tmp_path / "sweep" / "continue_unfinished.sh")], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert (done.returncode, (checkout / "calls").read_text().splitlines()) == (0, [sys.executable] * 4), done.stderr


@pytest.mark.slow
def test_the_unfinished_jobs_script_of_jobs_of_the_other_x64_setting_runs_each_under_it(tmp_path, monkeypatch):
    # Was: the script's lines swapped the first six characters of each command for the sweep's Python, so a command
    # led by the runs' JAX_ENABLE_X64 ('env -u JAX_ENABLE_X64 python launch.py ...', since ca7e7da) became
    # '<python> JAX_ENABLE_X64 python launch.py ...' (no such file: no job ran) and 'JAX_ENABLE_X64=1 python ...'
    # became '<python>_ENABLE_X64=1 python ...' (no such command). Now the prefix stays and the Python follows it.
    import json
    import os
    import subprocess
    import sys

    import jax

    from gensbi_sharding.harness import paste_command

    on = bool(jax.config.jax_enable_x64)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "launch.py").write_text("import os, sys\nwith open('calls', 'a') as f:\n"
                                        "    f.write(os.environ.get('JAX_ENABLE_X64', '-') + ' ' + sys.argv[1] + '\\n')\n")
    monkeypatch.setattr(paste_command, "CHECKOUT", checkout)
    monkeypatch.chdir(checkout)
    sweep = tmp_path / "sweep"
    runs = finished_sweep(sweep, [[f"train.steps={n}"] for n in range(2, 8)])
    for run in runs[1:]:  # job 0 completed, the 5 others preempted at step 1 under the other setting
        (run / "checkpoints" / "1").mkdir(parents=True)
        (run / "metrics.json").write_text(json.dumps({"status": "preempted", "final_step": 1,
                                                      "jax_enable_x64": not on}))
    hint = unfinished_jobs_hint(runs, ("preempted",), [[f"train.steps={n}"] for n in range(2, 8)], sweep_dir=sweep)
    lead = "env -u JAX_ENABLE_X64 " if on else "JAX_ENABLE_X64=1 "
    assert f"(5 commands, one per line; the first: {lead}python launch.py train.steps=3 " in hint, hint
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    done = subprocess.run(["bash", str(sweep / "continue_unfinished.sh")], capture_output=True, text=True, timeout=60,
                          env={**env, **({"JAX_ENABLE_X64": "1"} if on else {})})
    assert done.returncode == 0, done.stderr
    assert (checkout / "calls").read_text().splitlines() == [f"{'-' if on else '1'} train.steps={n}"
                                                             for n in range(3, 8)], sys.executable
