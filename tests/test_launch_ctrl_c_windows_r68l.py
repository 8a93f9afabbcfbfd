"""A Ctrl-C anywhere in launch.py's job (``main``) gets a line true for it: the spans its handler did not cover.

Was: ``main`` marked the job started (``running``) and then, outside the ``try`` that handles a Ctrl-C, noted its
folder, its sweep and its record's stamp; a Ctrl-C there said "interrupted: the job's metrics.json records it (status
interrupted)" with no metrics.json written. Likewise one landing after the run returned (its record ``status: ok``)
and before the mark was cleared. The Ctrl-C is raised where it lands, deterministically, by patching that step.
"""

import json
import os
import shlex
from pathlib import Path

import pytest

from gensbi_sharding.harness.command_checks import command_problem

REPO = Path(__file__).resolve().parents[1]
FALSE_LINE = "interrupted: the job's metrics.json records it (status interrupted)"
# Ctrl-C as launch.py's job notes whether it is a sweep's: after the job was marked started, before its run
AT_THE_MARKS = ("import gensbi_sharding.harness.sweep_hints as h\n"
                "def ctrl_c():\n    raise KeyboardInterrupt\n"
                "h.hydra_job_overrides = ctrl_c\n")
# The run (a stand-in) wrote its record, ok, and returned; Ctrl-C as the console's quieting ends
AFTER_THE_RUN = ("import contextlib, json\n"
                 "import gensbi_sharding.harness.run as r, gensbi_sharding.harness.console as c\n"
                 "from gensbi_sharding.harness.run_folder import output_dir\n"
                 "def ran(cfg):\n    (output_dir(cfg) / 'metrics.json').write_text(json.dumps({'status': 'ok'}))\n"
                 "    return {'status': 'ok', 'c2st': 0.5}\n"
                 "@contextlib.contextmanager\ndef quiet(cfg):\n    yield\n    raise KeyboardInterrupt\n"
                 "r.run, c.quiet_console = ran, quiet\n")


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    """launch.py processes forked from one that imported its modules once (tests/fork_server.py)."""
    from fork_server import ForkServer

    server = ForkServer(tmp_path_factory.mktemp("forks"), dict(os.environ))
    yield server
    server.close()


def launch(forks, patch, *args):
    """launch.py with ``args``, ``patch`` run first: (exit code, stderr's lines)."""
    proc = forks.launch(list(args), cwd=REPO, prelude=patch, argv0="launch.py", stderr_apart=True)
    err = proc.communicate(timeout=120)[1]
    return proc.returncode, err.strip().splitlines()


@pytest.mark.slow  # a forked launch.py, stopped before its run (~2 s)
def test_ctrl_c_between_the_jobs_marks_says_nothing_was_recorded_and_how_to_start_it(tmp_path, forks):
    out = tmp_path / "run"
    code, lines = launch(forks, AT_THE_MARKS, "experiment=quick", f"hydra.run.dir={out}")
    assert code == 130 and FALSE_LINE not in lines and not any("Traceback" in line for line in lines), lines[-20:]
    assert lines[-1] == (f"interrupted by Ctrl-C as the run started, before it could record the stop: nothing was "
                         f"trained and no metrics.json was written; {out} keeps Hydra's record of the config (.hydra/) "
                         f"and launch.log; start it again with: python launch.py experiment=quick "
                         f"hydra.run.dir={out}"), lines[-20:]
    assert not (out / "metrics.json").exists()
    assert "this run did not start (interrupted by Ctrl-C as it started)" in (out / "launch.log").read_text()
    assert command_problem(shlex.split(lines[-1].split("start it again with: ", 1)[1])[2:]) is None


@pytest.mark.slow  # a forked launch.py, its run a stand-in (~2 s)
def test_ctrl_c_after_the_run_returned_names_the_jobs_record_not_an_interrupt(tmp_path, forks):
    out = tmp_path / "run"
    code, lines = launch(forks, AFTER_THE_RUN, "experiment=quick", f"hydra.run.dir={out}")
    # Session 77 (BREAK77's F3): a single run that ended exits as its record says, 0 for ok (as a SIGTERM there does),
    # where this test pinned 130 and "interrupted by Ctrl-C after 1 job(s) ended" after an ok record
    assert code == 0 and FALSE_LINE not in lines and not any("Traceback" in line for line in lines), lines[-20:]
    assert lines[-1] == (f"Ctrl-C after the run had ended (status ok): nothing left to stop; {out / 'metrics.json'} "
                         "records how it ended")
    assert json.loads((out / "metrics.json").read_text()) == {"status": "ok"}  # as the run left it


def test_job_ended_reads_the_record_this_attempt_wrote(tmp_path):
    from gensbi_sharding.harness.interrupt_lines import job_ended, record_stamp

    assert not job_ended(tmp_path, None)  # no record
    (tmp_path / "metrics.json").write_text('{"status": "ok"}')
    stamp = record_stamp(tmp_path)
    assert not job_ended(tmp_path, stamp)  # an earlier attempt's record
    assert job_ended(tmp_path, None)  # written by this attempt: ended ok
    (tmp_path / "metrics.json").write_text('{"status": "interrupted"}')
    assert not job_ended(tmp_path, None)  # the Ctrl-C stopped the run: not an ended job
    (tmp_path / "metrics.json").write_text("[1]")
    assert not job_ended(tmp_path, None)  # not a record
