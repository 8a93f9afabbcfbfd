"""The console lines a new user reported (fresh clone, ``experiment=quick``): each said in the user's terms, once.

Was: a sweep ended with a table row (no outcome line; the header named only the csv); ``[2/7] mesh:
{'spec': 'dict', 'model_axis': 1, 'devices': None}``; one observation's C2ST printed twice, as ``+-`` then
again; a completed sweep folder refused as job 0's ``hydra.run.dir``; the rebuilt summary's ``train.steps``
column empty for the jobs that ran ``experiment=quick``'s 20 steps.
"""

import json
import logging
import re

import pytest
from omegaconf import OmegaConf

from gensbi_sharding import resolve_mesh
from gensbi_sharding.harness import folder_claim, outputs
from gensbi_sharding.harness.console_lines import (completed_jobs_lead, log_c2st_mean, mesh_step_line,
                                                   sweep_end_line)
from gensbi_sharding.harness.summary import SweepSummary, write_summary
from gensbi_sharding.harness.summary_columns import key_cell


@pytest.mark.parametrize("mesh_cfg, expected", [
    ({"spec": "dict", "model_axis": 1, "devices": None},
     "[2/7] mesh: data=8 x model=1 (8 devices; mesh=dict, mesh.model_axis=1)"),
    ({"spec": "dict", "model_axis": 2, "devices": None},
     "[2/7] mesh: data=4 x model=2 (8 devices; mesh=dict, mesh.model_axis=2)"),
    ({"spec": "dict", "model_axis": 2, "devices": [3, 2, 1, 0]},
     "[2/7] mesh: data=2 x model=2 (4 devices; mesh=dict, mesh.model_axis=2, mesh.devices=[3,2,1,0])"),  # as typed
    ({"spec": "auto"}, "[2/7] mesh: data=8 x model=1 (8 devices; mesh=auto)"),
    ({"spec": "dict", "model_axis": 1, "devices": [5]},  # was "(1 devices; ...)"
     "[2/7] mesh: data=1 x model=1 (1 device; mesh=dict, mesh.model_axis=1, mesh.devices=[5])"),
    ({"spec": None}, "[2/7] mesh: none (mesh=none): one device, nothing placed"),
])
def test_the_mesh_step_names_the_resolved_mesh_and_the_overrides_that_asked(mesh_cfg, expected):
    from gensbi_sharding.harness.rule_config import mesh_spec

    cfg = OmegaConf.create(mesh_cfg)
    line = mesh_step_line(cfg, resolve_mesh(mesh_spec(cfg)))
    assert line == expected
    assert "'spec'" not in line


def test_the_c2st_mean_is_said_once_and_with_one_spelling(caplog):
    one = {"c2st": 0.512, "c2st_sd_folds": 0.008, "c2st_observations": [{"observation": 1, "c2st": 0.512}]}
    with caplog.at_level(logging.INFO):
        log_c2st_mean(one)  # the observation's own line said 0.512 already
    assert caplog.messages == []
    several = {"c2st": 0.9, "c2st_sd_observations": 0.024, "c2st_observations": [{}, {}, {}]}
    with caplog.at_level(logging.INFO):
        log_c2st_mean(several)
    assert caplog.messages == ["C2ST 0.900 ± 0.024 over 3 observations (0.5 = indistinguishable from the "
                               "reference posterior)"]
    from pathlib import Path  # the per-observation line: ± as the final line, never "+-"

    source = (Path(__file__).parents[1] / "gensbi_sharding" / "harness" / "posterior.py").read_text()
    assert '"observation %d: C2ST %.3f ± %.3f over' in source and "+-" not in source


