"""The benchmark scripts besides ``sbibm.py`` (``init.py``, ``shard_model.py``, ``step_overhead.py``,
``gensbi_pipeline.py``, ``gensbi_scale.py``) used as someone reproducing the README's tables uses them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (REPO / "benchmarks").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())

# Runs each script as ``python benchmarks/<script> --help`` does (its folder first on sys.path), then asks
# where ``import gensbi_sharding`` now comes from.
PROBE = """
import importlib.util, runpy, sys
start = list(sys.path)
for script in sys.argv[1:]:
    sys.path[:] = [{benchmarks!r}] + start[1:]
    for name in [m for m in sys.modules if m.split(".")[0] in ("gensbi_sharding", "cli_args")]:
        del sys.modules[name]
    sys.argv = [script, "--help"]
    try:
        runpy.run_path({benchmarks!r} + "/" + script, run_name="__main__")
    except SystemExit:
        pass
    print(script, importlib.util.find_spec("gensbi_sharding").origin, flush=True)
"""


@pytest.mark.slow  # one interpreter importing JAX and GenSBI: about 5 s
def test_every_script_measures_this_checkout_not_an_installed_copy(tmp_path):
    # Was: python benchmarks/init.py (shard_model.py, step_overhead.py, gensbi_pipeline.py, gensbi_scale.py's
    # own imports) put only benchmarks/ on sys.path, so gensbi_sharding came from whatever the environment had
    # installed: another clone's editable install, or a non-editable copy of older code. Here such a copy
    # shadows the checkout the way site-packages does.
    shadow = tmp_path / "site" / "gensbi_sharding"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('the installed copy, not this checkout')\n")
    proc = subprocess.run([sys.executable, "-c", PROBE.format(benchmarks=str(REPO / "benchmarks")), *SCRIPTS],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site"), "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.split(" ", 1)[0] in SCRIPTS)
    assert SCRIPTS and found == {s: str(REPO / "gensbi_sharding" / "__init__.py") for s in SCRIPTS}
