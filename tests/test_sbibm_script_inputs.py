"""benchmarks/sbibm.py's ``run`` and ``table`` on the folders users give them: jobs of other settings, unfinished or
damaged jobs, an observation scored twice, a job another runner is writing.
"""

import json

import pytest


def sbibm_main():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "sbibm_script", Path(__file__).resolve().parents[1] / "benchmarks" / "sbibm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.mark.parametrize("argv, needle", [
    # A mistyped folder read as "no c2st.csv ...: run the benchmark first".
    (["table", "{tmp}/nope"], "{tmp}/nope does not exist"),
    # A file where a folder goes: FileExistsError's traceback (--out) or "no c2st.csv" (a job's file).
    (["table", "{tmp}/job", "--out", "{tmp}/job/metrics.json"], "--out {tmp}/job/metrics.json is a file"),
    (["table", "{tmp}/job/metrics.json"], "{tmp}/job/metrics.json is a file, not a folder"),
    (["run", "--root", "{tmp}/job/metrics.json", "--tasks", "two_moons", "--budgets", "1000"],
     "--root {tmp}/job/metrics.json is a file"),
])
def test_sbibm_script_names_a_folder_that_is_not_one(tmp_path, argv, needle):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "metrics.json").write_text("{}")
    with pytest.raises(SystemExit) as stop:
        sbibm_main()([a.format(tmp=tmp_path) for a in argv])
    assert needle.format(tmp=tmp_path) in str(stop.value), str(stop.value)
    assert (tmp_path / "job" / "metrics.json").read_text() == "{}"  # nothing overwritten
    assert not (tmp_path / "job.failed").exists()


