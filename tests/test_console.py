"""The quiet console: what the filter passes, noise routed to launch.log, the logging config.

The whole-run line counts are in test_user_view.py (launch.py end to end).
"""

import logging
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gensbi_sharding.harness import console
from gensbi_sharding.harness.config import register_configs

CONF = Path(__file__).resolve().parents[1] / "conf"


def record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


@pytest.fixture
def as_process():
    yield console.set_process
    console.set_process(0, 1)


def test_filter_keeps_details_for_verbose_and_noise_for_the_file(as_process):
    quiet, verbose = console.ConsoleFilter(verbose=False), console.ConsoleFilter(verbose=True)
    table = record(console.DETAILS, logging.INFO, "every variable ...")
    step = record("gensbi_sharding", logging.INFO, "[5/7] train")
    noise = record("py.warnings", logging.WARNING, "x.py:1: ConvergenceWarning: Stochastic Optimizer ...")
    other = record("py.warnings", logging.WARNING, "x.py:1: UserWarning: something that matters")
    gloo = record(console.NATIVE, logging.INFO, "[Gloo] Rank 0 is connected to 1 peer ranks")
    orbax = record("absl", logging.WARNING, 'Item "arrays" was found in the checkpoint, but could not be restored.')
    absl = record("absl", logging.WARNING, "something else absl warns about")
    records = (table, step, noise, other, gloo, orbax, absl)
    assert [quiet.filter(r) for r in records] == [False, True, False, True, False, False, True]
    assert [verbose.filter(r) for r in records] == [True, True, False, True, False, False, True]
    as_process(1, 2)  # another process: its warnings only
    assert not quiet.filter(step) and quiet.filter(record("gensbi_sharding", logging.WARNING, "careful"))
    # Not one every process logs alike (from the config or a checkpoint): process 0 shows it once for all.
    alike = record("gensbi_sharding", logging.WARNING, "2 variable(s) replicated instead of split")
    alike.__dict__.update(console.EVERY_PROCESS)
    assert not quiet.filter(alike) and not verbose.filter(alike)
    as_process(0, 2)
    assert quiet.filter(alike)


def test_several_processes_tag_every_line_of_every_record_once(as_process, capsys):
    # Was: only the first line of a multi-line record was tagged (the placement block's "per device: ..."
    # came untagged), and a second call (then tag_process_records, which only called set_process) tagged each line
    # twice.
    handler = logging.StreamHandler(__import__("sys").stdout)
    handler.setFormatter(console.ConsoleFormatter("%(message)s"))
    root, logger = logging.getLogger(), logging.getLogger("gensbi_sharding")
    root.addHandler(handler)
    level, logger.level = logger.level, logging.INFO
    try:
        as_process(1, 2)
        console.set_process(1, 2)  # again (distributed=auto, once joined): still one tag
        logger.warning("mesh %s\nper device: %s", "4x2", "22.3 KB")
        logging.getLogger("py.warnings").warning("x.py:1: UserWarning: careful")  # another library's line
        as_process(0, 1)  # one process again: no tag
        logger.warning("plain")
    finally:
        root.removeHandler(handler)
        logger.level = level
    assert capsys.readouterr().out.splitlines() == [
        "[WARNING] [process 1/2] mesh 4x2", "[process 1/2] per device: 22.3 KB",
        "[WARNING] [process 1/2] x.py:1: UserWarning: careful", "[WARNING] plain"]


def test_a_gloo_line_torn_by_another_thread_stays_off_the_console(capfd, caplog):
    # Was: two Gloo threads wrote "[Gloo] Rank [Gloo] Rank 7 is connected ...\n5 is connected to 7 peer ranks.
    # ...\n"; the second line lacks the prefix and reached the console.
    torn = (b"[Gloo] Rank [Gloo] Rank 7 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7\n"
            b"5 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7\nkept 5 is connected\n"
            b" peer ranks. Expected number of connected peer ranks is : 1\nranks is : 1\nkept: 1\n"  # torn anywhere
            b" is connected to 1\nRank 12 is connec\nkept Rank 1\n")  # was: these two reached a make test's console
    with caplog.at_level(logging.INFO, logger=console.NATIVE), console.native_output_to_log():
        os.write(1, torn)
    assert capfd.readouterr().out == "kept 5 is connected\nkept: 1\nkept Rank 1\n"
    assert [r.getMessage()[:18] for r in caplog.records if r.name == console.NATIVE] == [
        "[Gloo] Rank [Gloo]", "5 is connected to ", "peer ranks. Expect", "ranks is : 1", "is connected to 1",
        "Rank 12 is connec"]


def test_a_stop_is_said_by_process_0_and_logged_by_the_others(as_process, capfd, caplog):
    assert console.stop_level() == logging.ERROR
    as_process(1, 2)
    assert console.stop_level() == logging.INFO  # process_1.log only: process 0 names the same step and command
    as_process(0, 2)
    assert console.stop_level() == logging.ERROR
    # XLA's note of the SIGTERM a stop sends on purpose: in the log, with no "XLA warned" console line.
    with caplog.at_level(logging.INFO), console.native_output_to_log():
        os.write(2, b"W1201 17:48:00.122121  8033 preemption_notifier.cc:89] SIGTERM caught at 2026-12-01T17:48\n")
    assert capfd.readouterr().err == ""
    assert [r.name for r in caplog.records] == [console.NATIVE]