@pytest.mark.parametrize("statuses, wall, expected", [
    (["ok", "ok"], 136.2, "sweep done in 136.2 s: 2 ok, 0 failed; sweep_summary.csv/.md/.png in /s"),
    (["ok", "error"], 12.0, "sweep failed after 12.0 s: 1 ok, 1 failed; sweep_summary.csv/.md/.png in /s"),
    (["ok", "interrupted", "not run"], 3.0,
     "sweep stopped after 3.0 s: 1 ok, 0 failed, 1 interrupted, 1 not run; sweep_summary.csv/.md/.png in /s"),
    (["ok"], None, "sweep done: 1 ok, 0 failed; sweep_summary.csv/.md/.png in /s"),
])
def test_the_sweep_end_line_says_its_outcome(statuses, wall, expected):
    from pathlib import Path

    assert sweep_end_line(statuses, wall, Path("/s"), True) == expected
    assert sweep_end_line(statuses, wall, Path("/s"), False) == expected.replace("/.png", "")


def make_job(sweep, job, overrides, config, status="ok"):
    (sweep / str(job) / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(overrides), sweep / str(job) / ".hydra" / "overrides.yaml")
    (sweep / str(job) / "metrics.json").write_text(json.dumps(
        {"status": status, "config": {"dry_run": False, **config}, "mesh_shape": [8, 1], "c2st": 0.97,
         "c2st_sd_folds": 0.017, "wall_s": 3.3}))


def test_a_sweep_ends_with_its_outcome_line_after_the_table(tmp_path, capsys, monkeypatch):
    from gensbi_sharding.harness import plots

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)  # no matplotlib here
    for job, rule in enumerate(("fsdp", "tensor")):
        make_job(tmp_path, job, ["experiment=quick", f"rule={rule}"], {"train": {"steps": 20}})
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)},
                                         "overrides": {"task": ["experiment=quick", "rule=fsdp,tensor"]}}})
    callback = SweepSummary()
    callback.on_multirun_start(config)
    callback.on_multirun_end(config)
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[0] == "Sweep summary (2 jobs, 0 failed), as in sweep_summary.md:"
    assert printed[1].startswith("| job | rule ")
    assert re.fullmatch(rf"sweep done in [\d.]+ (ms|s): 2 ok, 0 failed; sweep_summary.csv/.md/.png in {tmp_path}",
                        printed[-1]), printed[-1]


@pytest.mark.slow
def test_a_sweep_summary_the_disk_refuses_is_one_line_with_the_command_that_writes_it(tmp_path, capsys,
                                                                                       monkeypatch):
    # Round 43: launch.py -m ... hydra.sweep.dir=<a disk that fills at sweep_summary.csv> ended with Hydra's
    # "UserWarning: Callback SweepSummary.on_multirun_end raised OSError: [Errno 28] No space left on device" and
    # "  warnings.warn(", naming neither what was kept nor how to write the summary once there is room.
    import errno
    import os
    import shlex
    import subprocess
    import sys

    from gensbi_sharding.harness import plots, summary

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)  # no matplotlib here
    sweep = tmp_path / "sweep é"
    for job, rule in enumerate(("fsdp", "tensor")):
        make_job(sweep, job, ["experiment=quick", f"rule={rule}"], {"train": {"steps": 20}})
    OmegaConf.save(OmegaConf.create({"hydra": {"overrides": {"task": ["experiment=quick", "rule=fsdp,tensor"]}}}),
                   sweep / "multirun.yaml")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)},
                                         "overrides": {"task": ["experiment=quick", "rule=fsdp,tensor"]}}})
    write = summary.write_atomic

    def full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(summary, "write_atomic", full)
    SweepSummary().on_multirun_end(config)
    printed = capsys.readouterr()
    command = (f"python -c 'from gensbi_sharding.harness.summary import refresh_sweep_summary as again; "
               f"again(\"{sweep / '0'}\")'")
    assert (printed.out, printed.err.splitlines()) == ("", [
        f"[ERROR] {sweep / 'sweep_summary.csv'} could not be written (No space left on device): the sweep's summary "
        "is not written, each job's outcome is kept in its folder's metrics.json; free space there (or make it "
        f"writable), then write the summary with: {command}"])
    monkeypatch.setattr(summary, "write_atomic", write)
    argv = shlex.split(command)
    subprocess.run([sys.executable, *argv[1:]], check=True, env={**os.environ, "MPLBACKEND": "Agg"})
    rows = list(__import__("csv").DictReader((sweep / "sweep_summary.csv").open()))
    assert [(r["job"], r["rule"], r["status"]) for r in rows] == [("0", "fsdp", "ok"), ("1", "tensor", "ok")]


