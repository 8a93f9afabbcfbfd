"""A closed CheckpointWriter stops watching for the script's end; the next writer watches again.

Was: the first writer armed a process-wide ``sys.monitoring`` hook (PY_RETURN, PY_UNWIND) for good, so after
``close()`` every exception unwinding any frame still ran its callback (exception-heavy code 15-40 % slower in a
review's measurement). Now closing the last open writer frees the tool id; a later writer left open is still finished
at the script's end.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import sys
    import jax
    import jax.numpy as jnp
    from gensbi_sharding.checkpoint import CheckpointWriter

    def ours():
        return [t for t in (3, 4, 5) if sys.monitoring.get_tool(t) == "gensbi_sharding.checkpoint exit"]

    first = CheckpointWriter(sys.argv[1] + "/a")
    print("open", ours(), flush=True)
    first.close()
    print("closed", ours(), flush=True)
    second = CheckpointWriter(sys.argv[1] + "/b")  # left open: the script's end finishes its save
    print("again", ours(), flush=True)
    second.save(1, {"w": jnp.ones((8,))}, jax.random.key(0))
""")


@pytest.mark.slow  # a fresh process, about 3 s
def test_closing_the_last_writer_frees_the_exit_watch_and_a_new_writer_arms_it(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert lines["open"] != "[]" and lines["closed"] == "[]" and lines["again"] != "[]", proc.stdout
    assert "its save of step 1 was finished" in proc.stderr, proc.stderr[-3000:]
    assert (tmp_path / "b" / "1").is_dir()
