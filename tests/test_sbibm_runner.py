"""``benchmarks/sbibm.py`` used as users use it, with wrong and unusual inputs: extra arguments that every
job would refuse or that contradict the job's folder, a task given twice, jobs stopped mid-way (Ctrl-C, a
signal to the runner), a job stopped by a preemption, damaged or partial ``c2st.csv`` files, two jobs of one
(task, budget), ``table`` while a job still runs; and ``gensbi_scale.py table`` with a failed job. Jobs are
faked (no training): each test takes well under a second."""

import argparse
import importlib.util
import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from faults_helpers import load_benchmark
from library_helpers import unwritable  # noqa: F401 (a fixture, shared)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sbibm():
    return load_benchmark("sbibm")


@pytest.fixture(autouse=True)
def plain_two_moons_1000(sbibm, monkeypatch):
    """These tests take two_moons at 10^3 as a cell with no settings of its own (as it was until session 78); its
    TASK_SETTINGS entry (a narrow MLP trained longer) is dropped here, so each keeps its assertions; the tests of
    TASK_SETTINGS use gaussian_linear_uniform's, which stays."""
    monkeypatch.delitem(sys.modules["sbibm_method"].TASK_SETTINGS, ("two_moons", 1000), raising=False)


def fake_job(job, task, budget, scores_text, status="ok", observations=None, overrides=()):
    """A job folder as launch.py leaves it: config, recorded overrides, metrics.json's status, c2st.csv."""
    (job / ".hydra").mkdir(parents=True, exist_ok=True)
    eval_part = f"eval:\n  observations: {list(observations)}\n" if observations else ""
    (job / ".hydra" / "config.yaml").write_text(
        f"data:\n  name: {task}\n  num_simulations: {budget}\n  num_observation: 1\n{eval_part}")
    (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in (
        "experiment=sbibm", f"data={task}", f"data.num_simulations={budget}", *overrides)))
    (job / "metrics.json").write_text(json.dumps({"status": status, **({"error": "boom: it broke"}
                                                                      if status == "error" else {})}))
    if scores_text is not None:
        (job / "c2st.csv").write_text(scores_text)


HEADER = "observation,c2st,c2st_sd_folds,c2st_scores,n\n"


def scores(*pairs):
    return HEADER + "".join(f"{k},{c:.6f},0.010000,{c:.6f} {c:.6f},200\n" for k, c in pairs)


class FakeJobs:
    """``subprocess.Popen`` for launch.py (or sequential.py, ``--rounds 2``): records each command and leaves the
    job's files with ``status`` (a sequential job's with its ``sequential.json``).

    ``ctrl_c``: the first wait raises KeyboardInterrupt (the runner's Ctrl-C); the job then ends interrupted, with a
    checkpoint (``saves``) as one stopped in training has, or none, as one stopped before its first step.
    """

    def __init__(self, status="ok", ctrl_c=False, saves=True):
        self.commands, self.status, self.ctrl_c, self.saves = [], status, ctrl_c, saves

    def __call__(self, command, **kwargs):
        jobs = self

        class Proc:
            returncode = None

            def __init__(self):
                self.args = command
                jobs.commands.append(list(command))
                self.sequential = "--job" in command
                if self.sequential:
                    flag = lambda name: command[command.index(name) + 1]  # noqa: E731
                    self.job, self.task, self.budget = Path(flag("--job")), flag("--task"), flag("--budget")
                    self.method = {"rounds": int(flag("--rounds")), "region": flag("--region"),
                                   "margin": float(flag("--margin"))}
                    self.extra = command[command.index("--") + 1:]
                else:
                    value = dict(a.split("=", 1) for a in command if "=" in a)
                    self.job = Path(value["hydra.sweep.dir"].strip("'\"")) / "job"  # as Hydra unquotes it
                    self.task, self.budget = value["data"], value["data.num_simulations"]
                    self.extra = [a for a in command[command.index(f"data.num_simulations={self.budget}") + 1:]
                                  if not a.startswith("hydra.")]
                self.interrupted = False

            def finish(self, status):
                fake_job(self.job, self.task, self.budget, scores((1, 0.6)) if status == "ok" else None, status,
                         overrides=self.extra)
                if self.sequential:
                    (self.job / "sequential.json").write_text(json.dumps(self.method))
                elif status == "interrupted" and jobs.saves:
                    (self.job / "checkpoints" / "5").mkdir(parents=True, exist_ok=True)
                self.returncode = {"ok": 0, "interrupted": 130}.get(status, 1)
                return self.returncode

            def wait(self, timeout=None):
                if jobs.ctrl_c and not self.interrupted:
                    self.interrupted = True
                    raise KeyboardInterrupt
                return self.finish("interrupted" if self.interrupted else jobs.status)

            def communicate(self, *a, **k):  # subprocess.run's way of waiting
                self.wait()
                return "", ""

            def poll(self):
                return self.returncode

            def kill(self):
                pass

            def send_signal(self, signum):  # the runner passes its Ctrl-C (or a signal) on to the job
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        return Proc()


# ------------------------------------------------- run: extra arguments checked before any job

@pytest.mark.parametrize("extra, message", [
    # Was: every job started and failed the same way ("run the same command again to retry them").
    # Then: Hydra's "Could not override 'train.stepz'. To append to your config use +train.stepz=20" (refused too).
    (["train.stepz=20"], "extra argument train.stepz is not a setting of train (did you mean train.steps?); its "
                         "settings: steps, "),
    (["train.ema_decay=2"], "extra arguments (after --), for two_moons at 1000 simulations: train.ema_decay=2.0 "
                            "must lie in [0, 1) (0: no EMA), e.g. train.ema_decay=0.999"),
    # Was: the job under two_moons_1000 trained 2,000 simulations (or slcp), read as two_moons at 1,000 by run.
    (["data.num_simulations=2000"], "extra argument data.num_simulations=2000: sets the simulation budget, which "
                                    "--budgets gives each job (and its folder's name); use --budgets"),
    (["data=slcp"], "extra argument data=slcp: sets the task, which --tasks gives each job"),
    (["hydra.sweep.dir=/tmp/elsewhere"], "extra argument hydra.sweep.dir=/tmp/elsewhere: sets the job's folder, "
                                         "which --root gives"),
    # Was: refused in the job with advice about hydra.sweep.subdir, which the user never set.
    (["seed=0,1"], "extra argument seed=0,1 sweeps several values, but each (task, budget) is one job in one folder"),
    # Was: every job ended ok without a C2ST, and the table then found nothing.
    (["eval.enabled=false"], "extra argument eval.enabled=false: the jobs would score no observation"),
    # Was "... or data.num_simulations=10000 at this fraction": a fix run refuses ("use --budgets").
    (["data.val_fraction=0.001"], "holds out 1 of the 1000 simulations (--budgets) for validation, fewer than the 10 "
     "pairs a run validates on (the best weights and early stopping follow their loss): set data.val_fraction=0.01 "
     "(the smallest that holds out 10) or --budgets 10000 at this fraction"),
    # The value suggested is the one each job composes under experiment=sbibm (was the schema's train.steps=4000).
    (["train.steps=abc"], "converted to Integer; e.g. train.steps=20000"),
    (["eval.observations=abc"], "'abc' is not one; write e.g. eval.observations=[1,2,3,4,5,6,7,8,9,10]"),
    # Round 45: and for a value of the right type a job's check refuses (was the schema's: 3000, 250).
    (["train.steps=0"], "for two_moons at 1000 simulations: train.steps=0 must be >= 1; e.g. train.steps=20000"),
    (["train.val_every=-1"], "train.val_every=-1 must be >= 0 (0: off); e.g. train.val_every=200"),
    # Round 46: the checks launch.py's sweep check makes beyond the values' own (was: refused in its job only, after
    # every earlier job had trained: --budgets 10000 1000 trained two_moons at 10000 first).
    (["data.batch_size=2000"], "extra arguments (after --), for two_moons at 1000 simulations: data.batch_size=2000 "
                               "cannot be used: the global batch size 2000 must be at most 900 (the 900 training "
                               "pairs); set data.batch_size=900"),
])
@pytest.mark.fast_cases(3)
def test_run_refuses_bad_extra_arguments_before_any_job(sbibm, tmp_path, monkeypatch, capsys, extra, message):
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path / "r"), "--tasks", "two_moons", "slcp", "--budgets", "1000",
                    "--", "mesh=none", *extra])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert jobs.commands == [] and not (tmp_path / "r").exists()


def test_run_checks_the_batch_against_the_mesh_each_job_makes_before_any_job(sbibm):
    # experiment=sbibm's mesh=auto splits each batch over the 8 devices a job sees (this process's, as launch.py's
    # sweep check counts them); was: only the job refused it, once every job before it had trained.
    from sbibm_checks import extra_problem

    assert extra_problem(["data.batch_size=100"], ["two_moons"], [10000, 1000]) == (
        "extra arguments (after --), for two_moons at 10000 simulations: data.batch_size=100 cannot be used: the "
        "global batch size 100 must be a multiple of 8 (it is split over the data-parallel size 8); set "
        "data.batch_size=96; or keep data.batch_size=100 on another mesh: mesh=dict mesh.model_axis=2 (data-parallel "
        "size 4) or devices.cpu_count=10 (data-parallel size 10)")
    assert extra_problem(["mesh=none", "data.batch_size=100"], ["two_moons"], [10000, 1000]) is None



@pytest.mark.parametrize("env, said", [("JAX_PLATFORMS", "cuda"), ("JAX_PLATFORMS", "tpu")])
def test_run_names_an_environment_refusal_as_the_environments(sbibm, tmp_path, monkeypatch, capsys, env, said):
    """Was "extra arguments (after --), for two_moons at 1000 simulations: JAX_PLATFORMS=cuda is not available
    here ...": the environment's refusal, said as the arguments'."""
    from gensbi_sharding.harness import cpu_count

    monkeypatch.setenv(env, said)
    monkeypatch.setattr(cpu_count, "accelerators_installed", lambda: False)  # a CPU machine
    monkeypatch.setattr(subprocess, "Popen", jobs := FakeJobs())
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path / "r"), "--tasks", "two_moons", "--budgets", "1000"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2 and last.endswith(f" run: error: {env}={said} is not available here: JAX has cpu; "
                                                  f"unset {env} for JAX's default, or set {env}=cpu"), last
    assert "extra arguments" not in last and jobs.commands == [] and not (tmp_path / "r").exists()


def test_run_refuses_the_environment_without_the_usage_text(sbibm, tmp_path, monkeypatch, capsys):
    # Was: argparse's usage lines above "JAX_PLATFORMS=cuda is not available here", which no argument fixes
    from gensbi_sharding.harness import cpu_count

    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    monkeypatch.setattr(cpu_count, "accelerators_installed", lambda: False)  # a CPU machine
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path / "r"), "--tasks", "two_moons", "--budgets", "1000"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(" run: error: JAX_PLATFORMS=cuda is not available here", err.find(" "))
    assert "usage:" not in err and len(err.splitlines()) == 1 and not (tmp_path / "r").exists()


@pytest.mark.parametrize("inside", ["", "sbibm", "checkpoints"])
def test_run_refuses_a_root_in_a_runs_folder_before_writing(sbibm, tmp_path, monkeypatch, inside):
    # Was: sbibm_asked.json and <task>_<budget>/ written into the run's folder, every job then refused by launch.py
    # naming hydra.sweep.dir (which run refuses: --root sets it), and "run the same command again to retry them".
    run_dir = tmp_path / "a_run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / "checkpoints").mkdir()
    (run_dir / "metrics.json").write_text('{"status": "ok"}')
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    root = run_dir / inside if inside else run_dir
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(root), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value) == (
        f"--root {root} {'lies inside' if inside else 'is'} the folder of the run {run_dir}, which is never written "
        f"into again; pass a folder outside it, e.g. --root {run_dir}-sbibm")
    assert jobs.commands == [] and sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before


@pytest.mark.slow
@pytest.mark.parametrize("given", ["root/two_moons_1000", "root/two_moons_1000/again", "root/sub", "multirun"])
def test_run_refuses_a_root_inside_another_roots_or_a_sweeps_folder_before_writing(sbibm, tmp_path, monkeypatch,
                                                                                    given):
    # Was: --root <root>/two_moons_1000 (one (task, budget) folder of a root) ran its jobs there, and then
    # "table <root>" refused for good: "two_moons at 1,000 simulations, observation 1, is scored by two jobs".
    root, multirun = tmp_path / "root", tmp_path / "multirun"
    fake_job(root / "two_moons_1000" / "job", "two_moons", 1000, scores((1, 0.6)))
    (root / "sbibm_asked.json").write_text('[["two_moons", 1000]]')
    (root / "two_moons_1000" / "multirun.yaml").write_text("hydra: {}\n")
    fake_job(multirun / "0", "two_moons", 1000, scores((1, 0.6)))  # a launch.py -m experiment=sbibm folder
    (multirun / "multirun.yaml").write_text("hydra: {}\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path / given), "--tasks", "two_moons", "--budgets", "1000", "--",
                    "mesh=none"])
    assert stop.value.code == 2
    where = "is" if given in ("root/two_moons_1000", "multirun") else "lies inside"
    folder = {"root/sub": root, "multirun": multirun}.get(given, root / "two_moons_1000")
    what = "the --root of another sbibm.py run," if given == "root/sub" else "the sweep folder"
    table, fix = (multirun, f"a folder outside it, e.g. --root {multirun}-sbibm") if given == "multirun" else (
        root, f"--root {root}, whose jobs done are skipped, or a folder outside it")
    assert str(stop.value) == (f"--root {tmp_path / given} {where} {what} {folder}: python benchmarks/sbibm.py table {table} "
                               "counts "
                               "every job below it, so a (task, budget) run here too would be found twice, and that "
                               f"table refused; pass {fix}")
    assert jobs.commands == [] and sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    sbibm.main(["table", str(root), "--out", str(tmp_path / "table")])  # the root's table is as it was
    assert "| two_moons | 1,000 | 0.600" in (tmp_path / "table" / "sbibm_table.md").read_text()



@pytest.mark.slow
def test_table_takes_the_root_as_run_took_it(sbibm, tmp_path):
    # Was: "sbibm.py table --root <root>", typed as "run --root <root>" was, ended "sbibm.py: error: unrecognized
    # arguments: --root", though table reads exactly that folder.
    for root, budget in (("a", 1000), ("b", 10000)):
        fake_job(tmp_path / root / f"two_moons_{budget}" / "job", "two_moons", budget, scores((1, 0.6)))
    sbibm.main(["table", "--root", str(tmp_path / "a"), "--out", str(tmp_path / "t1")])
    sbibm.main(["table", str(tmp_path / "a"), "--out", str(tmp_path / "t2")])
    assert (tmp_path / "t1" / "sbibm_table.md").read_text() == (tmp_path / "t2" / "sbibm_table.md").read_text()
    assert "| two_moons | 1,000 | 0.600" in (tmp_path / "t1" / "sbibm_table.md").read_text()
    sbibm.main(["table", "--root", str(tmp_path / "a"), "--root", str(tmp_path / "b"), "--out", str(tmp_path / "t3")])
    sbibm.main(["table", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "t4")])
    assert (tmp_path / "t3" / "sbibm_table.md").read_text() == (tmp_path / "t4" / "sbibm_table.md").read_text()
    assert "| two_moons | 10,000 | 0.600" in (tmp_path / "t3" / "sbibm_table.md").read_text()