def test_formatter_tags_only_warnings_and_errors():
    formatter = console.ConsoleFormatter("%(message)s")
    assert formatter.format(record("gensbi_sharding", logging.INFO, "[1/7] devices")) == "[1/7] devices"
    assert formatter.format(record("gensbi_sharding", logging.ERROR, "error: boom")) == "[ERROR] error: boom"


def test_warnings_go_to_the_log(caplog):
    with caplog.at_level(logging.WARNING, logger="py.warnings"), console.warnings_to_log():
        warnings.warn_explicit("not converged", UserWarning, "sklearn_like.py", 7)
    assert any("not converged" in r.getMessage() and r.name == "py.warnings" for r in caplog.records)


def test_native_lines_leave_the_console_and_reach_the_log(capfd, caplog):
    with caplog.at_level(logging.INFO, logger=console.NATIVE), console.native_output_to_log():
        os.write(1, b"[Gloo] Rank 0 is connected to 1 peer ranks.\nkept line\n")
        os.write(1, b"\rtrain:  50%|#####     | 2/4")  # a progress bar update passes as it comes
        os.write(2, b"[Gloo] Rank 1 is connected\nan error line\n")
    out, err = capfd.readouterr()
    assert out == "kept line\n\rtrain:  50%|#####     | 2/4" and err == "an error line\n"
    assert sorted(r.getMessage() for r in caplog.records if r.name == console.NATIVE) == [  # one thread per fd
        "[Gloo] Rank 0 is connected to 1 peer ranks.", "[Gloo] Rank 1 is connected"]


@pytest.mark.parametrize("verbose", [False, True])
def test_job_logging_config_wires_verbose_and_the_log_file(verbose):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=[f"verbose={str(verbose).lower()}"], return_hydra_config=True)
    logging_cfg = cfg.hydra.job_logging
    assert logging_cfg.filters.console["()"] == "gensbi_sharding.harness.console.ConsoleFilter"
    assert logging_cfg.filters.console.verbose is verbose
    # launch.py's job is named "launch": launch.log (test_user_view reads it)
    filename = OmegaConf.to_container(logging_cfg.handlers.file)["filename"]
    assert filename == "${hydra.runtime.output_dir}/${hydra.job.name}.log"
    assert logging_cfg.handlers.console.filters == ["console"]