def test_a_sweep_summary_the_disk_refuses_names_the_jobs_whose_record_it_refused_too(tmp_path, capsys, monkeypatch):
    # launch.py -m experiment=quick seed=0,1 hydra.sweep.dir=<a 440 KB tmpfs>: job 0 ran, job 1's checkpoint, error.txt
    # and metrics.json met the full disk, then the summary did: "each job's outcome is kept in its folder's
    # metrics.json", job 1's folder holding none.
    import errno
    import os

    from gensbi_sharding.harness import plots, summary

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)  # no matplotlib here
    make_job(tmp_path, 0, ["experiment=quick", "seed=0"], {"train": {"steps": 20}})
    (tmp_path / "1" / ".hydra").mkdir(parents=True)  # its record refused
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)},
                                         "overrides": {"task": ["experiment=quick", "seed=0,1"]}}})

    def full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(summary, "write_atomic", full)
    SweepSummary().on_multirun_end(config)
    assert ("the sweep's summary is not written, each job's outcome is kept in its folder's metrics.json, but for job "
            "1, whose record the disk refused too (its error line above says how it ended); free space there (or "
            "make it writable), then write the summary with: ") in capsys.readouterr().err


def test_summary_columns_show_the_value_each_job_ran_with(tmp_path, monkeypatch):
    # Job 0 was trained further with train.steps=40; job 1 ran experiment=quick's 20: its cell was empty.
    from gensbi_sharding.harness import plots

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)
    make_job(tmp_path, 0, ["experiment=quick", "rule=fsdp", "train.steps=40"], {"train": {"steps": 40}})
    make_job(tmp_path, 1, ["experiment=quick", "rule=tensor"], {"train": {"steps": 20}, "rule": {"embed": None}})
    summary = write_summary(tmp_path, ["rule"])
    assert summary.keys == ["rule", "train.steps"]
    rows = list(__import__("csv").DictReader(summary.csv_path.open()))
    assert [(r["rule"], r["train.steps"]) for r in rows] == [("fsdp", "40"), ("tensor", "20")]
    row = summary.rows[1]
    assert key_cell(row, "rule") == "tensor"  # typed: the config's rule is a table
    assert key_cell(row, "rule.embed") == "" and key_cell(row, "no.such") == ""
    assert key_cell({"overrides": {}, "metrics": {"config": {"strict": True}}}, "strict") == "true"


def test_a_refused_sweep_folder_is_named_as_hydra_sweep_dir_with_its_completed_jobs_counted(tmp_path, capsys):
    sweep = tmp_path / "multirun"
    for job in (0, 1):
        outputs.write_json(sweep / str(job) / "metrics.json", {"status": "ok", "final_step": 20})
        (sweep / str(job) / "checkpoints" / "20").mkdir(parents=True)
        (sweep / str(job) / ".hydra").mkdir()
        (sweep / str(job) / ".hydra" / "overrides.yaml").write_text(f"- experiment=quick\n- rule={['fsdp', 'tensor'][job]}\n")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)},
                                         "overrides": {"task": ["experiment=quick", "rule=fsdp,tensor",
                                                                "train.resume=auto"]}},
                               "train": {"resume": "auto", "steps": 20}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    printed = capsys.readouterr().err
    assert printed.startswith(f"[ERROR] hydra.sweep.dir={sweep}: 2 of its 2 jobs complete (0, 1); job 0: "
                              f"{sweep / '0' / 'metrics.json'} already exists (status ok)")
    assert "choose another hydra.sweep.dir;" in printed and "hydra.run.dir (or" not in printed
    jobs = [sweep / str(job) for job in range(8)]
    for job in range(2, 8):
        outputs.write_json(jobs[job] / "metrics.json", {"status": "ok" if job < 7 else "interrupted"})
    assert completed_jobs_lead(sweep, jobs, f"{jobs[7] / 'checkpoints'} holds") == (
        f"hydra.sweep.dir={sweep}: 7 of its 8 jobs complete (0, 1, 2, 3, 4, ... (2 more)); job 7: ")
    assert completed_jobs_lead(sweep, jobs[7:], f"{jobs[7] / 'checkpoints'} holds") == ""  # none complete