def test_run_refuses_a_root_holding_another_roots_folder_before_writing(sbibm, tmp_path, monkeypatch):
    # Was: --root <parent> of an earlier --root ran its jobs there, and then "table <parent>", which reads every job
    # below it, found two jobs of one (task, budget) and refused (only a --root inside another was refused).
    inner = tmp_path / "results" / "first"
    fake_job(inner / "two_moons_1000" / "job", "two_moons", 1000, scores((1, 0.6)))
    (inner / "sbibm_asked.json").write_text('[["two_moons", 1000]]')
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    parent = tmp_path / "results"
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(parent), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    assert stop.value.code == 2
    assert str(stop.value) == (f"--root {parent} holds the --root of another sbibm.py run, {inner}: python "
                               f"benchmarks/sbibm.py table {parent} counts every job below it, so a (task, budget) run here too would be found "
                               f"twice, and that table refused; pass --root {inner}, whose jobs done are skipped, or a "
                               f"folder outside {parent}, e.g. --root {parent}-sbibm")
    assert jobs.commands == [] and sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("out", [None, "", "plots"])
def test_table_refuses_to_write_into_a_runs_folder(sbibm, tmp_path, out):
    # Was: sbibm_results.csv, sbibm_table.md/.csv and sbibm.png written into the finished run's folder given (its
    # default --out) or named by --out.
    job = tmp_path / "two_moons_1000"
    fake_job(job, "two_moons", 1000, scores((1, 0.6)))
    before = sorted(p.relative_to(job) for p in job.rglob("*"))
    argv = ["table", str(job)] + ([] if out is None else ["--out", str(job / out)])
    with pytest.raises(SystemExit) as stop:
        sbibm.main(argv)
    given = job / out if out is not None else job
    flag = "--out" if out is not None else "--out (by default the first folder)"
    where = "lies inside" if out else "is"
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value) == (f"{flag} {given} {where} the folder of the run {job}, which is never written into "
                               f"again; pass a folder outside it, e.g. --out {job}-table")
    assert sorted(p.relative_to(job) for p in job.rglob("*")) == before


def test_run_accepts_extra_arguments_every_job_can_run(sbibm):
    from sbibm_checks import extra_problem

    assert extra_problem(["mesh=none", "train.steps=20", "eval.observations=[1]", "seed=3"], ["two_moons", "sir"],
                         [1000]) is None


@pytest.mark.slow
def test_run_runs_a_task_and_budget_given_twice_once(sbibm, tmp_path, monkeypatch, capsys):
    # Was: two_moons 1000 launched four times (each failure moved aside and retried), "4 job(s) failed".
    jobs = FakeJobs(status="error")
    monkeypatch.setattr(subprocess, "Popen", jobs)
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "two_moons", "--budgets", "1000", "1000",
                    "--", "mesh=none"])
    assert len(jobs.commands) == 1
    assert not isinstance(stop.value.code, int)  # failed jobs: exit 1, with the message
    assert str(stop.value).startswith("1 job(s) failed: two_moons 1000 (each named above with its error")
    # The failed job's reason is on its line (was only "exit 1").
    assert "two_moons 1000: exit 1 after 0 s, status error: boom: it broke" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [["data.batch_size=2000"], ["train.steps=30"]])
def test_a_job_whose_error_names_an_extra_argument_is_not_said_to_retry_as_it_is(sbibm, tmp_path, monkeypatch, extra):
    # Was "run the same command again to retry them" after "set data.batch_size=896" too: the same command failed
    # the same way, one more folder moved aside each time.
    monkeypatch.setattr(subprocess, "Popen", FakeJobs(status="error"))
    # A batch only the job's own devices refuse (a GPU mesh's data-parallel size; on CPU refused before any job)
    monkeypatch.setattr(sbibm, "extra_problem", lambda *a: None)
    monkeypatch.setattr(sbibm, "failure", lambda metrics, log: (
        "ConfigError: data.batch_size=2000 cannot be used: the global batch size 2000 must be at most 900 (the 900 "
        "training pairs); set data.batch_size=896"))  # as launch.py's sweep check refuses it, in the job
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none",
                    *extra])
    ends = " to retry them (a failed job is moved aside and rerun, a stopped one continued)"
    assert not isinstance(stop.value.code, int)  # a failure, not a refusal: exit 1, with the message
    assert str(stop.value) == (
        "1 job(s) failed: two_moons 1000 (its error names data.batch_size, given after --) (each named above with its "
        "error; its launch.log has the rest); change the arguments after -- that those errors name, as they say (as "
        "they are, those jobs fail alike), and run the command again" + ends if extra == ["data.batch_size=2000"] else
        "1 job(s) failed: two_moons 1000 (each named above with its error; its launch.log has the rest); run the same "
        "command again" + ends)


def test_run_continues_a_preempted_job_from_its_checkpoint(sbibm, tmp_path, monkeypatch, capsys):
    # Was: moved aside as .failed-<time> and trained again from step 0.
    fake_job(tmp_path / "two_moons_1000" / "job", "two_moons", 1000, None, "preempted", overrides=["mesh=none"])
    (tmp_path / "two_moons_1000" / "job" / "checkpoints" / "400").mkdir(parents=True)  # its steps so far
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    assert [c[-2:] for c in jobs.commands] == [["mesh=none", "train.resume=auto"]]
    assert "two_moons 1000: preempted: continuing from its last checkpoint" in capsys.readouterr().out
    assert not list(tmp_path.glob("*.failed-*"))


@pytest.mark.parametrize("error, saved, continued", [
    ("XlaRuntimeError: RESOURCE_EXHAUSTED: out of memory", True, True),
    ("ConfigError: data.batch_size=2000 cannot be used", True, False),  # its config fails alike from any step
    ("XlaRuntimeError: RESOURCE_EXHAUSTED: out of memory", False, False),  # only a save cut short: nothing committed
])
@pytest.mark.fast_cases(1)
def test_run_continues_a_job_that_failed_after_a_committed_checkpoint(sbibm, tmp_path, monkeypatch, capsys, error,
                                                                      saved, continued):
    # Was: any failed job moved aside as .failed-<time> and trained again from step 0, its committed steps lost.
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter

    job = tmp_path / "two_moons_1000" / "job"
    fake_job(job, "two_moons", 1000, None, "error", overrides=["mesh=none"])
    (job / "metrics.json").write_text(json.dumps({"status": "error", "error": error}))
    if saved:
        with CheckpointWriter(job / "checkpoints", async_save=False) as writer:
            writer.save(400, {"w": jnp.zeros(2)}, jax.random.key(0))
    else:
        (job / "checkpoints" / "400").mkdir(parents=True)
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    out = capsys.readouterr().out
    aside = list(tmp_path.glob("two_moons_1000.failed-*"))
    if continued:
        assert [c[-2:] for c in jobs.commands] == [["mesh=none", "train.resume=auto"]]
        assert (f"two_moons 1000: failed ({error}): continuing from its last checkpoint (train.resume=auto; to start "
                f"it again instead, move {tmp_path / 'two_moons_1000'} aside)") in out
        assert aside == []
    else:
        assert [c[-1] for c in jobs.commands] == ["mesh=none"]
        assert len(aside) == 1 and "status error: its folder kept aside as" in out


@pytest.mark.parametrize("recorded", ["- experiment=sbibm\n- [broken\n", "- experiment=sbibm\n- train.steps=(\n"])
def test_run_names_a_finished_job_whose_recorded_overrides_are_damaged(sbibm, tmp_path, monkeypatch, capsys,
                                                                       recorded):
    # Was a yaml ParserError or Hydra OverrideParseException traceback, and no job of the run ran.
    job = tmp_path / "two_moons_1000" / "job"
    fake_job(job, "two_moons", 1000, scores((1, 0.6)))
    (job / ".hydra" / "overrides.yaml").write_text(recorded)
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "slcp", "--budgets", "1000", "--",
                    "mesh=none"])
    assert [c[c.index("-m") + 2] for c in jobs.commands] == ["data=slcp"]  # the others still run
    out = capsys.readouterr().out
    assert (f"two_moons 1000: finished with other settings (its {job / '.hydra' / 'overrides.yaml'} cannot be "
            "read: ") in out and f"or move {tmp_path / 'two_moons_1000'} aside to rerun it" in out
    assert not isinstance(stop.value.code, int)  # failed jobs: exit 1, with the message
    assert str(stop.value).startswith("1 job(s) finished with other settings than asked: two_moons 1000")
    assert (job / "metrics.json").is_file()  # neither moved nor rerun


def test_run_continues_a_killed_job_that_saved_a_checkpoint(sbibm, tmp_path, monkeypatch, capsys):
    # Was: no metrics.json read as a failure: moved aside as .failed-<time> and trained again from step 0,
    # though its checkpoints (train.checkpoint_every) held the steps done. One with none is still rerun.
    for task, saved in (("two_moons", True), ("slcp", False)):
        job = tmp_path / f"{task}_1000" / "job"
        fake_job(job, task, 1000, None, overrides=["mesh=none", "train.checkpoint_every=100"])
        (job / "metrics.json").unlink()
        (job / "checkpoints" / "300").mkdir(parents=True) if saved else None
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "slcp", "--budgets", "1000", "--",
                "mesh=none", "train.checkpoint_every=100"])
    assert [c[-1] for c in jobs.commands] == ["train.resume=auto", "train.checkpoint_every=100"]
    assert ("two_moons 1000: killed (no metrics.json; checkpoints kept): continuing from its last checkpoint"
            in capsys.readouterr().out)
    assert [p.name.split("-")[0] for p in tmp_path.glob("*.failed-*")] == ["slcp_1000.failed"]


def test_run_prints_each_command_as_a_shell_reads_it_back(sbibm, tmp_path, monkeypatch, capsys):
    # Was printed unquoted: pasted into a shell, a --root with a space or ( ) became other words or an error.
    import shlex

    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path / "a b(1)"), "--tasks", "two_moons", "--budgets", "1000", "--",
                "mesh=none", "eval.observations=[1]"])
    line = capsys.readouterr().out.splitlines()[0]
    assert shlex.split(line.split(": ", 1)[1]) == jobs.commands[0]  # with its interpreter: it runs pasted


def test_run_says_each_finished_jobs_c2st_and_the_table_command(sbibm, tmp_path, monkeypatch, capsys):
    # Was "two_moons 1000: exit 0 after 27 s" and nothing more: the README's tiny job promises "a C2ST near 1",
    # which only `table` showed, and `run` never named that command.
    class TwoObservations(FakeJobs):
        def __call__(self, command, **kwargs):
            proc = super().__call__(command, **kwargs)
            finish = proc.finish

            def two_scored(status):
                code = finish(status)
                (proc.job / "c2st.csv").write_text(scores((1, 0.96), (2, 0.98)))
                return code

            proc.finish = two_scored
            return proc

    monkeypatch.setattr(subprocess, "Popen", TwoObservations())
    root = tmp_path / "a b"
    sbibm.main(["run", "--root", str(root), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    said = capsys.readouterr()
    assert said.out.splitlines()[-1] == "two_moons 1000: exit 0 after 0 s, C2ST 0.970 +- 0.014 over 2 observations"
    assert said.err == f"every job done; their table and plot: python benchmarks/sbibm.py table '{root}'\n"


def test_a_finished_job_with_one_observation_has_no_spread(sbibm, tmp_path):
    from sbibm_jobs import score_said

    fake_job(tmp_path, "two_moons", 1000, scores((3, 0.6)))
    assert score_said(tmp_path) == ", C2ST 0.600 over 1 observation"
    (tmp_path / "c2st.csv").write_text(HEADER + "1,0.96")  # cut off: no number given (the next run reruns it)
    assert score_said(tmp_path) == ""


@pytest.mark.slow
def test_a_finished_jobs_run_line_reads_the_digits_its_table_row_reads(sbibm, tmp_path):
    # Was: a tiny 'sbibm.py run ... two_moons --budgets 1000' said 'C2ST 0.966 +- 0.010 over 10 observations' and
    # 'sbibm.py table' of it '0.967 +- 0.010' (and the job's own sweep summary 0.967): the mean 0.9665, summed by
    # Python in one order and by NumPy in another, fell either side of the rounding.
    from sbibm_jobs import score_said

    c2st = (0.975, 0.96, 0.96, 0.9475, 0.98, 0.9575, 0.9725, 0.9675, 0.97, 0.975)  # that run's 10 observations
    job = tmp_path / "root" / "two_moons_1000" / "job"
    fake_job(job, "two_moons", 1000, scores(*enumerate(c2st, start=1)))
    assert score_said(job) == ", C2ST 0.967 +- 0.010 over 10 observations"
    sbibm.main(["table", str(tmp_path / "root"), "--out", str(tmp_path / "t")])
    assert "| two_moons | 1,000 | 0.967 +- 0.010 |" in (tmp_path / "t" / "sbibm_table.md").read_text()


def test_run_reruns_a_finished_job_whose_scores_are_damaged(sbibm, tmp_path, monkeypatch, capsys):
    # Was "done, skipped": the table then left it out (or read its cut-off row) and run never mended it.
    fake_job(tmp_path / "two_moons_1000" / "job", "two_moons", 1000, HEADER + "1,0.96", overrides=["mesh=none"])
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    assert len(jobs.commands) == 1 and "train.resume=auto" not in jobs.commands[0]
    assert "two_moons 1000: finished, but its" in capsys.readouterr().out
    assert len(list(tmp_path.glob("two_moons_1000.failed-*"))) == 1


def test_ctrl_c_lets_the_job_stop_and_starts_no_other(sbibm, tmp_path, monkeypatch, capsys):
    # Was: a KeyboardInterrupt traceback; subprocess.run killed the job (SIGKILL) 0.25 s after the Ctrl-C,
    # before it saved its checkpoint or wrote its status, and its launch.log was never written.
    jobs = FakeJobs(ctrl_c=True)
    monkeypatch.setattr(subprocess, "Popen", jobs)
    with pytest.raises(SystemExit) as stop:
        try:
            sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "slcp", "--budgets", "1000",
                        "--", "mesh=none"])
        except KeyboardInterrupt:  # would end pytest's session
            pytest.fail("the runner's Ctrl-C came out as a KeyboardInterrupt traceback")
    assert stop.value.code == 130 and len(jobs.commands) == 1
    assert json.loads((tmp_path / "two_moons_1000" / "job" / "metrics.json").read_text())["status"] == "interrupted"
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "stopped by Ctrl-C during two_moons 1000 (status interrupted); run the same command again: it continues that "
        "job from its last checkpoint, then runs the jobs not started")


@pytest.mark.parametrize("rounds, said", [
    ("1", "stopping: waiting for the job to save a checkpoint at its next step (Ctrl-C again kills it)"),
    # Was the line above: a sequential job's rounds keep no checkpoint, and run starts it again.
    ("2", "stopping: waiting for the job to stop (it keeps no checkpoint: the same command starts it again; "
          "Ctrl-C again kills it)")])
def test_ctrl_c_says_what_the_stopped_job_keeps(sbibm, tmp_path, monkeypatch, capsys, rounds, said):
    monkeypatch.setattr(subprocess, "Popen", FakeJobs(ctrl_c=True))
    monkeypatch.setattr(sbibm, "sequential_problem", lambda *a: None)  # sir's config is composed elsewhere
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path), "--tasks", "sir", "--budgets", "10000", "--rounds", rounds,
                    "--", "mesh=none"])
    assert stop.value.code == 130 and capsys.readouterr().err.splitlines()[0] == said


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_a_job_keeping_no_checkpoint_killed_after_the_grace_is_said_to_start_again(sbibm, tmp_path, capsys):
    from sbibm_jobs import launch

    child = ("import os, signal, time\n"
             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
             "os.kill(os.getppid(), signal.SIGTERM)\n"
             "time.sleep(60)\n")
    assert launch([sys.executable, "-c", child], tmp_path / "launch.log", grace_s=0.3, checkpoints=False)[0] == \
        -signal.SIGKILL
    assert capsys.readouterr().err == ("the job did not stop within 0.3 s of the stop: killed; the same command "
                                       "starts it again (its rounds keep no checkpoint)\n")