def fake_sbibm_job(folder, task, budget, observations, status="ok"):
    """A job folder as launch.py leaves it: its config, metrics.json's status and c2st.csv."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text(f"data:\n  name: {task}\n  num_simulations: {budget}\n")
    (folder / "metrics.json").write_text(json.dumps({"status": status}))
    (folder / "c2st.csv").write_text("observation,c2st,c2st_sd_folds,c2st_scores,n\n" + "".join(
        f"{k},{c:.6f},0.010000,{c:.6f} {c:.6f},200\n" for k, c in observations))


@pytest.mark.slow  # ~1 s on 2 cores
def test_sbibm_run_never_counts_a_finished_job_of_other_settings_as_done(tmp_path, capsys, monkeypatch):
    # Was: "two_moons 1000: done, skipped" for a job that ran train.steps=20 when train.steps=40 was asked,
    # and the table then showed its results as those of the settings asked (exit 0).
    import subprocess

    job = tmp_path / "two_moons_1000" / "job"
    fake_sbibm_job(job, "two_moons", 1000, [(1, 0.6)])
    (job / ".hydra" / "overrides.yaml").write_text(
        "- experiment=sbibm\n- data=two_moons\n- data.num_simulations=1000\n- train.steps=20\n"
        "- eval.observations=[1,2]\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail(f"a job was started: {a}"))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail(f"a job was started: {a}"))  # run's way now
    argv = ["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--"]
    with pytest.raises(SystemExit) as stop:
        sbibm_main()([*argv, "train.steps=40", "eval.observations=[1,2]"])
    assert capsys.readouterr().out.strip() == (
        "two_moons 1000: finished with other settings (train.steps=20, asked 40): not rerun, not counted; pass "
        f"another --root for these settings, or move {tmp_path / 'two_moons_1000'} aside to rerun it")
    assert str(stop.value) == (
        "1 job(s) finished with other settings than asked: two_moons 1000 (other settings) (each named above with the "
        "settings that differ); pass another --root for these settings, or move those jobs aside")
    sbibm_main()([*argv, "train.steps=20", "eval.observations=[1, 2]"])  # the settings it ran with, respelled
    assert capsys.readouterr().out.strip() == "two_moons 1000: done, skipped"
    assert (job / "metrics.json").read_text() == json.dumps({"status": "ok"})  # never moved nor overwritten


@pytest.mark.slow
def test_sbibm_table_leaves_out_unfinished_jobs_naming_them(tmp_path, capsys):
    # Was: a job that failed (or was preempted) after scoring observation 1 of 2 made a row of its
    # one observation, read as the task's result; now it is left out and named.
    fake_sbibm_job(tmp_path / "two_moons_10000" / "job", "two_moons", 10000, [(1, 0.6), (2, 0.7)])
    fake_sbibm_job(tmp_path / "slcp_10000" / "job", "slcp", 10000, [(1, 0.55)], status="error")
    sbibm_main()(["table", str(tmp_path), "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    # Its row says so (was missing, which read as never run).
    assert rows == ["| two_moons | 10,000 | 0.650 +- 0.071 (2 obs.) | 0.556 +- 0.020 (obs. 1, 2) "
                    "| 0.537 +- 0.015 (SNPE, obs. 1, 2) |",
                    "| slcp | 10,000 | not counted (status error) | 0.901 +- 0.047 | 0.713 +- 0.052 (SNLE) |"]
    assert f"left out {tmp_path / 'slcp_10000' / 'job'}: status error" in err


@pytest.mark.slow
def test_sbibm_table_leaves_out_a_job_whose_metrics_json_is_damaged_naming_it(tmp_path, capsys):
    # Was a JSONDecodeError traceback: no table at all, and no word of which file.
    fake_sbibm_job(tmp_path / "two_moons_10000" / "job", "two_moons", 10000, [(1, 0.6), (2, 0.7)])
    fake_sbibm_job(tmp_path / "slcp_10000" / "job", "slcp", 10000, [(1, 0.55)])
    (tmp_path / "slcp_10000" / "job" / "metrics.json").write_text("{trunc")
    sbibm_main()(["table", str(tmp_path), "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert "| two_moons | 10,000 | 0.650" in out and "| slcp | 10,000 | not counted (status damaged) |" in out
    job = tmp_path / "slcp_10000" / "job"
    assert f"left out {job}: status damaged ({job / 'metrics.json'} cannot be read)" in err


def test_sbibm_table_refuses_one_observation_scored_by_two_jobs(tmp_path):
    # Was: both jobs' rows were averaged: "(4 obs.)" for two observations, the spread over duplicates.
    fake_sbibm_job(tmp_path / "a" / "job", "two_moons", 500, [(1, 0.6), (2, 0.7)])
    fake_sbibm_job(tmp_path / "b" / "job", "two_moons", 500, [(1, 0.8)])
    with pytest.raises(SystemExit) as stop:
        sbibm_main()(["table", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "out")])
    assert str(stop.value) == (f"two_moons at 500 simulations, observation 1, is scored by two jobs, "
                               f"{tmp_path / 'a' / 'job'} and {tmp_path / 'b' / 'job'}: one table row averages one "
                               "run; pass the folders of one run per (task, budget)")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_sbibm_table_says_not_published_for_a_budget_sbibm_lacks(tmp_path, capsys):
    # Was: "| nan | nan (not published) |".
    fake_sbibm_job(tmp_path / "job", "two_moons", 500, [(1, 0.6)])
    sbibm_main()(["table", str(tmp_path), "--out", str(tmp_path / "out")])
    assert "| two_moons | 500 | 0.600 (1 obs., no spread) | not published | not published |" in capsys.readouterr().out


@pytest.mark.slow
def test_sbibm_run_exits_non_zero_naming_the_failed_job(tmp_path, capsys):
    # run's main in this process (its job still a launch.py process): a SystemExit with a message is what
    # `python benchmarks/sbibm.py run ...` ends with, printing it on stderr with exit status 1.
    with pytest.raises(SystemExit) as stop:  # a config error (train.ema_decay=2) is now refused before any job
        sbibm_main()(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--",
                      "train.resume=/nonexistent/run"])
    assert isinstance(stop.value.code, str), stop.value.code  # exit status 1; was 0: a script could not tell
    assert "1 job(s) failed: two_moons 1000" in stop.value.code
    # the job's refusal, named on the runner's line; since the resume's checkpoint is checked before any job's folder
    # is written, the job left no metrics.json (was: its record of status error, in a folder the refusal made)
    assert "checkpoint path '/nonexistent/run' does not exist" in capsys.readouterr().out
    assert not (tmp_path / "two_moons_1000" / "job" / "metrics.json").exists()


@pytest.mark.slow
def test_sbibm_run_leaves_a_job_another_runner_is_writing_alone(tmp_path, capsys):
    """Two runners on one --root: the second moved the first's live folder aside, splitting its files."""
    import subprocess
    import sys

    job = tmp_path / "two_moons_1000" / "job"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from gensbi_sharding.harness.folder_lock import FolderLock; "
         f"lock = FolderLock({str(job)!r}); lock.acquire(); print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SystemExit) as stop:
            sbibm_main()(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000"])
        assert stop.value.code not in (0, None)
        out = capsys.readouterr().out
        assert "two_moons 1000: skipped" in out and "in use by another run" in out, out
        assert job.is_dir() and not list(tmp_path.glob("two_moons_1000.failed-*"))  # left where it runs
    finally:
        holder.kill()
        holder.wait(timeout=30)


@pytest.mark.parametrize("argv, message", [
    # Was "'two_moons,slcp' is not one of ...; did you mean two_moons?": typed as launch.py's sweeps are, the fix
    # offered dropped slcp.
    (["--tasks", "two_moons,slcp"], "'two_moons,slcp' is 2 values in one; separate them with spaces: "
                                    "--tasks two_moons slcp"),
    (["--tasks", "two_moons,slcpp"], "separate them with spaces: --tasks two_moons slcp"),
    (["--budgets", "1000,10000"], "'1000,10000' is 2 values in one; separate them with spaces: --budgets 1000 10000"),
])
def test_sbibm_run_names_values_joined_by_commas_as_several(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        sbibm_main()(["run", "--root", str(tmp_path / "root"), *argv])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "root").exists()  # nothing started


def test_sequential_script_names_several_tasks_in_its_one_task_argument(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "sequential_script", Path(__file__).resolve().parents[1] / "benchmarks" / "sequential.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit):
        module.main(["--job", str(tmp_path / "job"), "--task", "two_moons,slcp", "--budget", "1000"])
    assert ("argument --task: 'two_moons,slcp' is 2 values in one; --task takes one: run once per value, e.g. "
            "--task two_moons") in capsys.readouterr().err


@pytest.mark.slow
def test_sbibm_table_rerun_keeps_the_table_it_writes_over_and_says_where(tmp_path, capsys):
    # Was: `table <root>` run again after a job's scores changed (a rerun) wrote its four files over the previous
    # ones without a word: a table read or committed from there was gone. Now each previous file is kept under a new
    # name and named; a rerun that changes nothing keeps nothing.
    job = tmp_path / "two_moons_1000" / "job"
    fake_sbibm_job(job, "two_moons", 1000, [(1, 0.6), (2, 0.7)])
    out = tmp_path / "out"
    sbibm_main()(["table", str(tmp_path), "--out", str(out)])
    first = {name: (out / name).read_bytes() for name in ("sbibm_results.csv", "sbibm_table.md", "sbibm_table.csv")}
    sbibm_main()(["table", str(tmp_path), "--out", str(out)])  # the same rows: nothing kept, nothing said
    assert "held another table" not in capsys.readouterr().err and not list(out.glob("*.previous*"))
    (job / "c2st.csv").write_text("observation,c2st,c2st_sd_folds,c2st_scores,n\n1,0.550000,0.01,0.55 0.55,200\n"
                                  "2,0.650000,0.01,0.65 0.65,200\n")
    sbibm_main()(["table", str(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err
    kept = [out / f"{name.rsplit('.', 1)[0]}.previous.{name.rsplit('.', 1)[1]}" for name in first]
    assert f"sbibm.py table: {out} held another table; its previous files are kept as " in err, err
    assert all(str(path) in err and path.read_bytes() == first[path.name.replace(".previous", "")]
               for path in kept), err
    assert "| 0.650 +- " in kept[1].read_text() and "| 0.600 +- " in (out / "sbibm_table.md").read_text()
    (job / "c2st.csv").write_text("observation,c2st,c2st_sd_folds,c2st_scores,n\n1,0.500000,0.01,0.5 0.5,200\n"
                                  "2,0.650000,0.01,0.65 0.65,200\n")
    sbibm_main()(["table", str(tmp_path), "--out", str(out)])  # a third table: a name not used yet
    assert str(out / "sbibm_table.previous-2.md") in capsys.readouterr().err
    assert (out / "sbibm_table.previous.md").read_bytes() == first["sbibm_table.md"]


@pytest.mark.slow
def test_sbibm_table_that_cannot_keep_the_previous_table_writes_nothing(tmp_path, monkeypatch):
    import errno
    import os
    import shutil

    job = tmp_path / "two_moons_1000" / "job"
    fake_sbibm_job(job, "two_moons", 1000, [(1, 0.6), (2, 0.7)])
    out = tmp_path / "out"
    sbibm_main()(["table", str(tmp_path), "--out", str(out)])
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (job / "c2st.csv").write_text("observation,c2st,c2st_sd_folds,c2st_scores,n\n1,0.550000,0.01,0.55 0.55,200\n"
                                  "2,0.650000,0.01,0.65 0.65,200\n")

    def full(source, target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr(shutil, "copy2", full)
    with pytest.raises(SystemExit) as stop:
        sbibm_main()(["table", str(tmp_path), "--out", str(out)])
    assert str(stop.value) == (f"{out / 'sbibm_results.previous.csv'} could not be written (No space left on device) "
                               f"to keep the previous table in {out}, which is as it was: nothing written; free space "
                               "there, or pass another --out")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