def test_a_stopped_sweep_ends_with_its_outcome_line(tmp_path, monkeypatch):
    # Was: Ctrl-C in job 1 of 3 ended the console with "interrupted: the job's metrics.json records it" and no
    # line for the sweep (Hydra's end-of-sweep summary never comes); launch.py now says this one last.
    from gensbi_sharding.harness import console_lines, plots
    from gensbi_sharding.harness.summary import refresh_job_sweep_summary

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)
    make_job(tmp_path, 0, ["experiment=quick", "rule=fsdp"], {})
    make_job(tmp_path, 1, ["experiment=quick", "rule=tensor"], {}, status="interrupted")
    OmegaConf.save(OmegaConf.create({"hydra": {"overrides": {"task": ["experiment=quick",
                                                                      "rule=fsdp,tensor,replicated"]}}}),
                   tmp_path / "multirun.yaml")
    before = console_lines.stopped_sweep_line()  # another test's sweep, in this process: kept for it afterwards
    console_lines.remember_stopped_sweep(None)
    try:
        assert console_lines.stopped_sweep_line() is None
        refresh_job_sweep_summary(tmp_path / "1")
        assert console_lines.stopped_sweep_line() == (
            f"sweep stopped: 1 ok, 0 failed, 1 interrupted, 1 not run; sweep_summary.csv/.md/.png in {tmp_path}")
    finally:
        console_lines.remember_stopped_sweep(before)


def test_a_stopped_sweeps_outcome_line_is_said_after_that_job_only(tmp_path, monkeypatch, caplog):
    # Was: launch.main called again in one process (a notebook, a test) ended its run with the first call's
    # "sweep stopped: ..." line: console_lines kept it for the process, not for the job that stopped.
    import launch
    from faults_helpers import compose_tiny

    from gensbi_sharding.harness import console_lines

    def run_stopping_a_sweep(cfg):  # the first job stops its sweep, as refresh_job_sweep_summary says it
        if cfg.output_dir.endswith("first"):
            console_lines.remember_stopped_sweep(f"sweep stopped: 0 ok, 1 interrupted; in {cfg.output_dir}")
        return {"status": "ok"}

    for state in ("failed_jobs", "running", "ran", "in_sweep"):  # launch.py's per-process lists, this test's own
        monkeypatch.setattr(launch, state, [])
    monkeypatch.setattr(launch, "run", run_stopping_a_sweep)
    monkeypatch.setattr(launch, "final_line", lambda metrics, out: f"done: {out.name}")
    before = console_lines.stopped_sweep_line()  # another test's sweep, in this process: kept for it afterwards
    said = []
    try:
        for name in ("first", "second"):
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
                launch.main.__wrapped__(compose_tiny(output_dir=tmp_path / name))  # the function Hydra calls per job
            said.append([r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"])
    finally:
        console_lines.remember_stopped_sweep(before)
    assert said == [["done: first", f"sweep stopped: 0 ok, 1 interrupted; in {tmp_path / 'first'}"], ["done: second"]]


@pytest.mark.slow
def test_every_step_header_reads_step_colon_details():
    # Was: "[2/7] mesh data=8 x model=1 (...)" and "[6/7] sample 256 posterior draws ..." beside "[3/7] data: ..."
    # and the others: two of the seven without the colon after the step's name. Every header the harness can print,
    # read from its source (an f-string's text before its first value too), named as README.md lists the steps.
    import ast
    from pathlib import Path

    harness = Path(__file__).resolve().parents[1] / "gensbi_sharding" / "harness"
    headers = [node.value for path in sorted(harness.glob("*.py")) for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.match(r"\[\d/7\]", node.value)]
    uniform = re.compile(r"\[(\d)/7\] ([^:]+): (?:\S|$)")  # "$": an f-string's text ends before its first value
    steps = {uniform.match(header).groups()[:2] if uniform.match(header) else header for header in headers}
    assert steps == {("1", "devices"), ("2", "mesh"), ("3", "data"), ("4", "model + optimizer"), ("5", "train"),
                     ("6", "sample + C2ST"), ("7", "outputs")}, headers
    readme = " ".join((harness.parents[1] / "README.md").read_text().split())
    assert ("devices, mesh (and the rule checked against it), data, model + optimizer (placed by the rule), train, "
            "sample + C2ST, outputs") in readme


def test_a_refused_sweep_counts_the_sweeps_jobs_not_its_job_folders(tmp_path, capsys):
    # Was "1 of its 2 jobs complete (0)" for rule=replicated,fsdp,tensor interrupted in job 1 (job 2 never started):
    # the job folders there were counted, not the sweep's jobs as Hydra's sweeper expands them.
    sweep = tmp_path / "swj"
    for job, (rule, status) in enumerate([("replicated", "ok"), ("fsdp", "interrupted")]):
        outputs.write_json(sweep / str(job) / "metrics.json", {"status": status, "final_step": 20})
        (sweep / str(job) / "checkpoints" / "20").mkdir(parents=True)
        (sweep / str(job) / ".hydra").mkdir()
        (sweep / str(job) / ".hydra" / "overrides.yaml").write_text(f"- experiment=quick\n- rule={rule}\n")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)},
                                         "overrides": {"task": ["experiment=quick", "rule=replicated,fsdp,tensor",
                                                                "train.resume=auto"]}},
                               "train": {"resume": "auto", "steps": 20}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    printed = capsys.readouterr().err
    assert printed.startswith(f"[ERROR] hydra.sweep.dir={sweep}: 1 of its 3 jobs complete (0); job 0: "), printed
    assert "(1 never started)" in printed and f"hydra.run.dir={sweep / '2'}" in printed