@pytest.mark.parametrize("resume", ["train.resume=auto", "train.resume=/runs/sir"])
@pytest.mark.fast_cases(1)
def test_a_sequential_run_refuses_a_resume_its_rounds_would_ignore(sbibm, tmp_path, monkeypatch, capsys, resume):
    # Was: accepted; the job trained every round afresh (hours at the preset) and its row named train.resume.
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path / "r"), "--tasks", "sir", "--budgets", "10000", "--rounds", "2",
                    "--", "mesh=none", resume])
    assert stop.value.code == 2 and jobs.commands == [] and not (tmp_path / "r").exists()
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"error: extra argument {resume}: a sequential job's rounds keep no checkpoint to continue from (a stopped "
        "one is started again), so it would be ignored; leave it out")


@pytest.mark.slow
@pytest.mark.parametrize("status", ["stopped", "error"])
def test_a_failed_or_stopped_sequential_job_is_said_to_start_again_not_to_continue(sbibm, tmp_path, monkeypatch,
                                                                                    status):
    # Typed: sbibm.py run --rounds 2, its job stopped alone (a signal to sequential.py, not to the runner) or failed.
    # Was: "... to retry them (a failed job is moved aside and rerun, a stopped one continued)": its rounds keep no
    # checkpoint, and the next run moves it aside and starts it again.
    monkeypatch.setattr(subprocess, "Popen", FakeJobs(status=status))
    argv = ["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--rounds", "2", "--",
            "mesh=none"]
    with pytest.raises(SystemExit) as stop:
        sbibm.main(argv)
    assert str(stop.value).endswith(
        "run the same command again to retry them (a failed or stopped job is moved aside and started again: its "
        "rounds keep no checkpoint)")
    with pytest.raises(SystemExit):  # as said: moved aside, started again
        sbibm.main(argv)
    assert len(list(tmp_path.glob("two_moons_1000_sequential-2-box-0.5.failed-*"))) == 1


@pytest.mark.parametrize("saved", [False, True])
@pytest.mark.fast_cases(1)
def test_a_job_stopped_before_its_first_checkpoint_is_not_said_to_continue_from_one(sbibm, tmp_path, monkeypatch,
                                                                                     capsys, saved):
    # Was "it continues that job from its last checkpoint" after the job's own "interrupted by Ctrl-C before
    # training (nothing trained: no checkpoint to save)".
    monkeypatch.setattr(subprocess, "Popen", FakeJobs(ctrl_c=True, saves=saved))
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    assert stop.value.code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "stopped by Ctrl-C during two_moons 1000 (status interrupted); run the same command again: it " +
        ("continues that job from its last checkpoint" if saved else "starts that job again (it had saved no "
                                                                       "checkpoint)") + ", then runs the jobs not started")
    monkeypatch.setattr(subprocess, "Popen", FakeJobs())  # the same command again (was "continuing from its last
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    assert capsys.readouterr().out.splitlines()[0] == "two_moons 1000: interrupted: " + (  # checkpoint" of none)
        "continuing from its last checkpoint" if saved else "it saved no checkpoint: starting it again in its folder")


def test_ctrl_c_while_a_job_starts_promises_no_checkpoint_and_keeps_nothing_aside(sbibm, tmp_path, monkeypatch,
                                                                                   capsys):
    # Was: "it continues that job from its last checkpoint" of a job stopped while Python imported JAX (no
    # folder, no checkpoint); the next run then moved its launch.log aside as <task>_<budget>.failed-<time>.
    starts, stopped = [], []

    class Starting:  # launch.py stopped by the Ctrl-C before it made its job folder: exit -2, no metrics.json
        returncode = -2

        def __init__(self, command, **kwargs):
            starts.append(command)

        def send_signal(self, signum):  # the runner passes its Ctrl-C on to the job
            pass

        def wait(self, timeout=None):
            if len(starts) == 1 and not stopped:
                stopped.append(True)
                raise KeyboardInterrupt
            return self.returncode

    monkeypatch.setattr(subprocess, "Popen", Starting)
    monkeypatch.setattr(sbibm, "extra_problem", lambda *a: None)  # checked elsewhere; a second each time
    argv = ["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"]
    with pytest.raises(SystemExit) as stop:
        sbibm.main(argv)
    assert stop.value.code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "stopped by Ctrl-C during two_moons 1000 (status unknown (no metrics.json)); run the same command again: it "
        "starts that job again (it had saved no checkpoint), then runs the jobs not started")
    monkeypatch.setattr(subprocess, "Popen", FakeJobs())
    sbibm.main(argv)
    assert not list(tmp_path.glob("*.failed-*")) and (tmp_path / "two_moons_1000" / "launch.log").exists()
    assert json.loads((tmp_path / "two_moons_1000" / "job" / "metrics.json").read_text())["status"] == "ok"


@pytest.mark.slow
def test_a_signal_to_the_runner_reaches_its_job(sbibm, tmp_path):
    # Was: SIGTERM (timeout, kill, a cluster) ended the runner alone; its job ran on, orphaned.
    from sbibm_jobs import launch

    child = ("import os, signal, sys, time\n"
             "signal.signal(signal.SIGTERM, lambda s, f: (print('got', s, flush=True), sys.exit(75)))\n"
             "os.kill(os.getppid(), signal.SIGTERM)\n"
             "time.sleep(30)\n")
    log = tmp_path / "launch.log"
    assert launch([sys.executable, "-c", child], log) == (75, 75)
    assert log.read_text() == f"got {int(signal.SIGTERM)}\n"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the runner's own handler is back


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_a_job_that_does_not_stop_after_the_signal_is_killed_after_the_grace(sbibm, tmp_path, capsys):
    # Was: waited for without a bound: `timeout 300 sbibm.py run ...` ran on for 5 more minutes (a job compiling
    # when its SIGTERM came, which looked at it only at its next step).
    import time

    from sbibm_jobs import launch

    child = ("import os, signal, time\n"
             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
             "os.kill(os.getppid(), signal.SIGTERM)\n"
             "time.sleep(60)\n")
    start = time.perf_counter()
    assert launch([sys.executable, "-c", child], tmp_path / "launch.log", grace_s=0.3) == (-signal.SIGKILL, 75)
    assert time.perf_counter() - start < 30
    assert capsys.readouterr().err == ("the job did not stop within 0.3 s of the stop: killed; the same command "
                                       "continues it from its last checkpoint\n")


@pytest.mark.parametrize("argv, message", [
    # Were NotADirectoryError tracebacks from mkdir.
    (["run", "--root", "{tmp}/file/root", "--tasks", "two_moons", "--budgets", "1000"],
     "--root {tmp}/file/root lies under {tmp}/file, a file, not a folder; pass another --root"),
    (["table", "{tmp}", "--out", "{tmp}/file/out"], "--out {tmp}/file/out lies under {tmp}/file, a file, not a folder; "
                                                    "pass another --out"),
])
def test_a_folder_under_a_file_is_named(sbibm, tmp_path, argv, message, monkeypatch, capsys):
    from cli_args import said

    (tmp_path / "file").write_text("mine")
    with pytest.raises(SystemExit) as stop:
        sbibm.main([a.format(tmp=tmp_path) for a in argv])
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value) == message.format(tmp=tmp_path)
    monkeypatch.setattr(sys, "argv", ["sbibm.py"])  # as the script's entry point says it: argparse's error line
    with pytest.raises(SystemExit) as stop:
        said(lambda: sbibm.main([a.format(tmp=tmp_path) for a in argv]))
    assert stop.value.code == 2 and capsys.readouterr().err == f"sbibm.py: error: {message.format(tmp=tmp_path)}\n"
    assert (tmp_path / "file").read_text() == "mine"


def test_a_file_where_a_job_folder_goes_is_named_before_any_job(sbibm, tmp_path, monkeypatch):
    # Was: sbibm_asked.json written, then mkdir's FileExistsError traceback.
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    (tmp_path / "slcp_1000").write_text("mine")
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "slcp", "--budgets", "1000"])
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value) == (f"--root {tmp_path}: {tmp_path / 'slcp_1000'} is a file, where run keeps the job of "
                               "that task and budget; move it aside, or pass another --root")
    assert jobs.commands == [] and sorted(p.name for p in tmp_path.iterdir()) == ["slcp_1000"]
    assert (tmp_path / "slcp_1000").read_text() == "mine"


@pytest.mark.parametrize("argv, flag", [
    (["run", "--root", "{parent}/root", "--tasks", "two_moons", "--budgets", "1000"], "--root"),
    (["table", "{tmp}", "--out", "{parent}/out"], "--out"),
    (["table", "--from-results", "{tmp}/sbibm_results.csv", "--out", "{parent}"], "--out"),
])
def test_a_folder_that_cannot_be_written_is_named(sbibm, tmp_path, unwritable, argv, flag):
    # Was, as root (os.access passes) in a read-only mount or /sys: a PermissionError traceback from mkdir, or from
    # the table's first write once every row was read.
    parent, reason = unwritable
    argv = [a.format(tmp=tmp_path, parent=parent) for a in argv]
    with pytest.raises(SystemExit) as stop:
        sbibm.main(argv)
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value) == (f"{flag} {argv[argv.index(flag) + 1]}: cannot write in {parent} ({reason}); pass "
                               f"another {flag}, in a folder you can write to")
    assert not any(p.name.startswith(".write-probe-") for p in parent.iterdir())



def test_a_root_under_a_folder_that_takes_no_new_name_is_named_with_the_real_reason(sbibm, tmp_path, monkeypatch):
    # Round 60: --root /proc/x/y said "cannot write in /proc (No such file or directory)", /proc existing.
    import errno
    import tempfile

    def no_new_name(**kwargs):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(kwargs["dir"]))

    monkeypatch.setattr(tempfile, "mkdtemp", no_new_name)
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path / "x" / "y"), "--tasks", "two_moons", "--budgets", "1000"])
    assert str(stop.value) == (f"--root {tmp_path / 'x' / 'y'}: cannot create {tmp_path / 'x'}: {tmp_path} exists, but "
                               "takes no new files or folders: making one there fails with \"No such file or "
                               "directory\" (a virtual file system, such as /proc); pass another --root, in a folder "
                               "you can write to")
    assert list(tmp_path.iterdir()) == []

# ------------------------------------------------- table: damaged scores, two jobs of one cell, a live job

@pytest.mark.parametrize("text, why", [
    # Were a "nan +- nan (0 obs.)" row, a ValueError or KeyError traceback, a cut-off row counted as whole.
    ("", "holds no observation (it is empty, or its header only)"),
    (HEADER, "holds no observation (it is empty, or its header only)"),
    (HEADER + "1,abc,0.1,x,200\n", "line 2 is not a row of observation, c2st, c2st_sd_folds ('1,abc,0.1,x,200')"),
    ("observation,c2st\n1,0.7\n", "line 2 is not a row of observation, c2st, c2st_sd_folds ('1,0.7')"),
    (HEADER + "1,0.96", "line 2 is not a row of observation, c2st, c2st_sd_folds ('1,0.96')"),
    (HEADER + "1,1.7,0.01,x,200\n", "line 2 has c2st='1.7', c2st_sd_folds='0.01', not C2ST scores"),
    (scores((1, 0.6), (1, 0.7)), "holds observations [1, 1], one of them twice"),
    (scores((1, 0.6)), "holds observations [1], not the [1, 2] its job scored"),  # rows lost: was "(1 obs.)"
])
def test_table_leaves_out_a_job_whose_scores_are_damaged(sbibm, tmp_path, capsys, text, why):
    fake_job(tmp_path / "two_moons_10000" / "job", "two_moons", 10000, scores((1, 0.6), (2, 0.7)), observations=[1, 2])
    fake_job(tmp_path / "slcp_10000" / "job", "slcp", 10000, text, observations=[1, 2])
    cells = sbibm.collect([tmp_path])  # what table() tabulates (the plot alone takes a second)
    assert {cell: [(r["observation"], r["c2st"]) for r in rows] for cell, rows in cells.items()} == {
        ("two_moons", 10000): [("1", "0.600000"), ("2", "0.700000")]}
    err = capsys.readouterr().err
    job = tmp_path / "slcp_10000" / "job"
    assert f"left out {job}: its {job / 'c2st.csv'} {why}" in err.splitlines()


@pytest.mark.parametrize("record, why", [("{}", "holds no status"), ('{"status": 5}', "holds no status"),
                                         ("[1]", "cannot be read"), ("", "cannot be read")])
def test_a_metrics_json_without_a_status_costs_its_job_only(sbibm, tmp_path, monkeypatch, capsys, record, why):
    # Was: status None (or 5) went on as a status: an AttributeError traceback in table, and in run a job
    # "unknown" moved aside as failed without its reason.
    fake_job(tmp_path / "two_moons_1000" / "job", "two_moons", 1000, scores((1, 0.6)))
    fake_job(tmp_path / "slcp_1000" / "job", "slcp", 1000, scores((1, 0.7)))
    metrics = tmp_path / "slcp_1000" / "job" / "metrics.json"
    metrics.write_text(record)
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")  # the table's text is under test, not its plot
    text = sbibm.table([tmp_path], tmp_path / "out")
    assert ("| slcp | 1,000 | not counted (status damaged) | 0.975 +- 0.013 | 0.921 +- 0.025 (SNLE) |"
            in text.splitlines())
    assert f"left out {metrics.parent}: status damaged ({metrics} {why})" in capsys.readouterr().err


def test_table_names_a_finished_job_that_scored_nothing(sbibm, tmp_path, capsys):
    # Was silently skipped (only c2st.csv files were looked for): the task's row was just missing.
    fake_job(tmp_path / "a" / "job", "two_moons", 1000, scores((1, 0.6)))
    fake_job(tmp_path / "b" / "job", "slcp", 1000, None)
    assert list(sbibm.collect([tmp_path])) == [("two_moons", 1000)]
    assert (f"left out {tmp_path / 'b' / 'job'}: it has no c2st.csv: it scored no observation (eval.enabled=false "
            "or dry_run=true)") in capsys.readouterr().err


def test_table_refuses_two_jobs_of_one_task_and_budget(sbibm, tmp_path):
    # Was: observation 1 from one run and 2 from another averaged as one row, "(2 obs.)".
    fake_job(tmp_path / "a" / "job", "two_moons", 1000, scores((1, 0.6)))
    fake_job(tmp_path / "b" / "job", "two_moons", 1000, scores((2, 0.9)), overrides=["train.steps=20"])
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["table", str(tmp_path), "--out", str(tmp_path / "out")])
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value) == (
        f"two_moons at 1,000 simulations is scored by two jobs, {tmp_path / 'a' / 'job'} and {tmp_path / 'b' / 'job'} "
        "(other observations): one table row averages one training run; pass the folders of one run per (task, "
        "budget)")
    assert not (tmp_path / "out").exists()


def test_table_names_a_job_still_running_as_running(sbibm, tmp_path, capsys):
    # Was "status unknown (no metrics.json) ... continue it with ... train.resume=auto": advice to start a
    # second run in the folder of the live one.
    from filelock import FileLock

    job = tmp_path / "two_moons_1000" / "job"
    fake_job(job, "two_moons", 1000, scores((1, 0.6)))
    (job / "metrics.json").unlink()
    fake_job(tmp_path / "slcp_1000" / "job", "slcp", 1000, scores((1, 0.7)))
    held = FileLock(job / ".run.lock", timeout=0, is_singleton=False)  # another open file: as another process's
    held.acquire()
    try:
        assert list(sbibm.collect([tmp_path])) == [("slcp", 1000)]
    finally:
        held.release()
    err = capsys.readouterr().err
    assert f"left out {job}: still running: {job} is in use by another run (" in err
    assert "train.resume" not in err


