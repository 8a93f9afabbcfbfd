"""Where a run's device count comes from (config, environment) and the platform: conflicting, unreadable or
unstartable counts refused naming both sources and a fix that runs.
"""

import os
import re
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from faults_helpers import REPO, hint, run_tiny
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import resolve_cpu_count


@pytest.mark.parametrize("configured, environ, expected", [
    (None, {}, (8, "default")),
    (4, {}, (4, "devices.cpu_count")),
    (None, {"XLA_FLAGS": "--xla_cpu_foo --xla_force_host_platform_device_count=4"}, (4, "XLA_FLAGS")),
    (None, {"JAX_NUM_CPU_DEVICES": "2"}, (2, "JAX_NUM_CPU_DEVICES")),
    (4, {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}, (4, "devices.cpu_count")),
])
def test_device_count_source(configured, environ, expected):
    assert resolve_cpu_count(configured, environ) == expected


@pytest.mark.parametrize("configured, environ", [(100000, {}), (None, {"JAX_NUM_CPU_DEVICES": "2048"})])
def test_a_device_count_jax_cannot_start_with_is_refused_naming_the_limit(configured, environ):
    # devices.cpu_count=100000 hung in JAX's start-up, deaf to SIGTERM; 1,024 starts in seconds.
    assert resolve_cpu_count(1024, {}) == (1024, "devices.cpu_count")
    fix = "JAX_NUM_CPU_DEVICES" if environ else "devices.cpu_count"  # was devices.cpu_count: refused beside 2048
    with pytest.raises(ConfigError, match=rf"more simulated CPU devices than 1,024: .*set {fix}=1024 or fewer"):
        resolve_cpu_count(configured, environ)


def test_conflicting_device_counts_stop_the_run_naming_both(tmp_path, monkeypatch, devices):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    metrics = run_tiny(tmp_path / "run", "devices.cpu_count=8")
    assert metrics["status"] == "error"
    assert "two device counts disagree: devices.cpu_count=8 and XLA_FLAGS gives 4; set devices.cpu_count=4 " \
           "(or drop it) to use XLA_FLAGS's, or remove the count from XLA_FLAGS to use 8" in metrics["error"]