def test_an_error_gets_one_tag_on_the_console_in_launch_log_and_from_the_folder_check(tmp_path, caplog, capsys,
                                                                                       devices):
    # Was "[ERROR] error: ...": the message carried its own prefix on top of the level's tag.
    from faults_helpers import run_tiny
    from gensbi_sharding.harness import folder_claim, outputs

    with caplog.at_level(logging.ERROR, logger="gensbi_sharding"):
        metrics = run_tiny(tmp_path / "run", "mesh.model_axis=3")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert metrics["status"] == "error" and len(errors) == 1
    assert metrics["error"].startswith("ConfigError: mesh.model_axis=3: 8 devices are not divisible")
    # The console says the refusal without its class name (console.tagged), as the command's checks do
    assert console.ConsoleFormatter("%(message)s").format(errors[0]) == (
        f"[ERROR] {metrics['error'].removeprefix('ConfigError: ')}")
    file_format = OmegaConf.load(CONF / "hydra" / "job_logging" / "gensbi.yaml").formatters.file.format
    assert logging.Formatter(file_format).format(errors[0]).endswith(f"[gensbi_sharding][ERROR] - {metrics['error']}")

    # The folder check Hydra runs before the job (a completed run's folder is never written into).
    outputs.write_json(tmp_path / "done" / "metrics.json", {"status": "ok"})
    config = OmegaConf.create({"hydra": {"run": {"dir": str(tmp_path / "done")}}, "train": {"resume": None},
                               "distributed": {"mode": "none", "process_id": None}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_run_start(config)
    printed = capsys.readouterr().err.strip()
    assert printed.startswith(f"[ERROR] {tmp_path / 'done' / 'metrics.json'} already exists (status ok)"), printed
    assert printed.count("[ERROR]") == 1 and "error:" not in printed.lower()


def test_a_failed_run_under_disabled_job_logging_still_says_its_error_once_on_stderr(tmp_path, capfd, monkeypatch,
                                                                                      devices):
    # Was: python launch.py hydra/job_logging=disabled (its config disables every existing logger, ours too) ended a
    # failed run with exit 1 and not one line. Its info lines stay as quiet as asked; its error is one [ERROR] line.
    from faults_helpers import run_tiny

    ours = logging.getLogger("gensbi_sharding")
    monkeypatch.setattr(ours, "disabled", True)  # what disable_existing_loggers: true leaves
    with console.quiet_console(OmegaConf.create({"distributed": {"mode": "none"}})):
        metrics = run_tiny(tmp_path / "run", "mesh.model_axis=3")
    out, err = capfd.readouterr()
    assert metrics["status"] == "error" and out == ""
    assert err == f"[ERROR] {metrics['error'].removeprefix('ConfigError: ')}\n" and "mesh.model_axis=3" in err
    assert ours.disabled and not ours.handlers  # the config in place again once the job ended
    # A config whose console shows the errors (conf/hydra/job_logging/gensbi.yaml's): nothing said twice.
    monkeypatch.setattr(ours, "disabled", False)
    shown = logging.StreamHandler(sys.stdout)
    ours.addHandler(shown)
    try:
        with console.quiet_console(OmegaConf.create({"distributed": {"mode": "none"}})):
            ours.error("boom")
    finally:
        ours.removeHandler(shown)
    assert capfd.readouterr() == ("boom\n", "")


def test_xla_log_lines_leave_the_console_for_the_log_with_one_notice(capfd, caplog):
    # Was: model=flux1 rule=fsdp mesh.model_axis=2 printed XLA's C++ warnings on the console.
    remat = (b"W1130 21:32:49.078772    8033 spmd_partitioner.cc:666] [SPMD] Involuntary full rematerialization. "
             b"The compiler cannot go from sharding {devices=[4,1,2]<=[8]} to {replicated} efficiently\n")
    cfg = OmegaConf.create({"distributed": {"mode": "none"}})  # one process: no Gloo, XLA's lines all the same
    with caplog.at_level(logging.INFO), console.quiet_console(cfg):
        os.write(2, remat + remat.replace(b"W1130", b"I1130"))
        os.write(2, b"E1130 21:32:50.000001    8033 pjrt.cc:1] an XLA error stays\n")
        os.write(2, remat[:20])  # a C++ line arriving in two writes is still recognised
        os.write(2, remat[20:])
        os.write(1, b"Info line of our own\n")
    out, err = capfd.readouterr()
    assert out == "Info line of our own\n" and err == "E1130 21:32:50.000001    8033 pjrt.cc:1] an XLA error stays\n"
    logged = [r.getMessage() for r in caplog.records if r.name == console.NATIVE]
    assert len(logged) == 3 and all("Involuntary full rematerialization" in m for m in logged)
    notices = [r for r in caplog.records if r.name == "gensbi_sharding"]
    assert len(notices) == 1 and notices[0].levelno == logging.WARNING
    assert notices[0].getMessage().startswith(
        "XLA warned (all its lines are in launch.log): [SPMD] Involuntary full rematerialization. The compiler")


def test_an_xla_warnings_notice_is_never_cut_inside_a_quoted_path(capfd, caplog):
    # Was: the notice cut XLA's line at 100 characters, inside a quoted path: '... file "/tmp/compile_cache/ab...'.
    far = "/tmp/" + "compile_cache/" * 6 + "entry"
    line = f'W1130 21:32:49.078772    8033 cache.cc:12] could not write the entry to file "{far}" (disk full)\n'
    with caplog.at_level(logging.INFO), console.quiet_console(OmegaConf.create({"distributed": {"mode": "none"}})):
        os.write(2, line.encode())
    capfd.readouterr()
    said = [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"]
    assert len(said) == 1 and said[0].endswith(" ...") and said[0].count('"') in (0, 2), said


def test_a_model_with_hundreds_of_fallbacks_gets_one_short_console_line_and_every_path_in_the_log(caplog, devices):
    # Was: one "[WARNING] 187 variable(s) replicated ..." console line of ~24 KB (model=flux1 model.depth=8 ...),
    # every path with its reason repeated; the README promises a short console account.
    import jax.numpy as jnp
    from flax import nnx

    import gensbi_sharding as gs
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.model_plan import model_plan

    model = nnx.Module()
    model.blocks = nnx.List([nnx.Param(jnp.ones((2, 8)), **gs.axes("embed", "mlp")) for _ in range(187)])

    mesh, rule = gs.make_mesh(model_axis=1), gs.resolve_rule("fsdp")
    with caplog.at_level(logging.WARNING):
        plan = model_plan(model, mesh, rule, strict=False)
    assert len(plan.fallbacks) == 187
    shown = [r for r in caplog.records if console.ConsoleFilter(verbose=False).filter(r)]
    assert len(shown) == 1 and len(shown[0].getMessage()) < 400, [r.getMessage() for r in shown]
    assert shown[0].getMessage() == (
        "187 variable(s) replicated instead of split under rule 'fsdp' on mesh {'data': 8, 'model': 1}: blocks/0, "
        "blocks/1, blocks/2 and 184 more (size 2 of logical axis 'embed' is not divisible by mesh axis 'data' of "
        "size 8; set rule.embed=null, or annotate this dimension None, or use a mesh with an axis of size 2 (here: "
        "data=8, model=1)) (every one: metrics.json 'fallbacks' and launch.log)")
    full = [r.getMessage() for r in caplog.records if r.name == console.DETAILS]  # launch.log only
    assert len(full) == 1 and all(f"  blocks/{i}: size 2 of logical axis 'embed'" in full[0] for i in range(187))
    with pytest.raises(ConfigError) as err:
        model_plan(model, mesh, rule, strict=True)
    assert len(str(err.value)) < 540 and "blocks/0, blocks/1, blocks/2 and 184 more" in str(err.value)
    assert str(err.value).startswith("strict=true and rule 'fsdp' cannot split 187 variable(s)")
    # The override that honours every annotation on the same devices (data 2 divides size 2; data 4 does not).
    assert str(err.value).endswith(". Set mesh.model_axis=4 (every annotation honoured), or fix the annotation or "
                                   "dimension, or set strict=false")


@pytest.mark.slow  # an end-to-end run (a training run)
def test_a_run_resets_the_process_an_earlier_run_in_this_python_set(as_process, tmp_path, caplog, devices):
    # A process 1 of 2 that failed to join (a coordinator nobody serves) left the console set to process 1:
    # every later run in the same Python process (a test session, a sweep's jobs) logged as "[process 1/2]"
    # and its info lines were kept off the console.
    from faults_helpers import run_tiny

    as_process(1, 2)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        assert run_tiny(tmp_path / "run")["status"] == "ok"
    assert console.stop_level() == logging.ERROR
    steps = [r.getMessage() for r in caplog.records if r.getMessage().startswith(("[1/7]", "[process"))]
    assert steps and steps[0].startswith("[1/7] devices: ") and not any("[process" in s for s in steps)


def test_a_gloo_lines_bare_last_number_stays_off_the_console_and_other_numbers_stay_on(capfd, caplog):
    # Was: a lone "3" on the console of a distributed=local job, the tail of a Gloo line torn just before its last
    # number ("... Expected number of connected peer ranks is : " + "3"). A number after anything else is output.
    torn = (b"7\n[Gloo] Rank 0 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3\n3\n"
            b"kept 3\n4\n")
    with caplog.at_level(logging.INFO, logger=console.NATIVE), console.native_output_to_log():
        os.write(1, torn)
    assert capfd.readouterr().out == "7\nkept 3\n4\n"
    assert [r.getMessage() for r in caplog.records if r.name == console.NATIVE][1:] == ["3"]


def test_a_lone_newline_left_by_two_interleaved_gloo_lines_stays_off_the_console(capfd, caplog):
    # Was: a stray "\n" on stdout of a distributed=local job (test_local_processes' quiet-console test, about 1 run in
    # 5 of the whole suite): two processes' Gloo lines written into one line, their two newlines left as an empty line.
    gloo = b"[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1"
    with caplog.at_level(logging.INFO, logger=console.NATIVE), console.native_output_to_log():
        os.write(1, gloo + gloo + b"\n\nkept\n\n")
    assert capfd.readouterr().out == "kept\n\n"  # a blank line after anything else is output


@pytest.mark.parametrize("inherited", ["1", "0"])
def test_a_local_process_draws_its_progress_bar_for_the_console_its_parent_passes_it_to(monkeypatch, inherited):
    # A distributed=local process's stderr is a pipe to its parent, which passes it on to its own console: the bar
    # is redrawn in place where that console is a terminal, written a line per window where it is a file.
    from gensbi_sharding.harness import progress

    monkeypatch.setattr(os, "isatty", lambda fd: inherited != "1")  # the process's own stderr says otherwise
    monkeypatch.setenv(console.CONSOLE_TERMINAL_ENV, inherited)
    bar = progress.progress_bar(total=2, disable=True)
    assert console.is_terminal(2) is (inherited == "1") and isinstance(bar, progress.LineBar) is (inherited == "0")
    monkeypatch.delenv(console.CONSOLE_TERMINAL_ENV)
    assert console.is_terminal(2) is (inherited != "1")  # a process of its own: its own stderr


def test_an_activations_fallback_warning_is_said_once_per_job_whatever_its_shapes(caplog, devices):
    # Was: experiment=quick model=transformer rule=tensor mesh.model_axis=8 printed 6 ShardingFallbackWarnings with
    # their source lines (query and key at the training, validation and sampling batch shapes): 30 console lines.
    import jax.numpy as jnp

    import gensbi_sharding as gs

    mesh = gs.make_mesh(model_axis=8)
    axes = gs.PartitionAxis.for_rule("tensor", mesh)
    query, key = ("batch", "query_sequence", "heads", "head_dim"), ("batch", "key_sequence", "heads", "head_dim")
    with caplog.at_level(logging.WARNING), console.warnings_to_log(), warnings.catch_warnings():
        warnings.simplefilter("default")
        for rows in (64, 102, 128):  # training, validation, sampling
            for names in (query, key):
                gs.constrain(jnp.ones((rows, 4, 4, 8)), names, axes, mesh=mesh)
    logged = [r for r in caplog.records if r.name == "py.warnings"]
    assert len(logged) == 6  # launch.log keeps every one
    quiet = console.ConsoleFilter(verbose=False)
    shown = [r.getMessage() for r in logged if quiet.filter(r)]
    assert len(shown) == 2 and "of shape (64, 4, 4, 8)" in shown[0] and "'query_sequence'" in shown[0]
    assert "'key_sequence'" in shown[1]
    assert all("heads (size 4 is not divisible by mesh axes ('model',) of size 8)" in s for s in shown)
    # Another name, or the next job (Hydra makes a filter per job): said again.
    other = record("py.warnings", logging.WARNING, "x.py:1: ShardingFallbackWarning: activation ('batch', 'hidden') "
                   "of shape (64, 3) left unsplit on mesh {'data': 1, 'model': 8}: hidden (size 3 ...)")
    assert quiet.filter(other) and not quiet.filter(other)
    assert console.ConsoleFilter(verbose=False).filter(logged[0])


@pytest.mark.slow
def test_a_worker_process_holding_the_console_pipe_is_not_waited_for(capfd, caplog, monkeypatch):
    # eval.c2st_jobs=2: scikit-learn's loky workers, started while the console was piped, hold its write ends (idle
    # for 300 s). Was: the job's end (a Ctrl-C during C2ST, or its last line) waited for the pipes' end of file, out
    # to the bound, 5 s a descriptor: 10 s, where one C2ST job stopped within a second. Now the pump is done once it
    # read the marker this process writes last; the bound here is an hour, so a wait for end of file would hang.
    import subprocess
    import sys
    import threading

    from gensbi_sharding.harness import native_pump

    monkeypatch.setattr(native_pump, "BOUND_S", 3600.0)
    with console.native_output_to_log():
        os.write(1, b"mine, partial")  # this process's last bytes: passed on before the context ends
        # holds the piped stdout and stderr until its stdin closes; says one more line through the pipe first
        worker = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read(); print('after', flush=True)"],
                                  stdin=subprocess.PIPE)
    try:
        assert worker.poll() is None  # the context ended while the worker still holds the pipe
        assert capfd.readouterr().out == "mine, partial"  # the marker itself never shown
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)
    for thread in [t for t in threading.enumerate() if t.name == "native-output-1"]:  # the pump goes on passing on what the worker says, then ends with it
        thread.join(timeout=60)
    assert capfd.readouterr().out == "after\n"


def test_the_pump_passes_on_what_comes_before_and_after_the_end_marker():
    import threading

    from gensbi_sharding.harness.native_pump import END, pump

    read_end, write_end = os.pipe()
    got, ended = [], threading.Event()
    thread = threading.Thread(target=pump, args=(read_end, got.append, lambda partial: partial.startswith(b"W"),
                                                 ended))
    thread.start()
    os.write(write_end, b"line\nW1 held, partial" + END[:7])  # the marker split over two reads
    os.write(write_end, END[7:])
    assert ended.wait(60) and thread.is_alive()  # the end of this process's output, the pipe still open
    os.write(write_end, b"a child's\n")
    os.close(write_end)
    thread.join(60)
    assert b"".join(got) == b"line\nW1 held, partial" + b"a child's\n" and not thread.is_alive()


def test_a_log_file_the_disk_refuses_is_named_once_on_the_console(tmp_path, capsys):
    # A run whose disk filled up: Python's "--- Logging error ---", a traceback and the message for every line logged
    # after it (735 console lines for a checkpoint that failed at the run's last step). The handler is the one the
    # job logging config names.
    import errno
    import importlib

    config = OmegaConf.load(CONF / "hydra" / "job_logging" / "gensbi.yaml")
    module, _, name = config.handlers.file["class"].rpartition(".")
    handler = getattr(importlib.import_module(module), name)(tmp_path / "launch.log")

    class FullDisk:
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def flush(self):
            pass

        def close(self):
            pass

    handler.stream = FullDisk()
    logger = logging.getLogger("test_console.full_disk")
    logger.propagate, logger.level = False, logging.INFO
    logger.addHandler(handler)
    try:
        for n in range(3):
            logger.info("line %d", n)
    finally:
        logger.removeHandler(handler)
    assert capsys.readouterr().err == (
        f"[ERROR] {tmp_path / 'launch.log'} could not be written (No space left on device): this job's log lines from "
        "here are on this console only; free space there (or make it writable)\n")


def test_a_log_file_over_the_file_size_limit_names_that_limit_not_free_space(tmp_path, capsys, monkeypatch):
    # (ulimit -f 8; launch.py ...) said "... (File too large): ...; free space there (or make it writable)", which
    # changes nothing on a disk with room; now the file-size limit's fix (outputs.room_fix), as the run's other files.
    import errno
    import resource

    from gensbi_sharding.harness.log_file import JobLogFile

    handler = JobLogFile(tmp_path / "launch.log")
    handler.stream.close()

    class OverLimit:
        def write(self, text):
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

        def flush(self):
            pass

        def close(self):
            pass

    handler.stream = OverLimit()
    logger = logging.getLogger("test_console.over_limit")
    logger.propagate, logger.level = False, logging.INFO
    logger.addHandler(handler)
    real = resource.getrlimit  # the limit read, not set: a real one would refuse pytest's own output past 8 KB
    monkeypatch.setattr(resource, "getrlimit", lambda which: (
        (8 * 1024, resource.RLIM_INFINITY) if which == resource.RLIMIT_FSIZE else real(which)))
    try:
        logger.info("line")
    finally:
        logger.removeHandler(handler)
    assert capsys.readouterr().err == (
        f"[ERROR] {tmp_path / 'launch.log'} could not be written (File too large): this job's log lines from here are "
        "on this console only; raise the file-size limit of the shell that runs it (ulimit -f: 8 blocks of 1,024 B here; ulimit -f "
        "unlimited lifts it)\n")


def test_orbaxs_wait_for_the_previous_save_is_said_once_on_the_console_and_every_time_in_launch_log(tmp_path,
                                                                                                     capsys):
    # Was: "Waiting for previous save to complete took 1.2 seconds. If this number is high, consider checkpointing
    # less frequently." on the console at every save (8 lines for train.checkpoint_every=5 train.steps=400 under load).
    # The console handler and the log file as the job logging config makes them (not dictConfig: it would close
    # pytest's own handlers).
    from gensbi_sharding.harness.log_file import JobLogFile

    config = OmegaConf.load(CONF / "hydra" / "job_logging" / "gensbi.yaml")
    shown = logging.StreamHandler(sys.stdout)
    shown.addFilter(console.ConsoleFilter(verbose=False))
    shown.setFormatter(console.ConsoleFormatter(config.formatters.console.format))
    kept = JobLogFile(tmp_path / "launch.log")
    kept.setFormatter(logging.Formatter(config.formatters.file.format))
    absl = logging.getLogger("absl")
    before = absl.propagate, absl.level
    absl.propagate, absl.level = False, logging.INFO
    absl.addHandler(shown)
    absl.addHandler(kept)
    try:
        for seconds in (1.25, 2.5, 1.5):  # as orbax.checkpoint.CheckpointManager.save logs it
            absl.warning("Waiting for previous save to complete took %f seconds. If this number is high, consider "
                         "checkpointing less frequently.", seconds)
    finally:
        absl.removeHandler(shown)
        absl.removeHandler(kept)
        kept.close()
        absl.propagate, absl.level = before
    out = capsys.readouterr().out
    assert out == ("[WARNING] a checkpoint save waited 1.2 s for the previous one to finish, training held meanwhile "
                   "(said once; every wait is in launch.log): a larger train.checkpoint_every saves less often\n"), out
    assert (tmp_path / "launch.log").read_text().count("Waiting for previous save to complete took") == 3


@pytest.mark.slow
def test_a_refusal_reads_the_same_whichever_check_found_it():
    # Was: "[ERROR] ConfigError: mesh.model_axis=3: ..." (the run's check) but "[ERROR] train.steps=1.5: ..." (the
    # command's): the class name on some refusals only. Now none carries it, a sweep's job lines neither.
    launch = Path(__file__).resolve().parents[1] / "launch.py"
    for override in ("mesh.model_axis=3", "train.steps=1.5"):
        ran = subprocess.run([sys.executable, str(launch), override], capture_output=True, text=True, timeout=120)
        assert ran.returncode == 1 and ran.stderr.startswith(f"[ERROR] {override}: "), ran.stderr
        assert "ConfigError" not in ran.stderr, ran.stderr
    assert console.tagged("ERROR", "2 settings are refused:\n  job 1 (seed=-1): ConfigError: seed=-1 must be >= 0") == (
        "[ERROR] 2 settings are refused:\n  job 1 (seed=-1): seed=-1 must be >= 0")


@pytest.mark.slow
def test_a_failed_saves_late_callbacks_go_to_the_log_file_once(monkeypatch, caplog):
    # Round 43: a checkpoint save on a full disk (a 6 MB tmpfs, train.steps=40 train.checkpoint_every=20) printed 36
    # to 208 tracebacks ending "RuntimeError: Event loop is closed" around the run's own error line: tensorstore's
    # writes ending after Orbax's event loop closed, each callback's error printed as Python prints an unraisable
    # one. Here an object's __del__ calls the closed loop as those callbacks did; anything else is printed as before.
    import asyncio
    import gc
    import sys

    loop = asyncio.new_event_loop()
    loop.close()

    class LateCallback:
        def __init__(self, call):
            self.call = call

        def __del__(self):
            self.call()

    def late(call):
        LateCallback(call)
        gc.collect()

    from gensbi_sharding.harness.log_file import late_writes_to_log

    gc.collect()  # an earlier test's garbage (a failed TensorStore read's error in a cycle) goes to pytest's hook first
    printed = []  # what Python's own hook (pytest's, here) is given to print
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: printed.append(repr(unraisable.exc_value)))
    with caplog.at_level(logging.INFO, logger=console.NATIVE), late_writes_to_log():
        for _ in range(3):
            late(lambda: loop.call_soon_threadsafe(print))
        late(lambda: 1 / 0)
    late(lambda: loop.call_soon_threadsafe(print))  # after the job: as Python says it
    assert printed == ["ZeroDivisionError('division by zero')", "RuntimeError('Event loop is closed')"]
    assert [r.getMessage() for r in caplog.records if r.name == console.NATIVE] == [
        "a write ended after its event loop closed (a save that failed): Event loop is closed"]


