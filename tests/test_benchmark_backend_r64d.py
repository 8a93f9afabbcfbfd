"""benchmarks/gensbi_pipeline.py's GenSBI side runs whatever ``MPLBACKEND`` names (gensbi.recipes imports
matplotlib, which raised on a name it does not know)."""

import os
import subprocess
import sys

import pytest

from faults_helpers import REPO

# A fresh interpreter (~5 s: jax, gensbi): matplotlib reads MPLBACKEND once, at its first import.
PROBE = """
import importlib.util, sys, types
sys.path.insert(0, {bench!r})
spec = importlib.util.spec_from_file_location("gensbi_pipeline_script", {script!r})
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)
import gensbi_sharding.harness.pipeline as pipeline

class Reached(Exception):
    pass

def reached(*args, **kwargs):
    raise Reached
pipeline.build_pipeline = reached  # the first thing after GenSBI's import: it got that far
try:
    script.run_gensbi(types.SimpleNamespace(data=None, seed=0), None, "unused")
except Reached:
    print("reached build_pipeline")
"""


@pytest.mark.slow
def test_the_gensbi_side_imports_gensbi_under_an_unknown_mplbackend():
    # Was: "ValueError: 'nonexistent' is not a valid value for backend" at `from gensbi.recipes import ...`.
    pytest.importorskip("gensbi")
    code = PROBE.format(bench=str(REPO / "benchmarks"), script=str(REPO / "benchmarks" / "gensbi_pipeline.py"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MPLBACKEND": "nonexistent"})
    assert done.returncode == 0 and done.stdout.strip() == "reached build_pipeline", done.stderr[-2000:]