@pytest.mark.parametrize("environ, fix", [
    ({}, "devices.cpu_count=9"),
    ({"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}, "XLA_FLAGS=--xla_force_host_platform_device_count=9"),
    ({"JAX_NUM_CPU_DEVICES": "8"}, "JAX_NUM_CPU_DEVICES=9"),
])
def test_local_processes_that_do_not_split_the_devices_name_a_fix_that_runs(monkeypatch, environ, fix):
    # Was "set ... or devices.cpu_count=9" with the count from XLA_FLAGS: that override then stops the run
    # as a second count that disagrees with XLA_FLAGS'.
    from gensbi_sharding.harness.local_cluster import run_local_processes

    for name in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    cfg = OmegaConf.create({"distributed": {"local_processes": 3}, "devices": {"cpu_count": None}})
    with pytest.raises(ConfigError) as err:
        run_local_processes(cfg, None)
    assert str(err.value).endswith(f"set distributed.local_processes=2 or {fix}")


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_two_environment_device_counts_are_named_and_every_hint_leads_to_a_run(tmp_path, monkeypatch, devices):
    # Was circular: JAX_NUM_CPU_DEVICES=2 with XLA_FLAGS' 4 said "set devices.cpu_count=4"; that, "set 2"; and so on.
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "2")
    # The session's compile flags kept (conftest): JAX's cache key holds XLA_FLAGS (all but the device count), so the
    # runs below load the session's programs (was: the count alone, a key of its own: every program compiled again).
    monkeypatch.setenv("XLA_FLAGS", f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8")
    for configured in ((), ("devices.cpu_count=4",), ("devices.cpu_count=8",)):  # no devices.cpu_count settles it
        metrics = run_tiny(tmp_path / f"run{len(configured)}{configured}", *configured)
        assert metrics["error"] == (
            "ConfigError: the environment sets two device counts that disagree: JAX_NUM_CPU_DEVICES=2 and "
            "XLA_FLAGS's --xla_force_host_platform_device_count=8; unset one: unset JAX_NUM_CPU_DEVICES to use 8, "
            "or remove the count from XLA_FLAGS to use 2")
    monkeypatch.delenv("JAX_NUM_CPU_DEVICES")  # the hint's first fix: this process has 8 devices
    assert run_tiny(tmp_path / "unset")["status"] == "ok"
    # Both variables agreeing, against devices.cpu_count: the hint's count is then accepted.
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "8")
    metrics = run_tiny(tmp_path / "configured", "devices.cpu_count=4")
    assert metrics["error"] == (
        "ConfigError: two device counts disagree: devices.cpu_count=4 and JAX_NUM_CPU_DEVICES and XLA_FLAGS give 8; "
        "set devices.cpu_count=8 (or drop it) to use JAX_NUM_CPU_DEVICES and XLA_FLAGS's, or unset "
        "JAX_NUM_CPU_DEVICES and remove the count from XLA_FLAGS to use 4")
    assert run_tiny(tmp_path / "followed", f"devices.cpu_count={hint(metrics['error'], 'devices.cpu_count')}")[
        "status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("environ, message", [
    ({"JAX_NUM_CPU_DEVICES": "abc"},
     "JAX_NUM_CPU_DEVICES='abc' is not a whole number of simulated CPU devices; unset JAX_NUM_CPU_DEVICES "
     "(devices.cpu_count then gives the count), or set e.g. JAX_NUM_CPU_DEVICES=8"),
    ({"XLA_FLAGS": "--xla_force_host_platform_device_count=four"},
     "XLA_FLAGS's --xla_force_host_platform_device_count=four is not a whole number of simulated CPU devices; "
     "remove it from XLA_FLAGS (devices.cpu_count then gives the count), or give a count, e.g. "
     "--xla_force_host_platform_device_count=8"),
])
def test_an_unreadable_environment_device_count_is_one_line_before_jax(environ, message):
    # Was: a 29-line traceback from JAX's import (JAX_NUM_CPU_DEVICES=abc), or XLA's whole flag list.
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    proc = subprocess.run([sys.executable, "-c", "import runpy, sys; sys.modules['jax'] = None; "
                           f"sys.argv = ['launch.py']; runpy.run_path({str(REPO / 'launch.py')!r}, run_name='__main__')"],
                          env={**env, **environ}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr == f"[ERROR] {message}\n"


PLATFORM_GPU = ("devices.platform=gpu is not available here: JAX has cpu; set devices.platform=cpu, or "
                "devices.platform=null for JAX's default")


@pytest.mark.slow  # an end-to-end run (the hint followed: a training run)
def test_an_unavailable_platform_names_the_ones_jax_has_and_the_fix(tmp_path, devices):
    # Was: "RuntimeError: Unable to initialize backend 'rocm' ..." naming neither devices.platform nor the fix
    # (and, once JAX had started, devices.platform=gpu was silently ignored).
    metrics = run_tiny(tmp_path / "gpu", "devices.platform=gpu")
    assert metrics["error"] == f"ConfigError: {PLATFORM_GPU}"
    followed = run_tiny(tmp_path / "cpu", f"devices.platform={hint(metrics['error'], 'devices.platform')}")
    assert followed["status"] == "ok"


@pytest.mark.slow
def test_an_unavailable_platform_in_a_fresh_process_is_named_before_jax_starts():
    code = ("from gensbi_sharding.harness.devices import configure_devices\n"
            "try:\n    configure_devices(2, 'gpu')\nexcept Exception as err:\n    print(type(err).__name__, err)\n"
            "import jax\nprint(jax.default_backend(), jax.device_count())")
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.stdout.splitlines() == [f"ConfigError {PLATFORM_GPU}", "cpu 2"], proc.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("environ, fix", [
    ({}, "devices.cpu_count=2"),
    ({"XLA_FLAGS": "--xla_force_host_platform_device_count=3"}, "XLA_FLAGS=--xla_force_host_platform_device_count=2"),
    ({"JAX_NUM_CPU_DEVICES": "3"}, "JAX_NUM_CPU_DEVICES=2"),
])
def test_a_batch_the_devices_do_not_split_names_the_count_where_it_came_from(tmp_path, environ, fix):
    # Was: XLA_FLAGS=--xla_force_host_platform_device_count=3 python launch.py said '...; or keep data.batch_size=1024
    # on another mesh: mesh.model_axis=3 (data-parallel size 1) or devices.cpu_count=2 (data-parallel size 2)', and
    # 'launch.py devices.cpu_count=2' was refused in turn: "two device counts disagree: devices.cpu_count=2 and
    # XLA_FLAGS gives 3".
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    count = [] if environ else ["devices.cpu_count=3"]
    done = subprocess.run([sys.executable, str(REPO / "launch.py"), *count, f"hydra.run.dir={tmp_path / 'run'}"],
                          env={**env, **environ}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        "; or keep data.batch_size=1024 on another mesh: mesh.model_axis=3 (data-parallel size 1) or "
        f"{fix} (data-parallel size 2)"), done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_device_count_fix_in_xla_flags_keeps_the_other_flags_when_pasted(tmp_path):
    # Was: XLA_FLAGS="--xla_dump_to=D --xla_force_host_platform_device_count=3" launch.py was told '... or
    # XLA_FLAGS=--xla_force_host_platform_device_count=2', which pasted dropped the dump flag.
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    flags = f"--xla_dump_to={tmp_path}/d --xla_force_host_platform_device_count=3"
    done = subprocess.run([sys.executable, str(REPO / "launch.py"), f"hydra.run.dir={tmp_path / 'run'}"],
                          env={**env, "XLA_FLAGS": flags}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    fix = re.search(r" or (XLA_FLAGS=.+?) \(data-parallel size 2\)$", done.stderr.strip()).group(1)
    pasted = subprocess.run(["bash", "-c", f"{fix} printenv XLA_FLAGS"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert pasted.stdout.strip() == f"--xla_dump_to={tmp_path}/d --xla_force_host_platform_device_count=2"
    assert resolve_cpu_count(None, {"XLA_FLAGS": pasted.stdout.strip()}) == (2, "XLA_FLAGS")


@pytest.mark.slow
def test_an_environment_device_count_over_the_limit_names_a_fix_that_passes_when_pasted():
    # Was: JAX_NUM_CPU_DEVICES=2048 was told "set devices.cpu_count=1024", refused beside it as a second count.
    environ = {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=2048"}
    with pytest.raises(ConfigError) as err:
        resolve_cpu_count(None, environ)
    fix = re.search(r"; set (XLA_FLAGS=.+?) or fewer", str(err.value)).group(1)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    pasted = subprocess.run(["bash", "-c", f"{fix} printenv XLA_FLAGS"], env=env, capture_output=True, text=True,
                            timeout=60).stdout.strip()
    assert pasted == "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=1024"
    assert resolve_cpu_count(None, {"XLA_FLAGS": pasted}) == (1024, "XLA_FLAGS")


@pytest.mark.slow  # a launch (it ends as JAX's backend starts)
def test_a_flag_xla_does_not_know_leaves_a_log_naming_it_and_a_folder_the_next_run_takes(tmp_path):
    # Was: 'XLA_FLAGS=--xla_bogus_flag=1 launch.py experiment=quick hydra.run.dir=X' ended (exit 1) in XLA's
    # "Unknown flag in XLA_FLAGS", leaving X's .hydra/ and a launch.log ending at "[1/7] devices", nothing saying why.
    from gensbi_sharding.harness.folder_lock import FolderLock, folder_problem
    from gensbi_sharding.harness.run_folder import ensure_fresh

    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), "experiment=quick", f"hydra.run.dir={out}"],
                          env={**env, "XLA_FLAGS": "--xla_force_host_platform_device_count=2 --xla_bogus_flag=1"},
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    # XLA's own line reaches the console (was: it died unread in the pipe to launch.log, the console silent)
    assert "Unknown flag in XLA_FLAGS: --xla_bogus_flag=1" in proc.stderr, proc.stderr[-2000:]
    last = (out / "launch.log").read_text().splitlines()[-1]
    assert "XLA_FLAGS holds --xla_bogus_flag=1, which XLA reads as JAX's backend starts, next" in last, last
    assert "remove that flag from XLA_FLAGS and run the same command again" in last
    # the folder is the next run's: no refusal, no earlier run to continue, its lock free
    assert folder_problem(out, sweep=False) is None and ensure_fresh(out) is None
    lock = FolderLock(out)
    lock.acquire()
    lock.release()


@pytest.mark.slow
def test_a_count_fix_with_both_variables_set_alike_passes_when_pasted(monkeypatch):
    # Was: JAX_NUM_CPU_DEVICES=2048 with XLA_FLAGS' count 2048 too was told 'set JAX_NUM_CPU_DEVICES=1024', and a
    # batch the 3 devices do not split 'or JAX_NUM_CPU_DEVICES=2 (data-parallel size 2)': pasted, XLA_FLAGS' old
    # count stayed, refused as "the environment sets two device counts that disagree". Now the count leaves XLA_FLAGS.
    from gensbi_sharding.harness.hints import device_alternatives

    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    for count, dump in ((2048, "--xla_dump_to=/tmp/d "), (3, "")):
        both = {**base, "JAX_NUM_CPU_DEVICES": str(count), "XLA_FLAGS": f"{dump}--xla_force_host_platform_device_count"
                f"={count}"}
        if count > 1024:
            with pytest.raises(ConfigError) as err:
                resolve_cpu_count(None, both)
            fix = re.search(r"; set (.+?) or fewer", str(err.value)).group(1)
        else:
            monkeypatch.setattr(os, "environ", both)
            said = device_alternatives(6, shards=1, train_rows=60, devices=3, axis=1, source="JAX_NUM_CPU_DEVICES")
            monkeypatch.undo()
            fix = re.search(r".* or (.+?) \(data-parallel size 2\)$", said).group(1)
        pasted = subprocess.run(["bash", "-c", f"{fix} printenv JAX_NUM_CPU_DEVICES XLA_FLAGS"], env=both,
                                capture_output=True, text=True, timeout=60).stdout.splitlines()
        want = 1024 if count > 1024 else 2
        assert pasted == [str(want), dump.strip()], (fix, pasted)
        assert resolve_cpu_count(None, {"JAX_NUM_CPU_DEVICES": pasted[0], "XLA_FLAGS": pasted[1]}) == (
            want, "JAX_NUM_CPU_DEVICES")