@pytest.mark.parametrize("again", ["{tmp}/r", "{tmp}/r/two_moons_1000"])
def test_table_counts_a_job_once_when_its_folder_is_given_twice(sbibm, tmp_path, again):
    # Was "0.600 +- 0.000 (2 obs.)": the one observation counted once per folder that holds it.
    fake_job(tmp_path / "r" / "two_moons_1000" / "job", "two_moons", 1000, scores((1, 0.6)))
    cells = sbibm.collect([tmp_path / "r", Path(again.format(tmp=tmp_path))])
    assert {cell: [r["observation"] for r in rows] for cell, rows in cells.items()} == {("two_moons", 1000): ["1"]}


def test_table_of_a_folder_moved_aside_reads_it_and_skips_those_inside_a_root(sbibm, tmp_path):
    aside = tmp_path / "r" / "two_moons_1000.failed-1700000000"
    fake_job(aside / "job", "two_moons", 1000, scores((1, 0.6)))
    fake_job(tmp_path / "r" / "two_moons_1000" / "job", "two_moons", 1000, scores((1, 0.7)))
    assert sbibm.collect([tmp_path / "r"])[("two_moons", 1000)][0]["c2st"] == "0.700000"  # the rerun, not both
    assert sbibm.collect([aside])[("two_moons", 1000)][0]["c2st"] == "0.600000"  # was: "no finished job"


def test_table_writes_nothing_when_an_output_name_is_a_folder(sbibm, tmp_path):
    # Was an IsADirectoryError traceback after the CSVs and table had been written beside it.
    fake_job(tmp_path / "r" / "job", "two_moons", 1000, scores((1, 0.6)))
    (tmp_path / "out" / "sbibm.png").mkdir(parents=True)
    with pytest.raises(SystemExit) as stop:
        sbibm.table([tmp_path / "r"], tmp_path / "out")
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value) == (f"{tmp_path / 'out' / 'sbibm.png'} is a folder, where table writes its file; "
                               "pass another --out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["sbibm.png"]


def _last_table(sbibm, tmp_path):
    """One finished job under tmp_path/r, and tmp_path/out holding the last table's four files (their names inside)."""
    fake_job(tmp_path / "r" / "job", "two_moons", 1000, scores((1, 0.6)))
    out = tmp_path / "out"
    out.mkdir()
    for name in sbibm.OUTPUTS:
        (out / name).write_text(f"the last table's {name}")
    return out


@pytest.mark.slow  # draws the table's plot (matplotlib): ~0.5-2 s
def test_table_that_fails_part_way_leaves_the_last_table_whole(sbibm, tmp_path, monkeypatch):
    # Was: sbibm_results.csv, sbibm_table.md and .csv rewritten, then the plot failed: a new table beside the
    # last run's plot.
    from matplotlib.figure import Figure

    out = _last_table(sbibm, tmp_path)

    def fails(*args, **kwargs):
        raise MemoryError("no memory left for the figure")

    monkeypatch.setattr(Figure, "savefig", fails)
    with pytest.raises(MemoryError):
        sbibm.table([tmp_path / "r"], out)
    assert {p.name: p.read_text() for p in out.iterdir()} == {n: f"the last table's {n}" for n in sbibm.OUTPUTS}


@pytest.fixture
def full_disk(monkeypatch):
    """Every file the harness writes atomically fails as on a full disk (ENOSPC)."""
    import errno
    import os

    from gensbi_sharding.harness import outputs

    def full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(outputs, "write_atomic", full)


def test_run_on_a_full_disk_names_the_file_and_what_is_kept(sbibm, tmp_path, full_disk):
    # Round 43: sbibm.py run --root <a full disk> stopped with an OSError's traceback ("No space left on device") as it
    # recorded the cells asked.
    root = tmp_path / "root é"
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(root), "--tasks", "two_moons", "--budgets", "1000"])
    assert not isinstance(stop.value.code, int)  # a failure, not a refusal: exit 1, with the message
    assert str(stop.value) == (
        f"{root / sbibm.ASKED} could not be written (No space left on device): the jobs that finished are kept in "
        f"their folders under {root}; free space there (or make it writable), then run the same command again: it "
        "skips the finished jobs and continues the stopped ones")
    assert sorted(p.name for p in root.iterdir()) == []  # nothing half-written, no job started


def test_run_rounds_on_a_full_disk_says_the_stopped_jobs_start_again(sbibm, tmp_path, full_disk):
    # Typed: sbibm.py run --rounds 2 --root <a full disk>. Was: "... continues the stopped ones", but a sequential
    # job's rounds keep no checkpoint: run moves a stopped one aside and starts it again.
    root = tmp_path / "root"
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(root), "--tasks", "two_moons", "--budgets", "1000", "--rounds", "2"])
    assert str(stop.value).endswith("then run the same command again: it skips the finished jobs and starts the "
                                    "stopped ones again"), stop.value
    assert sorted(p.name for p in root.iterdir()) == []  # nothing half-written, no job started


@pytest.mark.slow
def test_table_on_a_full_disk_names_the_file_and_what_is_kept(sbibm, tmp_path, monkeypatch):
    # Round 43: sbibm.py table <root> --out <a full disk> was an OSError's traceback ("No space left on device").
    import errno
    import os

    import sbibm_tables

    out = _last_table(sbibm, tmp_path)
    write = sbibm_tables.write_atomic

    def full_at_the_third(path, data, **kwargs):
        if path.name == sbibm.OUTPUTS[2]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return write(path, data, **kwargs)

    monkeypatch.setattr(sbibm_tables, "write_atomic", full_at_the_third)
    with pytest.raises(SystemExit) as stop:
        sbibm.table([tmp_path / "r"], out)
    assert not isinstance(stop.value.code, int)  # a failure, not a refusal: exit 1, with the message
    assert str(stop.value) == (
        f"{out / 'sbibm_table.csv'} could not be written (No space left on device); sbibm_results.csv, sbibm_table.md "
        "written, the rest as they were, each whole; the scores are kept in the job folders: free space there (or "
        "make it writable), or pass another --out, then run the same command again")
    kept = {p.name: p.read_text(errors="replace") for p in out.iterdir() if ".previous" not in p.name}
    assert sorted(kept) == sorted(sbibm.OUTPUTS)  # no temporary file left (the previous table's copies: kept)
    assert [kept[n] == f"the last table's {n}" for n in sbibm.OUTPUTS] == [False, False, True, True]
    monkeypatch.setattr(sbibm_tables, "write_atomic", write)
    sbibm.table([tmp_path / "r"], out)  # the same command again, once there is room: all four written
    assert all((out / n).read_bytes() != f"the last table's {n}".encode() for n in sbibm.OUTPUTS)


def test_table_names_rows_made_with_different_settings(sbibm, tmp_path, capsys, monkeypatch):
    # Was silent: a 20-step row beside a 20,000-step one read as one recipe.
    fake_job(tmp_path / "a" / "job", "two_moons", 1000, scores((1, 0.6)), overrides=["mesh=none", "train.steps=20"])
    fake_job(tmp_path / "b" / "job", "slcp", 1000, scores((1, 0.9)), overrides=["mesh=none"])
    jobs = {}
    sbibm.collect([tmp_path], jobs)
    assert sbibm.settings_note(jobs) == (
        "rows made with different settings (beyond experiment=sbibm, the task and the budget): mesh=none in every "
        "row; besides it, two_moons 1,000: train.steps=20")
    # Written under the table itself (was stderr only: sbibm_table.md, read on its own, did not say).
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")  # the table's text is under test, not its plot
    text = sbibm.table([tmp_path], tmp_path / "out")
    assert text.splitlines()[-3:-1] == [sbibm.settings_note(jobs), ""]
    assert (tmp_path / "out" / "sbibm_table.md").read_text() == text
    fake_job(tmp_path / "a" / "job", "two_moons", 1000, scores((1, 0.6)), overrides=["mesh=none"])
    # One recipe, not the preset's alone: said once (was nothing, so a 20-step table read as the preset's).
    assert sbibm.settings_note(jobs) == ("every row made with settings beyond experiment=sbibm, the task and the "
                                         "budget: mesh=none")
    for job in ("a", "b"):
        (tmp_path / job / "job" / ".hydra" / "overrides.yaml").write_text("- experiment=sbibm\n")
    assert sbibm.settings_note(jobs) is None  # the preset alone: nothing to say


def test_table_says_a_setting_every_row_shares_once(sbibm):
    # Was: "two_moons 1,000: data.batch_size=64 mesh=none; two_moons 10,000: mesh=none; ..." (15 rows, mesh=none in
    # each): the settings that differ were lost in the list
    from sbibm_tables import settings_note

    note = settings_note({("two_moons", 1000): "data.batch_size=64 mesh=none", ("two_moons", 10000): "mesh=none",
                          ("slcp", 1000): "data.batch_size=64 mesh=none", ("sir", 10000): "mesh=none",
                          ("gaussian_linear_uniform", 10000): "model=transformer train.steps=6000 mesh=none",
                          ("sir", 10000, "sequential rounds=2 region=box margin=0.5"): ""})
    assert note == ("rows made with different settings (beyond experiment=sbibm, the task and the budget): mesh=none "
                    "in every row whose settings are recorded; besides it, two_moons 1,000: data.batch_size=64; "
                    "gaussian_linear_uniform 10,000: model=transformer train.steps=6000; slcp 1,000: data.batch_size=64; "
                    "sir 10,000 sequential rounds=2 region=box margin=0.5: not recorded")
    assert note.count("mesh=none") == 1
    # none shared: each row's own, the preset's alone named so
    assert settings_note({("two_moons", 1000): "train.steps=20", ("slcp", 1000): "none"}) == (
        "rows made with different settings (beyond experiment=sbibm, the task and the budget): two_moons 1,000: "
        "train.steps=20; slcp 1,000: none")
    # an override whose value holds a space is one setting, not split at it
    assert settings_note({("two_moons", 1000): "eval.observations=[1, 2] mesh=none", ("slcp", 1000): "mesh=none"}) \
        == ("rows made with different settings (beyond experiment=sbibm, the task and the budget): mesh=none in every "
            "row; besides it, two_moons 1,000: eval.observations=[1, 2]")
    # the same settings in another order (rows of a csv as written, unsorted): one recipe (was: "rows made with
    # different settings (...): mesh=none seed=1 in every row; besides it, ", nothing after it)
    assert settings_note({("two_moons", 1000): "mesh=none seed=1", ("slcp", 1000): "seed=1 mesh=none"}) == (
        "every row made with settings beyond experiment=sbibm, the task and the budget: mesh=none seed=1")


@pytest.mark.parametrize("recorded, named", [(["experiment=quick"], "experiment=quick"),
                                             ([], "experiment=null"),
                                             (["experiment=quick", "train.steps=10"], "experiment=quick train.steps=10")])
def test_table_names_a_job_of_another_preset_or_none(sbibm, tmp_path, monkeypatch, recorded, named):
    # Round 45: the table of an experiment=quick run (20 steps, 128 samples, 2 folds) or of a plain launch.py run
    # said nothing under it, or only its other overrides, so its row read as made with experiment=sbibm.
    job = tmp_path / "q"
    fake_job(job, "two_moons", 1000, scores((1, 0.97)))
    (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in ["data=two_moons", *recorded]))
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")  # the table's text is under test, not its plot
    text = sbibm.table([tmp_path], tmp_path / "out")
    note = f"every row made with settings beyond experiment=sbibm, the task and the budget: {named}"
    assert note in text.splitlines()
    rows = (tmp_path / "out" / "sbibm_results.csv").read_text().splitlines()
    assert rows[1].endswith(f',"{named}"') or rows[1].endswith(f",{named}"), rows
    # --from-results reads the settings back: the table rebuilt from that csv says the same
    rebuilt = sbibm.table_from_results(tmp_path / "out" / "sbibm_results.csv", tmp_path / "again")
    assert note in rebuilt.splitlines()

@pytest.mark.slow
def test_table_of_a_task_sbibm_lacks_says_not_published(sbibm, tmp_path, capsys):
    # Was a ValueError traceback ('my_task' is not in tuple): rows were sorted by sbibm's task list.
    fake_job(tmp_path / "a" / "job", "my_task", 1000, scores((1, 0.6)))
    fake_job(tmp_path / "b" / "job", "two_moons", 1000, scores((1, 0.7)))
    text = sbibm.table([tmp_path], tmp_path / "out")
    # One observation: no spread, said so (was "0.700 +- nan (1 obs.)").
    assert text.splitlines()[2:-2] == [
        "| two_moons | 1,000 | 0.700 (1 obs., no spread) | 0.666 (obs. 1) | 0.586 (SNPE, obs. 1) |",
        "| my_task | 1,000 | 0.600 (1 obs., no spread) | not published | not published |"]


@pytest.mark.slow
def test_table_keeps_a_row_saying_why_for_each_cell_it_cannot_count(sbibm, tmp_path, capsys, monkeypatch):
    # Was: each such (task, budget) was only named on stderr; sbibm_table.md/.csv and the plot just lacked its
    # row, which read as never asked. A (task, budget) asked of `run` but never started had no trace at all.
    # And the plot's title said every point was over 10 observations.
    import csv

    from matplotlib.figure import Figure
    from sbibm_jobs import record_asked

    drawn, savefig = [], Figure.savefig  # each panel's title and texts, as the PNG is saved
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: drawn.extend(
        (ax.get_title(), t.get_text()) for ax in fig.axes for t in ax.texts) or savefig(fig, *a, **k))

    root = tmp_path / "r"
    fake_job(root / "two_moons_1000" / "job", "two_moons", 1000, scores((1, 0.6), (2, 0.7)), observations=[1, 2])
    fake_job(root / "slcp_1000" / "job", "slcp", 1000, None, "preempted")
    fake_job(root / "sir_10000" / "job", "sir", 10000, scores((1, 0.6)), "error", observations=[1])
    fake_job(root / "gaussian_linear_10000" / "job", "gaussian_linear", 10000, HEADER + "1,0.96")
    fake_job(tmp_path / "other" / "job", "two_moons", 1000, None, "interrupted")  # its cell is counted elsewhere
    (tmp_path / "other" / "job" / "checkpoints" / "40").mkdir(parents=True)
    record_asked(root, ["two_moons", "slcp", "lotka_volterra"], [1000])
    text = sbibm.table([root, tmp_path / "other"], tmp_path / "out")
    assert text.splitlines()[2:-2] == [
        "| two_moons | 1,000 | 0.650 +- 0.071 (2 obs.) | 0.681 +- 0.021 (obs. 1, 2) "
        "| 0.575 +- 0.015 (SNPE, obs. 1, 2) |",
        "| gaussian_linear | 10,000 | not counted (damaged c2st.csv) | 0.552 +- 0.032 | 0.536 +- 0.006 (SNRE) |",
        "| slcp | 1,000 | not counted (status preempted) | 0.975 +- 0.013 | 0.921 +- 0.025 (SNLE) |",
        "| sir | 10,000 | not counted (status error) | 0.680 +- 0.135 | 0.561 +- 0.028 (SNPE) |",
        "| lotka_volterra | 1,000 | not counted (not run) | 0.999 +- 0.001 | 0.909 +- 0.046 (SNLE) |"]
    with open(tmp_path / "out" / "sbibm_table.csv", newline="") as f:
        rows = {(r["task"], r["num_simulations"]): (r["c2st_mean"], r["observations"], r["not_counted"])
                for r in csv.DictReader(f)}
    assert rows == {("two_moons", "1000"): ("0.6500", "2", ""),
                    ("gaussian_linear", "10000"): ("nan", "0", "damaged c2st.csv"),
                    ("slcp", "1000"): ("nan", "0", "status preempted"), ("sir", "10000"): ("nan", "0", "status error"),
                    ("lotka_volterra", "1000"): ("nan", "0", "not run")}
    assert sorted(drawn) == [("gaussian_linear", "10,000: not counted (damaged c2st.csv)"),
                             ("lotka_volterra", "1,000: not counted (not run)"),
                             ("sir", "10,000: not counted (status error)"),
                             ("slcp", "1,000: not counted (status preempted)"), ("two_moons", "2 obs.")]
    err = capsys.readouterr().err
    assert (f"not run: lotka_volterra at 1,000 simulations, asked of sbibm.py run under {root}, has no job folder "
            "there; run that command again to run it") in err
    assert f"left out {tmp_path / 'other' / 'job'}: status interrupted" in err  # named, though its cell has a row
    # What continues each, as sbibm.py run would: was "continue it with its overrides plus train.resume=auto ..." of
    # every one, which fails alike a job whose error was its own settings', and continues nothing without a checkpoint.
    said = {line.split(": ", 1)[0]: line.split("if any; ", 1)[1] for line in err.splitlines() if "if any; " in line}
    assert said == {
        f"left out {root / 'sir_10000' / 'job'}": "its error: boom: it broke; fix its cause (one of its overrides, if "
        "the error names one), then rerun it (sbibm.py run moves it aside and starts it again)",
        f"left out {root / 'slcp_1000' / 'job'}": "it saved no checkpoint: rerun it (sbibm.py run starts it again)",
        f"left out {tmp_path / 'other' / 'job'}": "continue it from its last checkpoint with its overrides plus "
        "train.resume=auto hydra.run.dir=<that folder> (sbibm.py run continues it so)"}


