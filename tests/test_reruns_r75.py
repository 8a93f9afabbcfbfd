"""The suite's one rerun: only a slow test whose processes JAX's coordination service aborted runs again.

CI failed once on a multi-process test whose two processes both ended in JAX's "stopped sending heartbeats" abort
(a loaded 2-core machine; the test's assertion printed their native stack traces). tests/abort_reruns.py gives such a
failure of a slow test one more run, and nothing else any (a fast test is not marked: see that module).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Each test fails on its first run (no flag file yet) with the words given, and passes on a second.
_TESTS = '''
from pathlib import Path

def _fails_once(name, words):
    flag = Path(__file__).parent / name
    if not flag.exists():
        flag.write_text("ran")
        raise AssertionError(words)

import pytest

@pytest.mark.slow
def test_aborted_processes():
    tail = "F1207 client.h:86] Terminating process because the JAX distributed service detected fatal errors"
    _fails_once("aborted", [tail + "\\\\n    @     0x7f4386a279ff  tsl::(anonymous namespace)::PThread::ThreadFn()"] * 2)

@pytest.mark.slow
def test_a_real_fault():
    _fails_once("real", "expected ['ok', 'preempted'], got ['ok', 'ok']")
'''


@pytest.mark.slow  # starts pytest in a second interpreter
def test_only_an_abort_of_jaxs_coordination_service_is_run_again(tmp_path):
    (tmp_path / "test_once.py").write_text(_TESTS)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "abort_reruns", "-c",
                           str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path), str(tmp_path / "test_once.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO / "tests")})
    summary = done.stdout.strip().splitlines()[-1]
    assert "1 failed, 1 passed, 1 rerun" in summary, done.stdout[-3000:]
    assert "FAILED test_once.py::test_a_real_fault" in done.stdout, done.stdout[-3000:]