@pytest.mark.slow
@pytest.mark.parametrize("overrides, optimizer", [
    ((), "AdamW(lr=0.003, cosine, weight decay 0.0001), EMA decay 0.999"),
    (("train.ema_decay=0", "train.warmup_steps=2", "train.weight_decay=0", "train.schedule=constant",
      "train.learning_rate=1e-4"), "AdamW(lr=0.0001, constant, warm-up 2 steps), no EMA"),
])
def test_the_model_step_says_the_optimizer_and_ema_the_run_trains_with(tmp_path, monkeypatch, caplog, devices,
                                                                       overrides, optimizer):
    # Was: "AdamW(lr=0.0001, constant), EMA decay 0": no warm-up, no weight decay, and an EMA the run does not keep.
    from faults_helpers import run_tiny
    from gensbi_sharding.harness import state

    def stop(*args, **kwargs):  # the line is said before the model is built: nothing past it is needed
        raise RuntimeError("stopped after [4/7]")

    monkeypatch.setattr(state, "build_state", stop)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        assert run_tiny(tmp_path / "run", *overrides)["status"] == "error"
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[4/7]")]
    assert lines == [f"[4/7] model + optimizer: mlp, rule 'replicated', init=sharded, {optimizer}"], lines


@pytest.mark.slow
@pytest.mark.parametrize("ema, said", [("0.999", "the whole state, the EMA included: "),
                                       ("0", "the whole state, with no EMA under train.ema_decay=0: ")])
def test_the_dry_runs_state_line_names_an_ema_only_where_the_run_keeps_one(tmp_path, caplog, devices, ema, said):
    # Was: "(the whole state, the EMA included: ...)" under train.ema_decay=0 too, for an EMA the run does not keep.
    from faults_helpers import run_tiny

    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        assert run_tiny(tmp_path / "run", "dry_run=true", f"train.ema_decay={ema}")["status"] == "ok"
    lines = [r.getMessage() for r in caplog.records if "optimizer state" in r.getMessage()]
    assert len(lines) == 1 and said in lines[0], lines