def test_table_of_a_stopped_multirun_keeps_a_row_for_each_job_it_never_started(sbibm, tmp_path, capsys,
                                                                             monkeypatch):
    # Was: `launch.py -m experiment=sbibm` stopped during its first job: the table held no trace of the rest.
    sweep = tmp_path / "multirun"
    fake_job(sweep / "0", "two_moons", 1000, scores((1, 0.6)))
    (sweep / "multirun.yaml").write_text(
        "hydra:\n  sweep:\n    dir: multirun\n    subdir: ${hydra.job.num}\n  sweeper:\n    params:\n"
        "      data: two_moons,slcp\n      data.num_simulations: 1000,10000\n"
        "  overrides:\n    task:\n    - experiment=sbibm\n    - data.num_simulations=1000\n    - mesh=none\n")
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")  # the table's text is under test, not its plot
    text = sbibm.table([sweep], tmp_path / "out")
    assert text.splitlines()[2:-2] == ["| two_moons | 1,000 | 0.600 (1 obs., no spread) | 0.666 (obs. 1) | "
                                       "0.586 (SNPE, obs. 1) |",
                                       "| slcp | 1,000 | not counted (not run) | 0.975 +- 0.013 "
                                       "| 0.921 +- 0.025 (SNLE) |"]
    assert (f"not run: slcp at 1,000 simulations, a job of the multirun {sweep}, has no job folder there; its "
            "command with train.resume=auto runs it") in capsys.readouterr().err


def test_run_records_what_it_was_asked_before_any_job(sbibm, tmp_path, monkeypatch):
    jobs = FakeJobs(ctrl_c=True)  # stopped during its first job: slcp never starts
    monkeypatch.setattr(subprocess, "Popen", jobs)
    (tmp_path / "sbibm_asked.json").write_text('{"cells": [["sir", 10000]]}')  # an earlier run's, kept
    with pytest.raises(SystemExit):
        sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "slcp", "--budgets", "1000", "--",
                    "mesh=none"])
    assert len(jobs.commands) == 1
    assert json.loads((tmp_path / "sbibm_asked.json").read_text()) == {
        "cells": [["sir", 10000], ["slcp", 1000], ["two_moons", 1000]]}


PUBLISHED = REPO / "benchmarks" / "sbibm_published.csv"


def test_table_names_the_source_of_sbibm_numbers_and_reads_them_as_published(sbibm, tmp_path, monkeypatch):
    # Was: sbibm_table.md gave sbibm's columns with no word of where they come from.
    fake_job(tmp_path / "a" / "job", "gaussian_mixture", 100000, scores((1, 0.6)))
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")  # the table's text is under test, not its plot
    text = sbibm.table([tmp_path], tmp_path / "out")
    assert text.splitlines()[2:] == [
        "| gaussian_mixture | 100,000 | 0.600 (1 obs., no spread) | 0.567 (obs. 1) | 0.529 (SNRE, obs. 1) |", "",
        "sbibm NPE and best: Lueckmann et al. 2021, github.com/sbi-benchmark/results, benchmarking_sbi/results/"
        "main_paper.csv at commit 741183cdece7077453efbedac0fad7e74afa10e5 and, for gaussian_mixture, "
        "gaussian_mixture_rerun/results/gaussian_mixture_rerun.csv, the task as sbibm 1.1.0 fixed it "
        "(benchmarks/sbibm_published.csv)."]
    paper, _ = sbibm.published()
    assert len(paper) == 24 and {k: paper[("slcp", 10000)][k] for k in ("npe_mean", "best_algorithm", "best_mean")} \
        == {"npe_mean": "0.9006", "best_algorithm": "SNLE", "best_mean": "0.7131"}


@pytest.mark.parametrize("edit, message", [
    # Were: a KeyError traceback from the plot (a row lost), the last of two rows silently kept, numbers
    # printed as read (columns swapped: "best" worse than NPE), and a table whose source was nowhere.
    (lambda s: s.replace("slcp,10000,0.9006,0.0474,SNLE,0.7131,0.0524\n", ""), "lacks slcp 10000; restore it"),
    (lambda s: s + "slcp,10000,0.9006,0.0474,SNLE,0.7131,0.0524\n", "line 33: slcp at 10000 simulations a second time"),
    (lambda s: s.replace("slcp,10000,0.9006,0.0474,SNLE,0.7131", "slcp,10000,0.7131,0.0474,SNLE,0.9006"),
     "line 22 ('slcp,10000,0.7131,0.0474,SNLE,0.9006,0.0524') is not a row of sbibm's C2ST"),
    (lambda s: s.replace("slcp,10000,0.9006,0.0474,SNLE", "slcp,10000,0.9006,0.0474,SNLX"), "line 22"),
    (lambda s: s.replace("slcp,10000,0.9006,0.0474,SNLE,0.7131,0.0524", "slcp,10000,0.9006"), "line 22"),
    (lambda s: s.replace("# Source:", "# From:"), "has no '# Source:' line naming where its numbers come from"),
    (lambda s: s.replace("npe_mean,npe_sd", "npe_sd,npe_mean"), "its header is ['task', 'num_simulations', 'npe_sd'"),
])
def test_a_damaged_published_csv_is_named_by_its_line(sbibm, tmp_path, monkeypatch, edit, message):
    copy = tmp_path / "sbibm_published.csv"
    copy.write_text(edit(PUBLISHED.read_text()))
    monkeypatch.setattr(sbibm, "PUBLISHED", copy)
    with pytest.raises(SystemExit) as stop:
        sbibm.published()
    assert str(stop.value).startswith(str(copy)) and message in str(stop.value)
    assert str(stop.value).endswith(f"restore it (git checkout -- sbibm_published.csv, in {tmp_path})")


def test_gensbi_scale_table_names_a_failed_dry_run_job_by_its_overrides(tmp_path, monkeypatch):
    # Was "job {'name': 'tensor', 'embed': None, ...} failed": the rule's whole config, no mesh.
    spec = importlib.util.spec_from_file_location("gensbi_scale_script", REPO / "benchmarks" / "gensbi_scale.py")
    scale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scale)

    def sweep(cmd, **kwargs):  # the dry-run sweep's job folders, one failed
        out = Path(next(a for a in cmd if a.startswith("hydra.sweep.dir=")).split("=", 1)[1])
        for k, (rule, axis, status) in enumerate([("fsdp", 1, "ok"), ("tensor", 8, "error")]):
            (out / str(k)).mkdir()
            (out / str(k) / "metrics.json").write_text(json.dumps({
                "status": status, "error": "ConfigError: 12 heads over 8", "rule": rule,
                "config": {"rule": {"name": rule, "embed": None}, "mesh": {"model_axis": axis}}}))
        return subprocess.CompletedProcess(cmd, 1, "", "")

    monkeypatch.setattr(scale.subprocess, "run", sweep)
    with pytest.raises(SystemExit) as stop:
        scale.table(argparse.Namespace(timeout=60))
    assert str(stop.value) == ("1 of 2 dry-run jobs failed: rule=tensor mesh.model_axis=8: ConfigError: 12 heads "
                               "over 8")


@pytest.mark.parametrize("argv, message", [
    # argparse alone said "invalid choice: 'train.steps=20'", which does not say where overrides go
    (["--tasks", "two_moons", "train.steps=20"], "argument --tasks: 'train.steps=20' is an override, not a value "
                                                 "of --tasks: put overrides after --, e.g. --tasks ... -- train.steps=20"),
    (["--budgets", "1000", "train.steps=20"], "argument --budgets: 'train.steps=20' is an override"),
    (["--tasks", "two_mons"], "argument --tasks: 'two_mons' is not one of two_moons, gaussian_linear,"),
    # the nearest task named, as launch.py names a mistyped data= (was: the list alone)
    (["--tasks", "slpc", "two_moons"], "'slpc' is not one of two_moons, gaussian_linear, gaussian_linear_uniform, "
                                       "gaussian_mixture, slcp, sir, lotka_volterra, bernoulli_glm; did you mean slcp?"),
    (["--budgets", "500"], "argument --budgets: '500' is not one of 1000, 10000, 100000"),
])
def test_sbibm_run_names_an_override_typed_before_the_double_dash(sbibm, tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path), *argv])
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before any job folder


def test_sbibm_plot_names_the_command_that_writes_the_plot(sbibm, capsys):
    # Was: "invalid choice: 'plot' (choose from 'run', 'table')", which did not say that table writes sbibm.png.
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["plot", "results/r1"])
    assert stop.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1].split(": ", 1)[1] == (
        "error: there is no plot command: table writes the plot (sbibm.png) beside the table, e.g. "
        "python benchmarks/sbibm.py table results/r1")


def _script_of(line, folder):
    """The script a command printed in ``line`` (``python <path> table ...``) runs when pasted in ``folder``."""
    words = line[line.index("python "):].split()
    return (folder / words[1]).resolve()


def test_printed_sbibm_commands_run_when_pasted_in_another_folder(sbibm, tmp_path, monkeypatch, capsys):
    # Was "e.g. sbibm.py table x" (no python) and "python benchmarks/sbibm.py table ...": pasted where the user
    # typed theirs, outside the checkout, neither ran ("can't open file .../benchmarks/sbibm.py").
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        sbibm.main(["plot", "r1"])
    assert _script_of(capsys.readouterr().err.strip().splitlines()[-1], tmp_path) == REPO / "benchmarks" / "sbibm.py"
    monkeypatch.setattr(subprocess, "Popen", FakeJobs())
    sbibm.main(["run", "--root", "r", "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    line = capsys.readouterr().err.strip()
    assert line.startswith("every job done;") and line.endswith(" table r")
    assert _script_of(line, tmp_path) == REPO / "benchmarks" / "sbibm.py"
    (tmp_path / "r" / "sub").mkdir()
    with pytest.raises(SystemExit) as stop:  # a --root inside another's: its refusal names that root's table
        sbibm.main(["run", "--root", "r/sub", "--tasks", "two_moons", "--budgets", "1000"])
    assert _script_of(str(stop.value), tmp_path) == REPO / "benchmarks" / "sbibm.py"


def test_sbibm_run_keeps_typed_tasks_and_budgets(sbibm, tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(sbibm, "run", lambda root, tasks, budgets, extra, **k: seen.update(t=tasks, b=budgets) or [])
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "slcp", "--budgets", "10000", "--", "train.steps=5"])
    assert seen == {"t": ["slcp"], "b": [10000]}  # budgets are ints, as the job folders' names need


def test_gensbi_scale_table_refuses_eager_which_only_init_reads(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("gensbi_scale_script", REPO / "benchmarks" / "gensbi_scale.py")
    scale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scale)
    monkeypatch.setattr(scale, "table", lambda args: pytest.fail("the sweep started"))
    monkeypatch.setattr(sys, "argv", ["gensbi_scale.py", "table", "--eager"])
    with pytest.raises(SystemExit) as stop:
        scale.main()
    assert stop.value.code == 2 and "--eager applies to init only" in capsys.readouterr().err


# ------------------------------------------------- sequential rounds (run --rounds 2): their own cells

@pytest.mark.parametrize("argv, message", [
    (["--rounds", "0"], "argument --rounds: 0 must be >= 1; pass --rounds 1 (amortised, the default) or --rounds 2"),
    (["--rounds", "two"], "argument --rounds: 'two' is not an integer; pass --rounds 1 (amortised, the default)"),
    (["--rounds", "2", "--region", "sphere"], "argument --region: 'sphere' is not one of box, ellipsoid; e.g. "
                                              "--region box"),
    (["--rounds", "2", "--margin", "-0.1"], "argument --margin: -0.1 must be a finite number >= 0, e.g. --margin 0.5"),
    (["--rounds", "2", "--margin", "nan"], "argument --margin: nan must be a finite number >= 0"),
    # Was (sequential.py alone): no such mix; here a margin with one round would be ignored, the table silent.
    (["--margin", "0.1"], "--margin 0.1 shapes the truncated rounds of a sequential run, but --rounds is 1 "
                          "(amortised); pass --rounds 2 (or more) with it, or leave --margin 0.1 out"),
    (["--region", "ellipsoid"], "--region ellipsoid shapes the truncated rounds of a sequential run"),
    # Round 1 trains on a quarter of 1,000: 225 training pairs, under the preset's batch of 256.
    (["--rounds", "4"], "two_moons: --budgets 1000 in --rounds 4 gives 250 simulations a round, too few for round "
                        "1's training (284 needed: data.batch_size=256 training pairs after data.val_fraction=0.1 "
                        "is held out); pass --budgets 10000 or --rounds 3 or -- data.batch_size=225"),
])
def test_run_refuses_bad_sequential_options_before_any_job(sbibm, tmp_path, monkeypatch, capsys, argv, message):
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path / "r"), "--tasks", "two_moons", "--budgets", "1000", *argv,
                    "--", "mesh=none"])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert jobs.commands == [] and not (tmp_path / "r").exists()