def test_the_console_handler_drops_lines_once_its_reader_left(capfd):
    # Was: `python launch.py ... | head -2` ended a run that finished ok with "--- Logging error ---", a traceback
    # and the final line on stderr (logging.StreamHandler's report of the closed pipe).
    from gensbi_sharding.harness.log_file import Console

    read, write = os.pipe()
    os.close(read)  # the reader left
    stream = os.fdopen(write, "w")
    handler = Console(stream)
    try:
        for n in range(2):  # the first write meets the closed pipe; the second goes nowhere, unsaid too
            handler.emit(logging.LogRecord("gensbi_sharding", logging.INFO, __file__, 1, f"line {n}", None, None))
        stream.write("Python's flush at exit\n")
        stream.flush()  # no BrokenPipeError: the descriptor now leads to os.devnull
    finally:
        stream.close()
    assert capfd.readouterr().err == ""


@pytest.mark.slow
def test_help_to_a_reader_that_left_ends_without_a_traceback():
    # Was: `python launch.py --help | head` printed a BrokenPipeError traceback once head had its lines.
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, str(repo / "launch.py"), "--help"], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(repo)})
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (0, "")


def test_xla_rematerialization_after_the_idle_model_axis_hint_names_it_in_its_notice(capfd, caplog):
    # Round 60: model=flux1 rule=fsdp mesh.model_axis=2 said the idle model axis's hint, then "XLA warned ...
    # Involuntary full rematerialization", nothing tying the two; the idle axis causes them (mesh.model_axis=1: none).
    from gensbi_sharding.harness.native_notes import idle_axis_said

    remat = (b"W1130 21:32:49.078772    8033 spmd_partitioner.cc:666] [SPMD] Involuntary full rematerialization. "
             b"The compiler cannot go from sharding {devices=[4,1,2]<=[8]} to {replicated} efficiently\n")
    other = b"W1130 21:32:49.078772    8033 pjrt.cc:1] another warning\n"
    cfg = OmegaConf.create({"distributed": {"mode": "none"}})
    notices = []
    for said, line in (("rule fsdp leaves the model axis idle: ...", remat), (None, remat),
                       ("rule fsdp leaves the model axis idle: ...", other)):
        caplog.clear()
        with caplog.at_level(logging.INFO), console.quiet_console(cfg):  # a job each, as a sweep's
            assert idle_axis_said(said) == said  # as the placement block and the dry run say it
            os.write(2, line)
        capfd.readouterr()
        notices += [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"]
    assert [n.split("...", 1)[-1] for n in notices] == [
        "; the idle model axis said above causes these: mesh.model_axis=1 also removes them", "",
        "XLA warned (all its lines are in launch.log): another warning"], notices


@pytest.mark.slow
def test_an_error_after_a_gensbi_model_import_under_disabled_job_logging_is_said_once():
    # Was: under hydra/job_logging=disabled (root at ERROR, no handler) the job's logger got errors_on_console's stderr
    # handler; importing gensbi.models.flux1 then (a model built in the run) imports Orbax, whose module calls absl's
    # vlog, which runs logging.basicConfig() on a root without handlers: every error was printed twice
    # ("boom" and "ERROR:gensbi_sharding:boom").
    script = (
        "import logging\n"
        "from omegaconf import OmegaConf\n"
        "from gensbi_sharding.harness import console\n"
        "logging.getLogger().setLevel(logging.ERROR)\n"  # hydra/job_logging=disabled: root at ERROR, no handler,
        "logging.getLogger('gensbi_sharding').disabled = True\n"  # every existing logger disabled
        "with console.quiet_console(OmegaConf.create({'distributed': {'mode': 'none'}})):\n"
        "    import gensbi.models.flux1\n"
        "    logging.getLogger('gensbi_sharding').error('boom')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "boom" in line] == ["[ERROR] boom"], done.stderr
    assert done.stdout == ""


@pytest.mark.slow
def test_a_console_and_log_file_without_utf8_keep_the_c2st_line(tmp_path):
    # Was: under LC_ALL=C PYTHONUTF8=0 (an ASCII console and locale) every C2ST line and the run's final line (their
    # '±') were a "--- Logging error ---" traceback on the console, and missing from launch.log.
    log_path = tmp_path / "launch.log"
    code = ("import logging, sys\n"
            "from gensbi_sharding.harness.log_file import Console, JobLogFile\n"
            "log = logging.getLogger('gensbi_sharding.t')\n"
            "log.propagate = False\n"
            f"log.addHandler(Console(sys.stdout)); log.addHandler(JobLogFile({str(log_path)!r}))\n"
            "log.warning('C2ST 0.973 \\u00b1 0.017 in /tmp/caf\\u00e9')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANG", "LC_CTYPE")}
    done = subprocess.run([sys.executable, "-c", code], env={**env, "LC_ALL": "C", "PYTHONUTF8": "0"},
                          capture_output=True, timeout=60)
    assert done.returncode == 0
    assert done.stderr == b""
    assert done.stdout == b"C2ST 0.973 +/- 0.017 in /tmp/caf\\xe9\n"
    assert log_path.read_text(encoding="utf-8") == "C2ST 0.973 \u00b1 0.017 in /tmp/caf\u00e9\n"


@pytest.mark.slow  # a one-job sweep, end to end
def test_a_sweep_without_utf8_prints_its_summary_table(tmp_path):
    # Was: 'LC_ALL=C PYTHONUTF8=0 python launch.py -m experiment=quick seed=0' ended with Hydra's "UserWarning:
    # Callback SweepSummary.on_multirun_end raised UnicodeEncodeError: 'ascii' codec can't encode character '\xb1'",
    # in place of the summary table and the sweep's last line (the files were written).
    repo = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANG", "LC_CTYPE")}
    done = subprocess.run([sys.executable, str(repo / "launch.py"), "-m", "experiment=quick", "seed=0",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], env={**env, "LC_ALL": "C", "PYTHONUTF8": "0"},
                          capture_output=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"UnicodeEncodeError" not in done.stderr, done.stderr[-2000:]
    assert b"Sweep summary (1 job, 0 failed)" in done.stdout
    # the cell names its spread's folds (r75)
    assert re.search(rb"\| 0\.\d{3} \+/- 0\.\d{3} over \d+ folds \|", done.stdout), done.stdout[-2000:]
    assert b"sweep done in " in done.stdout


NEVER_RETRIEVED = """
import asyncio, gc, logging, sys
sys.path.insert(0, {repo!r})
from gensbi_sharding.harness.log_file import drop_late_callbacks
drop_late_callbacks()
logging.basicConfig(level=logging.WARNING, format="%(message)s")  # as sample.py's own_observation.main
async def read(text):
    raise ValueError(text)
loop = asyncio.new_event_loop()
tasks = [loop.create_task(read(text)) for text in ("NOT_FOUND: Error opening 'ocdbt' driver", "mine: not a read")]
loop.run_until_complete(asyncio.sleep(0.01))
del tasks
gc.collect()
print("done")
"""


@pytest.mark.slow
def test_a_damaged_reads_never_retrieved_task_stays_off_a_launchers_console():
    # Was: sample.py on a damaged step ended, 1 run in 8, with asyncio's "Task exception was never retrieved ...
    # ValueError('NOT_FOUND: ...')" traceback below its one [ERROR] line. Any other task's error still shows.
    code = NEVER_RETRIEVED.format(repo=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout == "done\n", proc.stderr
    assert proc.stderr.count("Task exception was never retrieved") == 1, proc.stderr
    assert "ValueError: mine: not a read" in proc.stderr and "NOT_FOUND" not in proc.stderr, proc.stderr


def test_a_jobs_never_retrieved_read_error_goes_to_its_log_file_only():
    # In a job the console's filter drops it; launch.log's handler has no such filter (it keeps it).
    try:
        raise ValueError("NOT_FOUND: Error opening 'ocdbt' driver")
    except ValueError:
        read = logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "Task exception was never retrieved\nfuture: "
                                 "<Task finished>", None, sys.exc_info())
    other = logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "Task exception was never retrieved", None,
                              (ValueError, ValueError("mine"), None))
    assert [console.ConsoleFilter().filter(r) for r in (read, other)] == [False, True]


@pytest.mark.parametrize("error", [ValueError("HTTP: 503 from the simulator's server"),
                                   RuntimeError("CUDA: out of memory")])
def test_another_tasks_never_retrieved_error_led_by_a_capital_word_stays_on_the_console(error):
    # Was: any error text led by a capital word and a colon was dropped as a damaged checkpoint's late read, e.g. a
    # user's own task's ValueError('HTTP: 503 ...'). Now only one led by a status code (TensorStore's NOT_FOUND) is.
    record = logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "Task exception was never retrieved", None,
                               (type(error), error, None))
    assert console.ConsoleFilter().filter(record) is True


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_a_console_without_utf8_prints_any_non_ascii_text_escaped(encoding):
    # Was: console_fits fitted only consoles lacking '±': on a latin-1 one (which has it) a plain print of a run
    # folder named '路' (sample.py's last line, a sweep table's path, Hydra's --cfg) raised UnicodeEncodeError.
    code = ("from gensbi_sharding.harness.log_file import console_fits\nconsole_fits()\n"
            "print('C2ST 0.97 \\u00b1 0.01 in /runs/r\\u00fcn\\u2014\\u8def')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LANG", "LC_CTYPE")}
    done = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONIOENCODING": encoding},
                          capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    plus_minus, u_umlaut = ("\u00b1".encode("latin-1"), b"\xfc") if encoding == "latin-1" else (b"+/-", b"\\xfc")
    assert done.stdout == b"C2ST 0.97 " + plus_minus + b" 0.01 in /runs/r" + u_umlaut + b"n\\u2014\\u8def\n"
