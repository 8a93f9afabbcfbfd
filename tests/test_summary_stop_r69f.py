"""A preemption notice after a sweep's last job ended, as its summary is written (round 69, LEFT69 item 1).

Was: launch.py holds SIGTERM outside a run, and one that came while the sweep's summary table and plot were written was
held, then forgotten: the sweep exited 0 with no word, as if no notice had come. Now it is answered once the summary is
whole: a line naming the signal, that every job ended, where the summary is and what is left to run (its command),
then exit 75 as a preempted run.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from faults_helpers import LAUNCH, TINY

# SIGTERM to itself as the sweep's plot is drawn (the summary's last file), then the plot as before
IN_PLOT = """
import os, runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal: a background job's tests inherit it ignored
from gensbi_sharding.harness import plots
real = plots.plot_sweep
def plot_sweep(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    return real(*args, **kwargs)
plots.plot_sweep = plot_sweep
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow  # a one-job sweep through launch.py (~8 s)
def test_a_notice_while_the_summary_is_written_ends_the_sweep_preempted_with_its_summary_whole(tmp_path):
    sweep = tmp_path / "sweep"
    done = subprocess.run([sys.executable, "-c", IN_PLOT, str(LAUNCH), "-m", *TINY, "seed=0",
                           f"hydra.sweep.dir={sweep}"], cwd=LAUNCH.parent, capture_output=True, text=True, timeout=240)
    said = done.stdout + done.stderr
    # 0: every job and the summary complete, nothing for a requeue to do (its 75 at first: a requeue was refused)
    assert done.returncode == 0, said[-3000:]
    assert said.strip().splitlines()[-1] == (
        f"preempted by SIGTERM at the sweep's end, after its last job: its 1 job ended, each recorded in its folder's "
        f"metrics.json; the sweep's summary is complete (sweep_summary.csv/.md/.png in {sweep}); every job completed, "
        "so nothing is left to run")
    assert json.loads((sweep / "0" / "metrics.json").read_text())["status"] == "ok"
    rows = (sweep / "sweep_summary.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith("0,") and rows[1].endswith(",ok,")
    assert (sweep / "sweep_summary.md").read_text().count("| ok ") == 1 and (sweep / "sweep_summary.png").stat().st_size


def test_a_sweep_stopped_at_its_end_with_a_failed_job_names_that_jobs_command(tmp_path, request):
    from test_hydra_room import sweep_at_job_zero

    from gensbi_sharding.harness import summary
    from gensbi_sharding.harness.summary_stop import summary_stop_lines

    sweep = tmp_path / "sweep"
    sweep_at_job_zero(sweep, task="seed=0,1")
    (sweep / "1" / ".hydra").mkdir(parents=True)
    (sweep / "1" / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
    (sweep / "1" / "metrics.json").write_text('{"status": "error", "error": "boom"}')
    summary.record_end(OSError(28, "No space left on device"))  # the summary refused
    request.addfinalizer(summary.clear_end)
    argv = [str(LAUNCH), "-m", "seed=0,1", f"hydra.sweep.dir={sweep}"]
    lines, finished = summary_stop_lines(sweep / "1", signal.SIGUSR1, argv)
    assert not finished
    assert lines == [
        "preempted by SIGUSR1 at the sweep's end, after its last job: its 2 jobs ended, each recorded in its folder's "
        "metrics.json; the sweep's summary is not written (the error above says why and the command that writes it); "
        "not every job completed",
        "to continue the rest of the sweep, a sweep folder holding completed jobs is never rerun as a whole: continue "
        f"its one unfinished job with: python launch.py seed=1 train.resume=auto hydra.mode=RUN "
        f"hydra.run.dir={sweep / '1'}"]


@pytest.mark.slow  # a one-job sweep through launch.py (~8 s)
def test_a_ctrl_c_while_the_summary_is_written_writes_it_whole_and_says_so(tmp_path):
    # Was: "interrupted by Ctrl-C after 1 job(s) ended, each recorded in its folder's metrics.json", exit 130, the
    # summary's csv and md written and its plot not, without a word
    sweep = tmp_path / "sweep"
    once = IN_PLOT.replace("def plot_sweep(*args, **kwargs):\n    os.kill(os.getpid(), signal.SIGTERM)",
                           "sent = []\ndef plot_sweep(*args, **kwargs):\n    if not sent:\n        sent.append(1)\n"
                           "        os.kill(os.getpid(), signal.SIGINT)")
    assert once != IN_PLOT
    done = subprocess.run([sys.executable, "-c", once, str(LAUNCH), "-m", *TINY, "seed=0", f"hydra.sweep.dir={sweep}"],
                          cwd=LAUNCH.parent, capture_output=True, text=True, timeout=240)
    said = done.stdout + done.stderr
    assert done.returncode == 130, said[-3000:]
    assert said.strip().splitlines()[-1] == (
        f"interrupted by Ctrl-C at the sweep's end, after its last job: its 1 job ended, each recorded in its folder's "
        f"metrics.json; the sweep's summary is complete (sweep_summary.csv/.md/.png in {sweep}); every job completed, "
        "so nothing is left to run")
    assert (sweep / "sweep_summary.png").stat().st_size and len((sweep / "sweep_summary.csv").read_text().split()) == 2


@pytest.mark.slow
def test_a_summary_a_second_ctrl_c_cut_short_names_the_command_that_writes_it(tmp_path, monkeypatch):
    import shlex

    from test_hydra_room import sweep_at_job_zero

    from gensbi_sharding.harness import summary
    from gensbi_sharding.harness.summary_stop import summary_stop_lines

    sweep = tmp_path / "sweep"
    sweep_at_job_zero(sweep, task="seed=0")

    def cut_short(job):
        raise KeyboardInterrupt

    monkeypatch.setattr(summary, "refresh_sweep_summary", cut_short)
    lines, _ = summary_stop_lines(sweep / "0", signal.SIGINT, [str(LAUNCH), "-m", "seed=0"], rewrite=True)
    head, command = lines[0].split("; write it with: ", 1)
    assert head == (f"interrupted by Ctrl-C at the sweep's end, after its last job: its 1 job ended, each recorded in "
                    "its folder's metrics.json; the sweep's summary is not rewritten (cut short)")
    command, _, tail = command.rpartition("; ")  # the command's own code holds "; "
    assert tail == "every job completed, so nothing is left to run" and len(lines) == 1
    words = shlex.split(command)
    assert words[:2] == ["python", "-c"]
    monkeypatch.undo()
    subprocess.run([sys.executable, *words[1:]], check=True, timeout=120)  # the command as pasted writes it
    assert (sweep / "sweep_summary.csv").read_text().splitlines()[1].startswith("0,")