def test_run_and_table_keep_sequential_and_amortised_cells_of_one_task_and_budget_apart(sbibm, tmp_path, monkeypatch,
                                                                                       capsys):
    """A finished amortised two_moons 1000 is no reason to skip its sequential cell, nor the reverse; each kind is
    skipped once done, lands in its own table row and in the results csv with its method; a sequential job found in
    an amortised cell's folder is neither counted as done nor rerun."""
    from sbibm_method import Method, read_results

    fake_job(tmp_path / "two_moons_1000" / "job", "two_moons", 1000, scores((1, 0.7)), overrides=["mesh=none"])
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    for check in ("extra_problem", "sequential_problem"):  # checked in their own tests; each composes configs
        monkeypatch.setattr(sbibm, check, lambda *a: None)
    sequential = ["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--rounds", "2",
                  "--region", "ellipsoid", "--margin", "0.1", "--", "mesh=none"]
    sbibm.main(sequential)
    assert len(jobs.commands) == 1 and jobs.commands[0][1].endswith("benchmarks/sequential.py")
    assert jobs.commands[0][2:] == ["--job", str(tmp_path / "two_moons_1000_sequential-2-ellipsoid-0.1" / "job"),
                                    "--task", "two_moons", "--budget", "1000", "--rounds", "2", "--region",
                                    "ellipsoid", "--margin", "0.1", "--", "mesh=none"]
    sbibm.main(sequential)  # done: skipped, as the amortised one is
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    out = capsys.readouterr().out
    assert len(jobs.commands) == 1
    assert "two_moons 1000 (sequential rounds=2 region=ellipsoid margin=0.1): done, skipped" in out
    assert "two_moons 1000: done, skipped" in out
    # Another margin is another cell: run, in its own folder, the first kept.
    sbibm.main([*sequential[:-3], "0.2", "--", "mesh=none"])
    assert len(jobs.commands) == 2 and "two_moons_1000_sequential-2-ellipsoid-0.2" in jobs.commands[1][3]
    assert json.loads((tmp_path / "sbibm_asked.json").read_text())["cells"] == [
        ["two_moons", 1000], ["two_moons", 1000, "sequential rounds=2 region=ellipsoid margin=0.1"],
        ["two_moons", 1000, "sequential rounds=2 region=ellipsoid margin=0.2"]]

    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")  # the table's text is under test, not its plot
    text = sbibm.table([tmp_path], tmp_path / "out")
    assert text.splitlines()[2:5] == [
        "| two_moons | 1,000 | 0.700 (1 obs., no spread) | 0.666 (obs. 1) | 0.586 (SNPE, obs. 1) |",
        "| two_moons, sequential: 2 rounds per observation, ellipsoid, margin 0.1 | 1,000 per observation | 0.600 "
        "(1 obs., no spread) | 0.666 (obs. 1) | 0.586 (SNPE, obs. 1) |",
        "| two_moons, sequential: 2 rounds per observation, ellipsoid, margin 0.2 | 1,000 per observation | 0.600 "
        "(1 obs., no spread) | 0.666 (obs. 1) | 0.586 (SNPE, obs. 1) |"]
    rows = read_results(tmp_path / "out" / "sbibm_results.csv")
    assert [(r["c2st"], r["method"]) for r in rows] == [
        ("0.700000", "amortised"), ("0.600000", "sequential rounds=2 region=ellipsoid margin=0.1"),
        ("0.600000", "sequential rounds=2 region=ellipsoid margin=0.2")]
    assert Method.from_label(rows[1]["method"]) == Method(2, "ellipsoid", 0.1)
    summary = (tmp_path / "out" / "sbibm_table.csv").read_text().splitlines()
    assert summary[0].endswith(",not_counted,method") and summary[2].endswith(
        ",,sequential rounds=2 region=ellipsoid margin=0.1")

    # A sequential job moved into the amortised cell's folder: named, not skipped as done, not moved aside.
    aside = tmp_path / "elsewhere"
    (tmp_path / "two_moons_1000").rename(aside)
    (tmp_path / "two_moons_1000_sequential-2-ellipsoid-0.1").rename(tmp_path / "two_moons_1000")
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "--budgets", "1000", "--", "mesh=none"])
    assert len(jobs.commands) == 2 and "finished with other settings" in str(stop.value)
    assert ("two_moons 1000: finished with other settings (made sequential rounds=2 region=ellipsoid margin=0.1, "
            "asked amortised)") in capsys.readouterr().out
    assert (tmp_path / "two_moons_1000" / "job" / "sequential.json").is_file()


def test_a_results_csv_without_the_method_column_reads_as_amortised(sbibm, tmp_path):
    """``sbibm_results.csv`` written before the method column (the committed one was) still loads, its rows
    amortised; rows of the new form keep their method."""
    from sbibm_method import read_results

    old = tmp_path / "old.csv"
    old.write_text("task,num_simulations,observation,c2st,c2st_sd_folds\nsir,10000,1,0.545950,0.004000\n")
    new = tmp_path / "new.csv"
    new.write_text("task,num_simulations,observation,c2st,c2st_sd_folds,method\n"
                   "sir,10000,1,0.545950,0.004000,amortised\n"
                   "sir,10000,1,0.547850,0.002865,sequential rounds=2 region=box margin=0.5\n")
    assert read_results(old) == [{"task": "sir", "num_simulations": "10000", "observation": "1", "c2st": "0.545950",
                                  "c2st_sd_folds": "0.004000", "method": "amortised"}]
    assert [r["method"] for r in read_results(new)] == ["amortised", "sequential rounds=2 region=box margin=0.5"]
    seq = importlib.util.spec_from_file_location("sequential_job", REPO / "benchmarks" / "sequential.py")
    module = importlib.util.module_from_spec(seq)
    seq.loader.exec_module(module)
    assert module.amortised_scores("sir", 10000, old) == module.amortised_scores("sir", 10000, new) == {1: 0.54595}


@pytest.mark.parametrize("record, why", [
    ('{"rounds": 1, "region": "box", "margin": 0.5}', "holds {'rounds': 1, 'region': 'box', 'margin': 0.5}, not a "
                                                      "sequential method (rounds >= 2, region box or ellipsoid)"),
    ('{"rounds": 2, "region": "box"', "cannot be read (JSONDecodeError: "),
    ('{"rounds": 2, "region": "box"}', "cannot be read (KeyError: 'margin'), so how it was made is unknown"),
])
def test_table_leaves_out_a_job_whose_sequential_record_is_damaged(sbibm, tmp_path, capsys, record, why):
    """Which row such a job belongs to (amortised, or which sequential method) is unknown: counted in none."""
    fake_job(tmp_path / "j", "sir", 10000, scores((1, 0.6)))
    (tmp_path / "j" / "sequential.json").write_text(record)
    assert sbibm.collect([tmp_path]) == {}
    assert f"left out {tmp_path / 'j'}: its {tmp_path / 'j' / 'sequential.json'} {why}" in capsys.readouterr().err


def test_a_stopped_sequential_job_is_started_again_not_continued(sbibm, tmp_path, monkeypatch, capsys):
    """Its rounds keep no checkpoint: ``train.resume=auto`` would mean nothing to it. ``table`` says so too."""
    cell = tmp_path / "sir_10000_sequential-2-box-0.5"
    fake_job(cell / "job", "sir", 10000, None, "stopped", overrides=["mesh=none"])
    (cell / "job" / "sequential.json").write_text('{"rounds": 2, "region": "box", "margin": 0.5}')
    fake_job(tmp_path / "sir_10000" / "job", "sir", 10000, scores((1, 0.6)))  # a table needs one finished job
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")
    text = sbibm.table([tmp_path], tmp_path / "out")
    assert "| sir, sequential: 2 rounds per observation, box, margin 0.5 | 10,000 per observation | not counted " \
           "(status stopped) |" in text
    assert "status stopped, so its C2ST covers only the observations scored before it stopped, if any; sbibm.py run " \
           "with its --rounds, --region and --margin starts it again" in capsys.readouterr().err
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    monkeypatch.setattr(sbibm, "sequential_problem", lambda *a: None)  # sir's config is composed elsewhere
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "sir", "--budgets", "10000", "--rounds", "2", "--",
                "mesh=none"])
    assert len(jobs.commands) == 1 and "train.resume=auto" not in jobs.commands[0]
    assert [p.name.split(".failed-")[0] for p in tmp_path.glob("*.failed-*")] == [cell.name]  # kept aside


@pytest.mark.parametrize("rounds, status", [("1", "error"), ("2", "stopped")])
def test_a_job_moved_aside_to_run_again_is_said_with_where_it_went(sbibm, tmp_path, monkeypatch, capsys, rounds,
                                                                    status):
    # Was silent: a failed job, or a sequential one stopped by Ctrl-C, became <cell>.failed-<time> without a word.
    cell = tmp_path / ("sir_10000" if rounds == "1" else "sir_10000_sequential-2-box-0.5")
    fake_job(cell / "job", "sir", 10000, None, status, overrides=["mesh=none"])
    if rounds == "2":
        (cell / "job" / "sequential.json").write_text('{"rounds": 2, "region": "box", "margin": 0.5}')
    monkeypatch.setattr(subprocess, "Popen", FakeJobs())
    monkeypatch.setattr(sbibm, "sequential_problem", lambda *a: None)  # sir's config is composed elsewhere
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "sir", "--budgets", "10000", "--rounds", rounds, "--",
                "mesh=none"])
    [aside] = tmp_path.glob("*.failed-*")
    label = "" if rounds == "1" else " (sequential rounds=2 region=box margin=0.5)"
    assert f"sir 10000{label}: status {status}: its folder kept aside as {aside}; starting it again\n" in \
        capsys.readouterr().out


# ------------------------------------------------- table --from-results: the committed csv rebuilds the table

def _rows_for_the_table(tmp_path):
    """Job folders of two amortised cells (other settings each) and a sequential one; the plot's inputs kept."""
    fake_job(tmp_path / "jobs" / "a" / "job", "two_moons", 1000, scores((2, 0.71), (1, 0.7)), overrides=["mesh=none"])
    fake_job(tmp_path / "jobs" / "b" / "job", "slcp", 10000, scores((1, 0.9)), overrides=["train.steps=20"])
    fake_job(tmp_path / "jobs" / "c" / "job", "sir", 10000, scores((1, 0.55), (2, 0.56)), overrides=["mesh=none"])
    (tmp_path / "jobs" / "c" / "job" / "sequential.json").write_text('{"rounds": 2, "region": "box", "margin": 0.5}')
    return lambda cells, paper, left_out: repr((sorted(cells.items()), left_out)).encode()  # what the PNG shows


def test_a_table_rebuilt_from_its_results_csv_is_the_job_folders_table(sbibm, tmp_path, monkeypatch):
    # Was impossible: the committed table and plot could be made only from job folders (hours of training),
    # so they fell out of step with the committed sbibm_results.csv.
    monkeypatch.setattr(sbibm, "plot", _rows_for_the_table(tmp_path))
    made = sbibm.table([tmp_path / "jobs"], tmp_path / "a")
    results = (tmp_path / "a" / "sbibm_results.csv").read_text()
    assert results.splitlines() == [
        "task,num_simulations,observation,c2st,c2st_sd_folds,method,settings",
        "two_moons,1000,1,0.700000,0.010000,amortised,mesh=none", "two_moons,1000,2,0.710000,0.010000,amortised,mesh=none",
        "slcp,10000,1,0.900000,0.010000,amortised,train.steps=20",
        "sir,10000,1,0.550000,0.010000,sequential rounds=2 region=box margin=0.5,mesh=none",
        "sir,10000,2,0.560000,0.010000,sequential rounds=2 region=box margin=0.5,mesh=none"]
    sbibm.main(["table", "--from-results", str(tmp_path / "a" / "sbibm_results.csv"), "--out", str(tmp_path / "b")])
    for name in sbibm.OUTPUTS:  # the plot's too: the same cells, the same rows
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes(), name
    assert made.splitlines()[2:5] == [
        "| two_moons | 1,000 | 0.705 +- 0.007 (2 obs.) | 0.681 +- 0.021 (obs. 1, 2) "
        "| 0.575 +- 0.015 (SNPE, obs. 1, 2) |",
        "| slcp | 10,000 | 0.900 (1 obs., no spread) | 0.944 (obs. 1) | 0.702 (SNLE, obs. 1) |",
        "| sir, sequential: 2 rounds per observation, box, margin 0.5 | 10,000 per observation | 0.555 +- 0.007 "
        "(2 obs.) | 0.925 +- 0.039 (obs. 1, 2) | 0.535 +- 0.012 (SNPE, obs. 1, 2) |"]
    assert "two_moons 1,000: mesh=none; slcp 10,000: train.steps=20; sir 10,000 sequential rounds=2 region=box " \
           "margin=0.5: mesh=none" in made
    # In place (--out defaults to the csv's folder): the same four files; a csv without the settings column
    # (as the committed one was first) keeps none and says they are not recorded.
    sbibm.main(["table", "--from-results", str(tmp_path / "a" / "sbibm_results.csv")])
    assert {n: (tmp_path / "a" / n).read_bytes() for n in sbibm.OUTPUTS} == \
        {n: (tmp_path / "b" / n).read_bytes() for n in sbibm.OUTPUTS}
    old = (tmp_path / "old" / "sbibm_results.csv")
    old.parent.mkdir()
    old.write_bytes("".join(",".join(line.split(",")[:6]) + "\r\n" for line in results.splitlines()).encode())
    text = sbibm.table_from_results(old, old.parent)
    assert old.read_text().splitlines() == [",".join(line.split(",")[:6]) for line in results.splitlines()]
    assert text.splitlines()[2:5] == made.splitlines()[2:5] and "settings column" in text.splitlines()[-3]


def test_a_table_rebuilt_from_its_results_csv_keeps_the_rows_not_counted(sbibm, tmp_path, monkeypatch):
    # Was: sbibm_results.csv held scores only, so --from-results of a table with a stopped sequential job, or a cell
    # asked but never run, dropped their 'not counted (...)' rows from the table, its csv and the plot.
    from sbibm_jobs import record_asked

    monkeypatch.setattr(sbibm, "plot", _rows_for_the_table(tmp_path))
    cell = tmp_path / "jobs" / "sir_10000_sequential-2-box-0.1"
    fake_job(cell / "job", "sir", 10000, None, "stopped", overrides=["mesh=none"])
    (cell / "job" / "sequential.json").write_text('{"rounds": 2, "region": "box", "margin": 0.1}')
    record_asked(tmp_path / "jobs", ["gaussian_linear"], [1000])
    made = sbibm.table([tmp_path / "jobs"], tmp_path / "a")
    results = (tmp_path / "a" / "sbibm_results.csv").read_text().splitlines()
    assert results[0] == "task,num_simulations,observation,c2st,c2st_sd_folds,method,settings,not_counted"
    assert results[3:7] == ["gaussian_linear,1000,,,,amortised,,not run",
                            "slcp,10000,1,0.900000,0.010000,amortised,train.steps=20,",
                            "sir,10000,,,,sequential rounds=2 region=box margin=0.1,,status stopped",
                            "sir,10000,1,0.550000,0.010000,sequential rounds=2 region=box margin=0.5,mesh=none,"]
    assert "| gaussian_linear | 1,000 | not counted (not run) | 0.695 +- 0.044 | 0.628 +- 0.031 (SNLE) |" in made
    sbibm.main(["table", "--from-results", str(tmp_path / "a" / "sbibm_results.csv"), "--out", str(tmp_path / "b")])
    for name in sbibm.OUTPUTS:  # the plot's inputs too: the same cells, the same rows not counted
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes(), name
    # A not-counted row that holds a score, or a cell both scored and not counted, is refused, naming its line.
    csv_path = tmp_path / "c" / "sbibm_results.csv"
    csv_path.parent.mkdir()
    for bad in ("gaussian_linear,1000,1,0.6,0.01,amortised,,not run",
                "sir,10000,,,,sequential rounds=2 region=box margin=0.5,mesh=none,status stopped"):
        csv_path.write_text("\n".join([*results, bad]) + "\n")
        with pytest.raises(SystemExit, match=rf"line {len(results) + 1} .* is counted and not counted"):
            sbibm.table_from_results(csv_path, tmp_path / "d")
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("there, message", [
    # Was: nothing stopped a rebuild from replacing the only record of hours of training with other rows.
    ("task,num_simulations,observation,c2st,c2st_sd_folds,method\r\nsir,10000,3,0.6,0.01,amortised\r\n",
     "{out}/sbibm_results.csv holds other rows than those of {src} (line 1: 'task,num_simulations,observation,c2st,"
     "c2st_sd_folds,method' would become 'task,num_simulations,observation,c2st,c2st_sd_folds,method,settings'); "
     "wrote nothing: pass another --out"),
    (None, "rebuilding {src} in place would change it (line 2: 'slcp,10000,1,0.9,0.01,amortised,none' would "
           "become 'two_moons,1000,1,0.7,0.01,amortised,none'); wrote nothing: pass another --out"),
])
def test_table_from_results_never_overwrites_another_results_csv(sbibm, tmp_path, monkeypatch, there, message):
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")
    header = "task,num_simulations,observation,c2st,c2st_sd_folds,method,settings\r\n"
    src = tmp_path / "in" / "sbibm_results.csv"  # out of the table's order: rebuilt, its rows move
    src.parent.mkdir()
    src.write_bytes((header + "slcp,10000,1,0.9,0.01,amortised,none\r\ntwo_moons,1000,1,0.7,0.01,amortised,none\r\n")
                    .encode())
    out = tmp_path / "out" if there else src.parent
    if there:
        out.mkdir()
        (out / "sbibm_results.csv").write_bytes(there.encode())
    before = {p: p.read_bytes() for p in (src, out / "sbibm_results.csv")}
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["table", "--from-results", str(src), "--out", str(out)])
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value) == message.format(out=out, src=src)
    assert {p: p.read_bytes() for p in before} == before and sorted(p.name for p in out.iterdir()) == \
        ["sbibm_results.csv"]


