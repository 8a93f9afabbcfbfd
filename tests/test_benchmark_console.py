"""What the benchmark scripts print to a console: one without UTF-8, a pipe, and a size too small to
judge."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from faults_helpers import load_benchmark

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "benchmarks"))  # the scripts' shared cli_args
SCRIPTS = sorted(p.name for p in (REPO / "benchmarks").glob("*.py") if 'if __name__ == "__main__":' in p.read_text()
                 and not p.name.startswith("sbibm"))


@pytest.mark.slow
def test_a_table_on_an_ascii_console_is_printed_escaped_not_a_traceback(tmp_path):
    # Was: gensbi_scale.py table under a TMPDIR named 'résultats' on a PYTHONIOENCODING=ascii console ended in an
    # UnicodeEncodeError traceback at its first line (the command it runs, naming that folder).
    tmp = tmp_path / "r\u00e9sultats"
    tmp.mkdir()
    ran = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gensbi_scale.py"), "table", "--timeout", "1"],
                         capture_output=True, timeout=120,
                         env={**os.environ, "TMPDIR": str(tmp), "PYTHONIOENCODING": "ascii", "JAX_PLATFORMS": "cpu"})
    assert b"UnicodeEncodeError" not in ran.stderr, ran.stderr.decode(errors="replace")[-2000:]
    assert ran.stdout.startswith(b"$ ") and b"r\\xe9sultats" in ran.stdout, ran.stdout[:500]


def test_every_script_fits_its_console_before_it_prints():
    # The scripts' entries, each (sbibm*.py: its own); a script added later is held to it too
    for script in SCRIPTS:
        entry = (REPO / "benchmarks" / script).read_text().split('if __name__ == "__main__":\n', 1)[1]
        assert entry.lstrip().startswith("fit_console()"), script


@pytest.mark.slow
def test_sbibm_run_on_an_ascii_console_prints_its_jobs_command_escaped(tmp_path):
    # Was: 'sbibm.py run --root <a folder named résultats>' on a PYTHONIOENCODING=ascii console ended in an
    # UnicodeEncodeError traceback at the first job's line (its command names the folder); sbibm.py never fitted its
    # console. The job itself is not run: launch is stubbed, its lines alone are printed.
    root = tmp_path / "r\u00e9sultats"
    stub = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); import sbibm_jobs; "
            "sbibm_jobs.launch = lambda command, log, grace_s, checkpoints=True: (1, False); "
            "sys.argv = ['sbibm.py', 'run', '--root', sys.argv[2], '--tasks', 'two_moons', '--budgets', '1000']; "
            "runpy.run_path(sys.argv[0].join([sys.path[0] + '/', '']), run_name='__main__')")
    ran = subprocess.run([sys.executable, "-c", stub, str(REPO / "benchmarks"), str(root)], capture_output=True,
                         timeout=120, env={**os.environ, "PYTHONIOENCODING": "ascii", "JAX_PLATFORMS": "cpu"})
    assert b"UnicodeEncodeError" not in ran.stderr, ran.stderr.decode(errors="replace")[-2000:]
    assert ran.stdout.startswith(b"two_moons 1000: ") and b"r\\xe9sultats" in ran.stdout, ran.stdout[:500]


@pytest.mark.slow
def test_gensbis_progress_bars_stay_off_a_pipe():
    # Was: gensbi_pipeline.py ... | tee: GenSBI's tqdm bars (ANSI codes, redrawn) made 20 KB lines of the output.
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from cli_args import bars_off_unless_terminal; "
             "bars_off_unless_terminal(); from tqdm.auto import tqdm; [None for _ in tqdm(range(50))]; print('done')")
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    ran = subprocess.run([sys.executable, "-c", probe, str(REPO / "benchmarks")], capture_output=True, text=True,
                         timeout=60, env=env)
    assert ran.stdout == "done\n" and ran.stderr == "", ran.stderr
    entry = (REPO / "benchmarks" / "gensbi_pipeline.py").read_text().split('if __name__ == "__main__":\n', 1)[1]
    assert "bars_off_unless_terminal()" in entry.split("main()")[0]  # before main imports GenSBI


@pytest.mark.slow  # one interpreter importing JAX and GenSBI: about 5 s
@pytest.mark.parametrize("steps, judged", [(30, False), (200, True)])
def test_gensbi_pipelines_ratio_is_not_judged_from_a_few_steps(monkeypatch, capsys, steps, judged):
    # Was: --steps 30 --num-samples 100 --folds 2 printed a ratio of 9 steady steps with no word that it is none.
    import gensbi_sharding.harness.run as harness_run

    pytest.importorskip("gensbi")
    module = load_benchmark("gensbi_pipeline")
    monkeypatch.setattr(harness_run, "run", lambda cfg: {"status": "ok", "median_step_s": 0.02, "c2st": 0.9,
                                                        "compile_s": 1.0})
    monkeypatch.setattr(module, "run_gensbi", lambda cfg, args, out: (
        {"step_s": 0.01, "mean_step_s": 0.01, "wall_s": 1.0, "val_every": 100, "validations": 0, "c2st": 0.9,
         "c2st_last": 0.9, "params": 10}, None))
    monkeypatch.setattr(sys, "argv", ["gensbi_pipeline.py", "--steps", str(steps), "--num-samples", "100",
                                      "--folds", "2"])
    module.main()
    out = capsys.readouterr().out
    assert "| ratio harness / GenSBI | 2.000 | | |" in out
    note = (f"ratio not judged at this size: {steps} steps, under the 200 it is set for (the first 20 compile); the "
            "default, --steps 2000, judges it")
    assert (note in out) is not judged, out