def test_a_python_warning_takes_one_console_line():
    # Was: model=transformer rule=fsdp_tensor mesh.model_axis=8 printed each activation fallback warning as three
    # console lines: the warning, the indented source line that raised it ("  q = constrain(self.query(h), ...)")
    # and a blank one. launch.log keeps the whole text.
    import logging
    import warnings

    from gensbi_sharding.harness.console import ConsoleFormatter

    text = warnings.formatwarning("activation ('batch', 'hidden') left unsplit", UserWarning, __file__, 1,
                                  line="q = constrain(x, names, axes)")
    assert text.endswith("\n  q = constrain(x, names, axes)\n")
    record = logging.LogRecord("py.warnings", logging.WARNING, __file__, 1, "%s", (text,), None)
    assert ConsoleFormatter("%(message)s").format(record) == (
        f"[WARNING] {__file__}:1: UserWarning: activation ('batch', 'hidden') left unsplit")
    several = logging.LogRecord("py.warnings", logging.WARNING, __file__, 1, "%s", ("a.py:1: UserWarning: one\ntwo\n",),
                                None)  # no source line found: the message's own lines stay
    assert ConsoleFormatter("%(message)s").format(several) == "[WARNING] a.py:1: UserWarning: one\ntwo"
    ours = logging.LogRecord("gensbi_sharding", logging.WARNING, __file__, 1, "%s", ("a\n  b",), None)
    assert ConsoleFormatter("%(message)s").format(ours) == "[WARNING] a\n  b"  # the harness's own: as written


#: Job 1's error, as a run with train.learning_rate=1e30 records it (test_train.py).
DIVERGED = ("FloatingPointError: training diverged: mean loss nan over steps 1..4; lower train.learning_rate or check "
            "the data (this run: train.learning_rate=1e+30; e.g. train.learning_rate=0.003); no finite checkpoint to "
            "resume from: start afresh with a lower train.learning_rate (train.checkpoint_every=N keeps some)")


def _refuse_a_sweep_into_a_finished_learning_rate_sweep(tmp_path, swept, error=None, saved=False):
    """``-m <swept>`` started into the folder of a finished ``-m train.learning_rate=0.003,1e30,0.001`` (job 1 failed,
    its metrics' ``error`` as given; ``saved``: each job holds a checkpoint of step 5); the refusal is on stderr.
    Returns the sweep folder."""
    sweep = tmp_path / "sw"
    for job, (rate, status) in enumerate([("0.003", "ok"), ("1e+30", "error"), ("0.001", "ok")]):
        outputs.write_json(sweep / str(job) / "metrics.json", {"status": status, "final_step": 5,
                                                               **({"error": error} if job == 1 and error else {})})
        (sweep / str(job) / ".hydra").mkdir(parents=True)
        if saved:
            (sweep / str(job) / "checkpoints" / "5").mkdir(parents=True)
        (sweep / str(job) / ".hydra" / "overrides.yaml").write_text(f"- train.learning_rate={rate}\n")
    (sweep / "multirun.yaml").write_text("hydra:\n  mode: MULTIRUN\n")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}, "overrides": {"task": [swept, "train.steps=5"]}},
                               "train": {"resume": None, "steps": 5}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    return sweep


def test_a_sweep_into_another_sweeps_folder_of_as_many_jobs_is_named_as_such(tmp_path, capsys):
    # Was: `-m rule=fsdp,tensor hydra.sweep.dir=<a finished -m train.learning_rate=0.003,1e30,0.001 sweep>` said
    # "2 of its 2 jobs complete (0, 2)" (job 2 no job of this sweep) and offered the other sweep's job 1 to continue,
    # and its job 0 to train further: the other sweep was named only when one of this sweep's jobs had no folder.
    sweep = _refuse_a_sweep_into_a_finished_learning_rate_sweep(tmp_path, "rule=fsdp,tensor")
    assert capsys.readouterr().err == (
        f"[ERROR] {sweep} holds another sweep (its job 0, {sweep / '0'}, ran rule unset; this sweep's job 0 is "
        "rule=fsdp): run this sweep in another hydra.sweep.dir\n")