@pytest.mark.parametrize("text, message", [
    (None, "--from-results {src} does not exist: pass the sbibm_results.csv that sbibm.py table wrote (e.g. "
           "benchmarks/results/sbibm_results.csv)"),
    ("", "{src} lacks the column(s) task, num_simulations, observation, c2st, c2st_sd_folds (its header: None); a "
         "sbibm_results.csv has task, num_simulations, observation, c2st, c2st_sd_folds[, method, settings]: pass the "
         "sbibm_results.csv that sbibm.py table wrote, or make the table from the job folders"),
    ("task,num_simulations,observation,c2st\nsir,10000,1,0.6\n", "{src} lacks the column(s) c2st_sd_folds (its "
     "header: ['task', 'num_simulations', 'observation', 'c2st'])"),
    ("task,num_simulations,observation,c2st,c2st_sd_folds\n", "{src} holds no row (it is empty, or its header only)"),
    ("task,num_simulations,observation,c2st,c2st_sd_folds\ntwo_moon,1000,1,0.6,0.01\n", "{src} line 2: task "
     "'two_moon' is not one of sbibm's published table (two_moons, gaussian_linear, gaussian_linear_uniform, "
     "gaussian_mixture, slcp, sir, lotka_volterra, bernoulli_glm); correct its name, or make the table from its "
     "job folders (python benchmarks/sbibm.py table <folders>), which lists it as not published"),
    ("task,num_simulations,observation,c2st,c2st_sd_folds\nsir,10000,1,abc,0.01\n", "{src} line 2 ('sir,10000,1,"
     "abc,0.01') is not a row of task, num_simulations, observation, c2st, c2st_sd_folds, method"),
    ("task,num_simulations,observation,c2st,c2st_sd_folds\nsir,10000,1,1.6,0.01\n", "{src} line 2 ('sir,10000,1,"
     "1.6,0.01') is not a C2ST row (a positive budget, c2st in [0, 1]"),
    ("task,num_simulations,observation,c2st,c2st_sd_folds,method\nsir,10000,1,0.6,0.01,sequential rounds=2\n",
     "{src} line 2 ('sir,10000,1,0.6,0.01,sequential rounds=2') is not a row of"),
    ("task,num_simulations,observation,c2st,c2st_sd_folds\nsir,10000,1,0.6,0.01\nsir,10000,1,0.7,0.01\n",
     "{src} line 3: observation 1 of sir at 10,000 simulations a second time (one table row averages one run); "
     "keep one of its rows"),
    ("task,num_simulations,observation,c2st,c2st_sd_folds,method,settings\nsir,10000,1,0.6,0.01,amortised,none\n"
     "sir,10000,2,0.6,0.01,amortised,train.steps=20\n", "{src} line 3: settings 'train.steps=20', but 'none' in the "
     "rows of sir at 10,000 simulations before it"),
])
def test_table_from_a_bad_results_csv_names_it_and_writes_nothing(sbibm, tmp_path, text, message):
    src = tmp_path / "in" / "sbibm_results.csv"
    src.parent.mkdir()
    if text is not None:
        src.write_text(text)
    with pytest.raises(SystemExit) as stop:
        sbibm.main(["table", "--from-results", str(src), "--out", str(tmp_path / "out")])
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value).startswith(message.format(src=src)) and "\n" not in str(stop.value)
    assert not (tmp_path / "out").exists() and [p.name for p in src.parent.iterdir()] == ([] if text is None else
                                                                                           [src.name])


@pytest.mark.parametrize("argv, message", [
    (["table"], "pass the job folders, or --from-results <sbibm_results.csv>"),
    (["table", "r", "--from-results", "x.csv"], "pass job folders (r) or --from-results x.csv, not both"),
])
def test_table_takes_job_folders_or_a_results_csv(sbibm, tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        sbibm.main(argv)
    assert stop.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_table_from_job_folders_never_drops_rows_of_the_results_csv_it_writes_over(sbibm, tmp_path, monkeypatch):
    # Was: `table benchmarks/results` after one new job there replaced the committed 143 rows with that job's.
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")
    out = tmp_path / "out"
    out.mkdir()
    kept = ("task,num_simulations,observation,c2st,c2st_sd_folds,method\r\ntwo_moons,1000,1,0.5,0.01,amortised\r\n"
            "sir,10000,1,0.55,0.01,sequential rounds=2 region=box margin=0.5\r\n"
            "sir,10000,2,0.56,0.01,sequential rounds=2 region=box margin=0.5\r\n")
    (out / "sbibm_results.csv").write_bytes(kept.encode())
    fake_job(tmp_path / "r" / "a" / "job", "two_moons", 1000, scores((1, 0.7)))
    with pytest.raises(SystemExit) as stop:
        sbibm.table([tmp_path / "r"], out)
    there = out / "sbibm_results.csv"
    assert stop.value.code == 2  # a refusal of the arguments: argparse's code (was: 1)
    assert str(stop.value) == (
        f"{there} holds 2 row(s) these job folders do not make (sir at 10,000 simulations per observation (sequential "
        "rounds=2 region=box margin=0.5), observation 1; sir at 10,000 simulations per observation (sequential "
        f"rounds=2 region=box margin=0.5), observation 2), which writing it would lose; wrote nothing: pass another "
        f"--out, or move {there} aside (python benchmarks/sbibm.py table --from-results <it> --out <another folder> "
        "rebuilds its table)")
    assert there.read_bytes() == kept.encode() and [p.name for p in out.iterdir()] == ["sbibm_results.csv"]
    # Every row made again (the amortised one rerun, other scores): written over, as before.
    fake_job(tmp_path / "r" / "c" / "job", "sir", 10000, scores((1, 0.55), (2, 0.56)))
    (tmp_path / "r" / "c" / "job" / "sequential.json").write_text('{"rounds": 2, "region": "box", "margin": 0.5}')
    sbibm.table([tmp_path / "r"], out)
    assert [line.split(",")[3] for line in there.read_text().splitlines()[1:]] == ["0.700000", "0.550000", "0.560000"]


def test_a_job_whose_weights_failed_its_evaluation_is_left_out_with_the_commands_that_get_past_it(sbibm, tmp_path,
                                                                                                   capsys):
    # Was: "its error: ...; fix its cause (one of its overrides, ...), then rerun it (sbibm.py run moves it aside and
    # starts it again)": a rerun trains the same weights and fails alike; the commands were cut at 200 characters.
    from sbibm_collect import collect

    from gensbi_sharding.harness.weights_failure import FAILED_WEIGHTS

    job = tmp_path / "r" / "slcp_1000" / "job"
    fake_job(job, "slcp", 1000, None, "error", observations=[1])
    (job / "checkpoints" / "40").mkdir(parents=True)
    commands = (f"; checkpoint {job}/checkpoints/40 {FAILED_WEIGHTS}, which the same command would sample again: "
                f"train them further in this folder with: python launch.py experiment=sbibm data=slcp "
                f"data.num_simulations=1000 train.steps=80 train.resume=auto hydra.run.dir={job}; or train afresh "
                f"through the prior's bijection in a new folder: python launch.py experiment=sbibm data=slcp "
                f"data.num_simulations=1000 data.theta_transform=support hydra.run.dir={job}-support")
    cause = "SamplingError: only 0.00% of 12800 posterior draws lie inside the prior's support"
    (job / "metrics.json").write_text(json.dumps({"status": "error", "error": cause + commands}))
    assert collect([tmp_path / "r"]) == {}
    said = capsys.readouterr().err.split("if any; ", 1)[1].strip()
    assert said == (f"its weights failed its evaluation: {cause}; a rerun (sbibm.py run) trains the same weights and "
                    f"fails alike{commands}")


def test_a_left_out_jobs_long_error_is_cut_between_words_never_inside_a_quoted_path(sbibm, tmp_path, capsys):
    # Was: "its error: OSError: ... cannot write to file \"/data/.../ckpt_arrays_m; fix its cause ...": the error cut at
    # its 200th character, inside a quoted path (an unclosed quote, half a path). Now cut between words, " ..." after.
    from sbibm_collect import collect

    job = tmp_path / "r" / "slcp_1000" / "job"
    fake_job(job, "slcp", 1000, None, "error", observations=[1])
    path = "/data/" + "/".join(f"folder_{i:02d}" for i in range(12)) + "/checkpoints/40/arrays/manifest.ocdbt"
    lead = "OSError: the checkpoint of this job could not be written, after three tries of its saving thread,"
    error = f'{lead} to file "{path}"\n  (errno 28: no space left on device)'
    assert len(lead) < 200 < len(lead) + len(path)  # the old cut fell inside the path
    (job / "metrics.json").write_text(json.dumps({"status": "error", "error": error}))
    assert collect([tmp_path / "r"]) == {}
    said = capsys.readouterr().err.split("if any; ", 1)[1].strip()
    assert said == (f"its error: {lead} to file ...; fix its cause (one of its overrides, if the error names one), then "
                    "rerun it (sbibm.py run moves it aside and starts it again)"), said


def _job_extra(command):
    """The overrides a launch.py job command gives after its task and budget, its hydra.* folder ones left out."""
    start = next(i for i, a in enumerate(command) if a.startswith("data.num_simulations=")) + 1
    return [a for a in command[start:] if not a.startswith("hydra.")]


def test_run_gives_a_tasks_own_settings_to_that_tasks_jobs_only(sbibm, tmp_path, monkeypatch):
    # Was: every task's job ran the preset's MLP (gaussian_linear_uniform scores better with the transformer).
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "two_moons", "gaussian_linear_uniform", "--budgets",
                "10000", "--", "mesh=none"])
    assert [_job_extra(c) for c in jobs.commands] == [
        ["mesh=none"], ["model=transformer", "train.steps=6000", "mesh=none"]]
    # recorded with the job (table's settings column reads them from there)
    recorded = (tmp_path / "gaussian_linear_uniform_10000" / "job" / ".hydra" / "overrides.yaml").read_text()
    assert "- model=transformer\n- train.steps=6000\n- mesh=none\n" in recorded


@pytest.mark.slow
def test_a_tasks_own_settings_apply_only_at_the_budget_they_were_measured_at(sbibm, tmp_path, monkeypatch, capsys):
    # Was: the transformer measured at 10^4 ran at 10^3 and 10^5 too, where the table's rows are the MLP's.
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "gaussian_linear_uniform", "--budgets", "1000", "10000",
                "100000", "--", "mesh=none"])
    assert [_job_extra(c) for c in jobs.commands] == [
        ["mesh=none"], ["model=transformer", "train.steps=6000", "mesh=none"], ["mesh=none"]]
    assert "left out" not in capsys.readouterr().out


@pytest.mark.parametrize("given", [["model=mlp"], ["train.steps=500"], ["model=mlp", "train.steps=20000"]])
def test_a_key_given_after_the_double_dash_replaces_the_tasks_own_settings_whole(sbibm, tmp_path, monkeypatch, capsys,
                                                                                  given):
    # Was: model=mlp replaced model=transformer only, its job an MLP trained the transformer's 6000 steps
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "gaussian_linear_uniform", "--budgets", "10000", "--",
                "mesh=none", *given])
    assert [_job_extra(c) for c in jobs.commands] == [["mesh=none", *given]]
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, li in enumerate(lines) if "launch.py" in li)
    # The note on the line before the command (was: '  # ...' after it, which an interactive zsh, comments off by
    # default, read as arguments, its "task's" an unclosed quote); the command line pastes as it is
    assert lines[at - 1] == (f"gaussian_linear_uniform 10000: the task's own model=transformer train.steps=6000 left "
                             f"out whole: {' '.join(given)} given after --")
    assert shlex.split(lines[at].split(": ", 1)[1]) == jobs.commands[0]


@pytest.mark.parametrize("ran, asked, skipped", [
    (["mesh=none"], [], False),  # a job of the preset's MLP: not done for the task's transformer
    (["model=transformer", "train.steps=6000", "mesh=none"], [], True),
    (["model=transformer", "train.steps=6000", "mesh=none"], ["model=mlp"], False),
    (["mesh=none", "model=mlp"], ["model=mlp"], True),
    (["train.steps=6000", "mesh=none", "model=mlp"], ["model=mlp"], False),  # the mixed job the old key-by-key made
])
def test_run_counts_a_job_done_only_for_the_tasks_own_settings_it_ran(sbibm, tmp_path, monkeypatch, capsys, ran, asked,
                                                                      skipped):
    fake_job(tmp_path / "gaussian_linear_uniform_10000" / "job", "gaussian_linear_uniform", 10000, scores((1, 0.6)),
             overrides=ran)
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    argv = ["run", "--root", str(tmp_path), "--tasks", "gaussian_linear_uniform", "--budgets", "10000", "--",
            "mesh=none", *asked]
    if skipped:
        sbibm.main(argv)
        assert "gaussian_linear_uniform 10000: done, skipped" in capsys.readouterr().out
    else:
        with pytest.raises(SystemExit, match="finished with other settings than asked: gaussian_linear_uniform 10000"):
            sbibm.main(argv)
        differ = ("model=unset, asked transformer, train.steps=unset, asked 6000" if ran == ["mesh=none"] else
                  "model=transformer, asked mlp, train.steps=6000, asked unset" if ran[0] == "model=transformer" else
                  "train.steps=6000, asked unset")
        assert f"gaussian_linear_uniform 10000: finished with other settings ({differ})" in capsys.readouterr().out
    assert jobs.commands == []


def test_a_job_of_the_mlp_at_10_3_stays_done(sbibm, tmp_path, monkeypatch, capsys):
    # The table's 10^3 and 10^5 rows are the MLP's: their jobs are not "other settings" for the task's transformer
    fake_job(tmp_path / "gaussian_linear_uniform_1000" / "job", "gaussian_linear_uniform", 1000, scores((1, 0.6)),
             overrides=["mesh=none"])
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "gaussian_linear_uniform", "--budgets", "1000", "--",
                "mesh=none"])
    assert "gaussian_linear_uniform 1000: done, skipped" in capsys.readouterr().out
    assert jobs.commands == []


def test_run_checks_extra_arguments_against_a_tasks_own_model_before_any_job(sbibm):
    from sbibm_checks import extra_problem

    # model.width is the MLP's: gaussian_linear_uniform's transformer has none, and its job would refuse it
    problem = extra_problem(["mesh=none", "model.width=64"], ["two_moons", "gaussian_linear_uniform"], [10000],
                            per_task=True)
    assert problem.startswith("extra arguments (after --), for gaussian_linear_uniform at 10000 simulations: ")
    # checked with the task's settings before composing (was OmegaConf's "Key 'width' not in 'TransformerConfig'")
    assert "model.width is a setting of model=mlp, not of model=transformer" in problem
    assert problem.endswith("; gaussian_linear_uniform's job at 10000 runs with model=transformer train.steps=6000 "
                            "before them, all left out when one of their keys is given after -- (e.g. model=mlp)")
    assert extra_problem(["mesh=none", "model.width=64", "model=mlp"], ["gaussian_linear_uniform"], [10000],
                         per_task=True) is None
    # at 10^3 the job is the preset's MLP, whose width it is
    assert extra_problem(["mesh=none", "model.width=64"], ["gaussian_linear_uniform"], [1000], per_task=True) is None


