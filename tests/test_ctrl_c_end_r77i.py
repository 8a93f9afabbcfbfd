"""A Ctrl-C as a finished single run ends (BREAK77's F3).

Was: Ctrl-C pressed as the run ended ("[7/7] outputs" printed, metrics.json ``status: ok``) exited 130 saying
"interrupted by Ctrl-C after 1 job(s) ended, each recorded in its folder's metrics.json" (a wrapper read an
interrupted run; a SIGTERM there exits 0), and one pressed a moment later, as JAX tore down at exit, printed
"Exception ignored in atexit callback ... KeyboardInterrupt" under the final line. Now the exit is the record's (0 for
``ok``, as a SIGTERM's), with one line naming the record, and a Ctrl-C during the exit ends it at once with that code
(quietly; ignored, a teardown that hung could not be stopped from the terminal).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gensbi_sharding.harness.interrupt_lines import ended_run_exit
from gensbi_sharding.harness.preemption import EXIT_PREEMPTED

# launch.py as `python launch.py` runs it, with the run stubbed: it writes its record, then a Ctrl-C comes where
# {where} says (in the run, after the record; or as the final line is printed), and one more during the exit.
_LAUNCH = """
import atexit, json, os, runpy, signal, sys, time
from pathlib import Path
sys.argv = ["launch.py", "hydra.run.dir=" + {out!r}]
import gensbi_sharding.harness.run as run_module
import gensbi_sharding.harness.run_report as report

def ctrl_c_at_exit():  # runs before JAX's own teardown (registered after it): a Ctrl-C pressed as the process ends
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.3)
    print("exit went on", file=sys.stderr, flush=True)

def run(cfg):
    from gensbi_sharding.harness.run_folder import output_dir
    out = Path(output_dir(cfg))
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps({{"status": {status!r}}}))
    atexit.register(ctrl_c_at_exit)
    if {where!r} == "record":
        raise KeyboardInterrupt
    return {{"status": {status!r}}}

def final_line(*args, **kwargs):
    raise KeyboardInterrupt

run_module.run, report.final_line = run, final_line
runpy.run_path("launch.py", run_name="__main__")
"""


def _launch(out: Path, status: str, where: str) -> subprocess.CompletedProcess:
    code = _LAUNCH.format(out=str(out), status=status, where=where)
    return subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], timeout=300,
                          capture_output=True, text=True)


@pytest.mark.slow  # a second interpreter importing the harness
@pytest.mark.parametrize("where", ["record", "final line"])
def test_a_ctrl_c_as_a_finished_run_ends_exits_0_with_one_line(tmp_path, where):
    done = _launch(tmp_path / "run", "ok", where)
    assert done.returncode == 0, done.stderr[-3000:]  # was 130
    lines = [line for line in done.stderr.splitlines() if "Ctrl-C" in line]
    assert lines == [f"Ctrl-C after the run had ended (status ok): nothing left to stop; {tmp_path / 'run'}"
                     "/metrics.json records how it ended"], done.stderr[-3000:]
    # the Ctrl-C during the exit: the process ends there, with the code decided (was a KeyboardInterrupt traceback
    # from the callback); not ignored, so that a teardown that hung can be stopped (the callback's sleep cut short)
    assert "exit went on" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "Exception ignored" not in done.stderr and "KeyboardInterrupt" not in done.stderr


@pytest.mark.slow  # a second interpreter importing the harness
def test_a_ctrl_c_after_a_preempted_record_keeps_the_requeue_exit(tmp_path):
    done = _launch(tmp_path / "run", "preempted", "record")
    assert done.returncode == EXIT_PREEMPTED, done.stderr[-3000:]  # was 130: a scheduler would not requeue it
    assert "Ctrl-C after the run had ended (status preempted)" in done.stderr


@pytest.mark.slow  # a second interpreter importing the harness
def test_a_ctrl_c_that_stopped_the_run_still_exits_130(tmp_path):
    done = _launch(tmp_path / "run", "interrupted", "record")
    assert done.returncode == 130, done.stderr[-3000:]
    assert "Ctrl-C after the run had ended" not in done.stderr


def test_ended_run_exit_follows_the_record(tmp_path):
    assert ended_run_exit(tmp_path) is None  # no record
    (tmp_path / "metrics.json").write_text("{not json")
    assert ended_run_exit(tmp_path) is None
    for status, code in [("ok", 0), ("preempted", EXIT_PREEMPTED), ("error", 1), ("interrupted", None)]:
        (tmp_path / "metrics.json").write_text(json.dumps({"status": status}))
        got = ended_run_exit(tmp_path)
        assert (None if got is None else got[0]) == code
        if got:
            assert got[1].startswith(f"Ctrl-C after the run had ended (status {status})")