def test_a_refused_sweep_counts_only_its_own_job_folders_complete(tmp_path):
    # Was "2 of its 2 jobs complete (0, 2)" for -m train.learning_rate=0.003,1e30 rerun into the folder of its 3-job
    # run -m train.learning_rate=0.003,1e30,0.001 (job 1 failed): folder 2 is no job of this sweep.
    sweep = tmp_path / "sw"
    jobs = [sweep / str(job) for job in range(3)]
    for job, status in zip(jobs, ("ok", "error", "ok")):
        outputs.write_json(job / "metrics.json", {"status": status})
    assert completed_jobs_lead(sweep, jobs, f"{jobs[0] / 'metrics.json'} already exists", 2) == (
        f"hydra.sweep.dir={sweep}: 1 of its 2 jobs complete (0); job 0: ")
    assert completed_jobs_lead(sweep, jobs, "", 2, ["a", "b"]) == ""  # its jobs' folders are named a and b: none there
    assert completed_jobs_lead(sweep, jobs, "", 0).startswith(f"hydra.sweep.dir={sweep}: 2 of its 3 jobs complete")


def test_a_refused_sweep_offers_no_other_sweeps_job_to_continue(tmp_path, capsys):
    # Was: -m rule=fsdp (one job) into the folder of a finished -m train.learning_rate=0.003,1e30,0.001 said "1 of its
    # 1 job complete (0)" and then "continue its one unfinished job with: ... train.learning_rate=1e+30 ... <dir>/1",
    # folder 1 no job of this sweep.
    sweep = _refuse_a_sweep_into_a_finished_learning_rate_sweep(tmp_path, "rule=fsdp")
    assert capsys.readouterr().err == (
        f"[ERROR] hydra.sweep.dir={sweep}: 1 of its 1 job complete (0); job 0: {sweep / '0' / 'metrics.json'} already "
        "exists (status ok): this folder holds an earlier run's outputs, which are never overwritten; choose another "
        "hydra.sweep.dir\n")


def test_a_retyped_sweep_continues_the_folder_of_the_job_that_failed_on_its_value_with_this_sweeps_value(tmp_path,
                                                                                                          capsys):
    # Was: -m train.learning_rate=0.003,0.002 into the folder of a finished -m train.learning_rate=0.003,1e30,0.001
    # (job 1 diverged, its error naming train.learning_rate=1e+30) offered "continue its one unfinished job with:
    # python launch.py train.learning_rate=1e+30 ... hydra.run.dir=<dir>/1": the value that failed it, again.
    import shlex

    sweep = _refuse_a_sweep_into_a_finished_learning_rate_sweep(tmp_path, "train.learning_rate=0.003,0.002", DIVERGED)
    command = (f"python launch.py train.learning_rate=0.002 train.resume=auto hydra.mode=RUN "
               f"hydra.run.dir={sweep / '1'}")
    assert capsys.readouterr().err == (
        f"[ERROR] hydra.sweep.dir={sweep}: 1 of its 2 jobs complete (0); job 0: {sweep / '0' / 'metrics.json'} already "
        "exists (status ok): this folder holds an earlier run's outputs, which are never overwritten; choose another "
        "hydra.sweep.dir; a sweep folder holding completed jobs is never rerun as a whole: continue its one unfinished "
        f"job with: {command} (its error names train.learning_rate=1e+30: this sweep's train.learning_rate=0.002 in "
        "its place)\n")
    args = shlex.split(command)[2:]  # the command, as launch.py's Hydra callback sees it: accepted
    config = OmegaConf.create({"hydra": {"run": {"dir": str(sweep / "1")}, "overrides": {"task": [
        a for a in args if not a.startswith("hydra.")]}}, "train": {"resume": "auto", "steps": 5},
        "distributed": {"mode": "none", "process_id": None}})
    callback = folder_claim.RefuseCompletedRun()
    callback.on_run_start(config)
    callback.on_run_end(config)