@pytest.mark.slow
def test_run_checks_an_unknown_key_against_the_tasks_own_model(sbibm):
    from sbibm_checks import extra_problem

    # Was: "model.foo is not a setting of the default model=mlp; its settings: init, width, ...", and
    # +model.widht=64 suggested model.width=64, which the transformer's job refuses
    own = ("; gaussian_linear_uniform's job at 10000 runs with model=transformer train.steps=6000 before them, all "
           "left out when one of their keys is given after -- (e.g. model=mlp)")
    settings = "its settings: init, embed, depth, heads, mlp_ratio, time_embed_dim; a run takes no other key"
    assert extra_problem(["mesh=none", "+model.foo=1"], ["gaussian_linear_uniform"], [10000], per_task=True) == (
        "extra arguments (after --), for gaussian_linear_uniform at 10000 simulations: +model.foo=1: model.foo is not "
        f"a setting of model=transformer; {settings}, so drop +model.foo=1{own}")
    assert extra_problem(["mesh=none", "+model.embedd=3"], ["gaussian_linear_uniform"], [10000],
                         per_task=True).endswith(f"did you mean model.embed?); {settings}, so write model.embed=3, "
                                                 "though model.embed=3 is refused too, for gaussian_linear_uniform at "
                                                 "10000 simulations: model.embed=3 must be a multiple of model.heads=8 "
                                                 "(each head takes embed / heads features); set model.heads=3, or "
                                                 f"model.embed=8{own}")  # was: the fix alone, its job refusing it
    # each settings group once: the preset's MLP for the other pairs, named as before
    assert extra_problem(["mesh=none", "+model.widht=64"], ["gaussian_linear_uniform"], [1000], per_task=True) == (
        "extra argument +model.widht=64: model.widht is not a setting of the default model=mlp (did you mean "
        "model.width?); its settings: init, width, depth, mlp_ratio, time_embed_dim; a run takes no other key, so "
        "write model.width=64")



def test_run_of_mixed_tasks_says_which_settings_group_refuses_the_fix_another_offers(sbibm):
    # Was: run --tasks two_moons gaussian_linear_uniform --budgets 10000 -- +model.widht=64 advised "write
    # model.width=64" (the first group's MLP), which gaussian_linear_uniform's transformer at 10^4 then refused.
    from sbibm_checks import extra_problem

    own = ("gaussian_linear_uniform's job at 10000 runs with model=transformer train.steps=6000 before them, all left "
           "out when one of their keys is given after -- (e.g. model=mlp)")
    assert extra_problem(["mesh=none", "+model.widht=64"], ["two_moons", "gaussian_linear_uniform"], [10000],
                         per_task=True) == (
        "extra argument +model.widht=64: model.widht is not a setting of the default model=mlp (did you mean "
        "model.width?); its settings: init, width, depth, mlp_ratio, time_embed_dim; a run takes no other key, so "
        "write model.width=64, though model.width=64 is refused too, for gaussian_linear_uniform at 10000 simulations: "
        "model.width is a setting of model=mlp, not of model=transformer; its settings: init, embed, depth, heads, "
        f"mlp_ratio, time_embed_dim; {own}")
    # The other way round: the transformer's fix, refused by the MLP's group, said beside it before its own note
    problem = extra_problem(["mesh=none", "+model.embd=64"], ["gaussian_linear_uniform", "two_moons"], [10000],
                            per_task=True)
    assert problem == (
        "extra arguments (after --), for gaussian_linear_uniform at 10000 simulations: +model.embd=64: model.embd is "
        "not a setting of model=transformer (did you mean model.embed?); its settings: init, embed, depth, heads, "
        "mlp_ratio, time_embed_dim; a run takes no other key, so write model.embed=64, though model.embed=64 is "
        "refused too, for two_moons at 10000 simulations: model.embed=64: model=mlp (the default) has no field embed; "
        f"model=transformer has it: add model=transformer, whose section it then sets; {own}"), problem
    # a fix every group accepts is said as before; so is the transformer's "drop", which every group accepts
    assert extra_problem(["mesh=none", "+model.dpeth=2"], ["two_moons", "gaussian_linear_uniform"], [10000],
                         per_task=True).endswith("so write model.depth=2")
    assert extra_problem(["mesh=none", "+model.widht=64"], ["gaussian_linear_uniform", "two_moons"], [10000],
                         per_task=True).endswith(f"so drop +model.widht=64; {own}")


@pytest.mark.slow
def test_run_of_mixed_tasks_rechecks_the_fix_for_a_misspelt_key_given_without_a_plus(sbibm):
    # Was: run --tasks two_moons gaussian_linear_uniform --budgets 10000 -- model.widht=64 advised "set
    # model.width=64" alone, which gaussian_linear_uniform's transformer at 10^4 then refused: the re-check against
    # every group read only refusals led by the override itself (+model.widht=64: ...), not by its key.
    from sbibm_checks import extra_problem

    own = ("gaussian_linear_uniform's job at 10000 runs with model=transformer train.steps=6000 before them, all left "
           "out when one of their keys is given after -- (e.g. model=mlp)")
    assert extra_problem(["mesh=none", "model.widht=64"], ["two_moons", "gaussian_linear_uniform"], [10000],
                         per_task=True) == (
        "extra argument model.widht is not a setting of the default model=mlp (did you mean model.width?); its "
        "settings: init, width, depth, mlp_ratio, time_embed_dim; set model.width=64, though model.width=64 is refused "
        "too, for gaussian_linear_uniform at 10000 simulations: model.width is a setting of model=mlp, not of "
        f"model=transformer; its settings: init, embed, depth, heads, mlp_ratio, time_embed_dim; {own}")
    assert extra_problem(["mesh=none", "model.dpeth=2"], ["two_moons", "gaussian_linear_uniform"], [10000],
                         per_task=True).endswith("did you mean model.depth?); its settings: init, width, depth, "
                                                 "mlp_ratio, time_embed_dim; set model.depth=2")  # accepted by both


def test_a_sequential_job_keeps_the_presets_model(sbibm, tmp_path, monkeypatch):
    # The task's own settings were measured amortised; a sequential job's rounds train the preset's MLP, as before.
    jobs = FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    sbibm.main(["run", "--root", str(tmp_path), "--tasks", "gaussian_linear_uniform", "--budgets", "1000",
                "--rounds", "2", "--", "mesh=none"])
    assert [c[c.index("--") + 1:] for c in jobs.commands] == [["mesh=none"]]


def test_run_and_table_refuse_a_folder_in_the_harness_config_folder_before_writing(sbibm, tmp_path, monkeypatch):
    # Was: 'sbibm.py run --root conf/x' wrote conf/x/sbibm_asked.json and conf/x/two_moons_1000/launch.log among the
    # presets (Hydra reads every folder there as a config group), each job then refused by launch.py naming a
    # hydra.sweep.dir=multirun/... (which run sets itself) and "run the same command again to retry them".
    import shutil

    from gensbi_sharding.harness.paste_command import CHECKOUT

    conf, jobs = CHECKOUT / "conf", FakeJobs()
    monkeypatch.setattr(subprocess, "Popen", jobs)
    job = tmp_path / "two_moons_1000"
    fake_job(job, "two_moons", 1000, scores((1, 0.6)))
    try:
        for argv, flag, folder in [(["run", "--tasks", "two_moons", "--budgets", "1000", "--root"], "--root", "r60x"),
                                   (["table", str(job), "--out"], "--out", "r60y")]:
            with pytest.raises(SystemExit) as stop:
                sbibm.main([*argv, str(conf / folder)])
            assert stop.value.code == 2
            assert str(stop.value) == (f"{flag} {conf / folder} lies inside the harness's config folder {conf}, whose "
                                       "every folder Hydra reads as a config group: outputs never go there; choose a "
                                       f"folder outside it, e.g. {flag}=outputs/{folder}")
        assert jobs.commands == [] and not (conf / "r60x").exists() and not (conf / "r60y").exists()
    finally:  # the old code wrote there
        shutil.rmtree(conf / "r60x", ignore_errors=True)
        shutil.rmtree(conf / "r60y", ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("to_group", [False, True])
def test_ctrl_c_of_the_runner_reaches_its_job_once(sbibm, tmp_path, to_group):
    # Typed: sbibm.py run ... & then kill -INT <its pid> (or an IDE's stop button, a notebook's interrupt: SIGINT to
    # the runner alone). Was: "stopping: waiting for the job to save a checkpoint at its next step", but the job never
    # got the SIGINT (the runner counted on the terminal sending it to both): it trained all 400 steps and scored
    # every observation, status ok. A terminal's Ctrl-C (to the runner's process group) must still reach the job
    # exactly once: a second SIGINT reads as "stop at once", which loses the checkpoint.
    benchmarks = Path(__file__).resolve().parents[1] / "benchmarks"
    child = ("import os, signal, sys, time\n"
             "got = []\n"
             "signal.signal(signal.SIGINT, lambda s, f: got.append(s))\n"
             f"os.killpg(os.getpgid(os.getppid()), signal.SIGINT) if {to_group} else os.kill(os.getppid(), "
             "signal.SIGINT)\n"
             "end = time.monotonic() + 5\n"
             "while time.monotonic() < end and not got:\n"
             "    time.sleep(0.05)\n"
             "time.sleep(0.5)\n"  # a second SIGINT, were one sent, arrives meanwhile
             "print('got', got, flush=True)\n"
             "sys.exit(130 if got else 0)\n")
    runner = ("import sys\n"
              f"sys.path.insert(0, {str(benchmarks)!r})\n"
              "from pathlib import Path\n"
              "from sbibm_jobs import launch\n"
              f"print(launch([sys.executable, '-c', {child!r}], Path({str(tmp_path / 'launch.log')!r}), grace_s=20))\n")
    # Its own process group, SIGINT at its default: as a terminal's foreground job (pytest may ignore SIGINT).
    ran = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, timeout=60,
                         process_group=0, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert ran.stdout.strip() == "(130, 130)", (ran.stdout, ran.stderr)
    assert (tmp_path / "launch.log").read_text() == f"got [{int(signal.SIGINT)}]\n"


@pytest.mark.slow
def test_a_hangup_of_the_runners_terminal_ends_its_job_too(tmp_path):
    # Typed: sbibm.py run ... in an ssh session, then the connection dropped (the shell hangs up its jobs' process
    # groups, SIGHUP). Since the job got a process group of its own (2476219) the hangup reached the runner alone:
    # it died and its job trained on, orphaned, writing into the folder a rerun of the same command would resume.
    import os
    import time

    benchmarks = Path(__file__).resolve().parents[1] / "benchmarks"
    pid_file = tmp_path / "job.pid"
    child = ("import os, signal, time\n"
             f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
             "os.killpg(os.getpgid(os.getppid()), signal.SIGHUP)\n"
             "time.sleep(30)\n")
    runner = ("import sys\n"
              f"sys.path.insert(0, {str(benchmarks)!r})\n"
              "from pathlib import Path\n"
              "from sbibm_jobs import launch\n"
              f"print(launch([sys.executable, '-c', {child!r}], Path({str(tmp_path / 'launch.log')!r})))\n")

    def running(pid: int) -> bool:  # a zombie (no init reaps it here) has ended
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    ran = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, timeout=60,
                         process_group=0, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    job = int(pid_file.read_text())
    try:
        end = time.monotonic() + 10
        while running(job) and time.monotonic() < end:
            time.sleep(0.05)
        assert ran.returncode == -signal.SIGHUP, (ran.stdout, ran.stderr)
        assert not running(job)
    finally:  # the old code left it running
        if running(job):
            os.kill(job, signal.SIGKILL)


def _runner(tmp_path: Path, child: str, before: str = "") -> str:
    """A script that runs ``child`` as ``benchmarks/sbibm.py run`` runs a job (``before``: its own first lines)."""
    benchmarks = Path(__file__).resolve().parents[1] / "benchmarks"
    return ("import os, signal, subprocess, sys\n" + before +
            f"sys.path.insert(0, {str(benchmarks)!r})\n"
            "from pathlib import Path\n"
            "from sbibm_jobs import launch\n"
            f"print(launch([sys.executable, '-c', {child!r}], Path({str(tmp_path / 'launch.log')!r}), grace_s=20))\n")


def _state(pid: int) -> str:
    """The process's state letter (T: stopped); "" once it has ended."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


@pytest.mark.slow  # two processes, signalled
def test_ctrl_z_stops_the_job_with_its_runner_and_fg_continues_both(tmp_path):
    # Typed: sbibm.py run ..., then Ctrl-Z (the terminal's SIGTSTP to the runner's process group), later fg (SIGCONT).
    # Since the job got a process group of its own (2476219) the runner stopped and its job trained on, unseen.
    import os
    import time

    pid_file, go = tmp_path / "job.pid", tmp_path / "go"
    child = ("import os, pathlib, time\n"
             f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
             "end = time.monotonic() + 30\n"
             f"while time.monotonic() < end and not pathlib.Path({str(go)!r}).exists():\n"
             "    time.sleep(0.05)\n")
    runner = subprocess.Popen([sys.executable, "-c", _runner(tmp_path, child)], stdout=subprocess.PIPE, text=True,
                              process_group=0, preexec_fn=lambda: signal.signal(signal.SIGTSTP, signal.SIG_DFL))

    def until(check) -> bool:
        end = time.monotonic() + 10
        while not check() and time.monotonic() < end:
            time.sleep(0.05)
        return check()

    job = None
    try:
        assert until(lambda: pid_file.exists() and pid_file.read_text())
        job = int(pid_file.read_text())
        os.killpg(runner.pid, signal.SIGTSTP)
        assert until(lambda: _state(runner.pid) == "T" and _state(job) == "T"), (_state(runner.pid), _state(job))
        os.killpg(runner.pid, signal.SIGCONT)
        assert until(lambda: _state(runner.pid) not in ("T", "") and _state(job) not in ("T", "")), _state(job)
        go.touch()
        assert runner.communicate(timeout=30)[0].strip() == "(0, None)"
    finally:
        for pid in (runner.pid, job):  # the old code's job ran on (SIGKILL ends a stopped one too)
            if pid and _state(pid) not in ("", "Z"):
                os.kill(pid, signal.SIGKILL)
        runner.wait(timeout=10)


@pytest.mark.slow  # two processes, signalled
def test_a_ctrl_c_as_the_job_starts_reaches_the_job(tmp_path):
    # A Ctrl-C (to the runner: its job has a process group of its own) between Popen returning and the wait's try:
    # was a KeyboardInterrupt out of launch, the runner dead and its job never told, training on alone.
    child = ("import signal, sys, time\n"
             "got = []\n"
             "signal.signal(signal.SIGINT, lambda s, f: got.append(s))\n"
             "end = time.monotonic() + 5\n"
             "while time.monotonic() < end and not got:\n"
             "    time.sleep(0.05)\n"
             "print('got', got, flush=True)\n"
             "sys.exit(130 if got else 0)\n")
    late = ("class Late(subprocess.Popen):  # the Ctrl-C comes as the job's Popen returns\n"
            "    def __init__(self, *args, **kwargs):\n"
            "        super().__init__(*args, **kwargs)\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "subprocess.Popen = Late\n")
    ran = subprocess.run([sys.executable, "-c", _runner(tmp_path, child, late)], capture_output=True, text=True,
                         timeout=60, process_group=0, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Ended by it: at its handler (130, "got [2]") or, still starting up, before it (killed by SIGINT, -2), as the
    # terminal's Ctrl-C ends a job that shares its group; never "got []" after its 5 s.
    told = {"(130, 130)": f"got [{int(signal.SIGINT)}]\n", f"({-signal.SIGINT}, 130)": ""}
    assert told.get(ran.stdout.strip()) == (tmp_path / "launch.log").read_text(), (ran.stdout, ran.stderr)