def test_a_retyped_sweep_names_a_failed_folder_whose_error_names_not_the_value_it_changes(tmp_path, capsys):
    # Was, job 1 failing for another cause (the device went away): "continue ... train.learning_rate=1e+30 ...
    # <dir>/1", another value than this sweep's job 1; its value changed, the folder would hold two runs' attempts.
    sweep = _refuse_a_sweep_into_a_finished_learning_rate_sweep(tmp_path, "train.learning_rate=0.003,0.002",
                                                                "RuntimeError: the device went away")
    assert capsys.readouterr().err == (
        f"[ERROR] hydra.sweep.dir={sweep}: 1 of its 2 jobs complete (0); job 0: {sweep / '0' / 'metrics.json'} already "
        "exists (status ok): this folder holds an earlier run's outputs, which are never overwritten; choose another "
        f"hydra.sweep.dir; folder {sweep / '1'} ran train.learning_rate=1e+30 where this sweep's job 1 is "
        "train.learning_rate=0.002, and its error does not name train.learning_rate (a job folder takes this sweep's "
        "value only where its error named the key that changed): run this sweep in another hydra.sweep.dir\n")


def test_a_refused_sweep_never_counts_or_trains_further_a_folder_that_ran_another_value_of_its_job(tmp_path, capsys):
    # Was: -m train.learning_rate=0.005,1e30,0.001 into the folder of a finished -m train.learning_rate=0.003,1e30,0.001
    # said "2 of its 3 jobs complete (0, 2); job 0: ... to train it further ...: python launch.py
    # train.learning_rate=0.003 ... train.resume=<dir>/0 ...": folder 0 ran 0.003 where this sweep's job 0 is 0.005.
    sweep = _refuse_a_sweep_into_a_finished_learning_rate_sweep(tmp_path, "train.learning_rate=0.005,1e30,0.001",
                                                                saved=True)
    assert capsys.readouterr().err == (
        f"[ERROR] hydra.sweep.dir={sweep}: 1 of its 3 jobs complete (2); folder {sweep / '0'} ran "
        "train.learning_rate=0.003 where this sweep's job 0 is train.learning_rate=0.005, and it completed (a job "
        "folder takes this sweep's value only where its error named the key that changed): run this sweep in another "
        "hydra.sweep.dir; a sweep folder holding completed jobs is never rerun as a whole: continue its one unfinished "
        "job with: python launch.py train.learning_rate=1e+30 train.resume=auto hydra.mode=RUN "
        f"hydra.run.dir={sweep / '1'}\n")


def test_a_refused_sweep_names_every_folder_that_ran_another_value_of_its_job_not_only_the_first_refused(tmp_path,
                                                                                                         capsys):
    # Was: -m train.learning_rate=0.003,1e30,0.005 into the folder of a finished -m train.learning_rate=0.003,1e30,0.001
    # named folder 0 (refused first) and job 1's command, and nothing of folder 2, which ran 0.001 where this sweep's
    # job 2 is 0.005: that job was neither offered nor said to need another hydra.sweep.dir.
    sweep = _refuse_a_sweep_into_a_finished_learning_rate_sweep(tmp_path, "train.learning_rate=0.003,1e30,0.005",
                                                                saved=True)
    assert capsys.readouterr().err == (
        f"[ERROR] hydra.sweep.dir={sweep}: 1 of its 3 jobs complete (0); job 0: {sweep / '0' / 'metrics.json'} already "
        "exists (status ok): this folder holds an earlier run's outputs, which are never overwritten; choose another "
        "hydra.sweep.dir; to train it further from its final checkpoint (step 5) into a new folder: python launch.py "
        f"train.learning_rate=0.003 train.steps=10 train.resume={sweep / '0'} hydra.mode=RUN "
        f"hydra.run.dir={sweep}-0-steps10; folder {sweep / '2'} ran train.learning_rate=0.001 where this sweep's job 2 "
        "is train.learning_rate=0.005, and it completed (a job folder takes this sweep's value only where its error "
        "named the key that changed): run this sweep in another hydra.sweep.dir; a sweep folder holding completed jobs "
        "is never rerun as a whole: continue its one unfinished job with: python launch.py train.learning_rate=1e+30 "
        f"train.resume=auto hydra.mode=RUN hydra.run.dir={sweep / '1'}\n")
