"""Round 46's leftovers: faults noticed in earlier rounds and left alone, each fixed as a kind.

Each test names what was typed, what happened, and checks what happens now.
"""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _save_step(out, step, resume=None):
    """A complete checkpoint of ``step`` in ``out/checkpoints`` (a tiny state), as a job's own save, with
    ``train.resume=<resume>`` in its config as the harness saves it (None: no config)."""
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter

    config = None if resume is None else {"train": {"resume": resume, "steps": 3000}}
    with CheckpointWriter(out / "checkpoints", async_save=False, config=config) as writer:
        writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0), info={"n": 1})


_READ_THEN_START = """
import sys, jax
from omegaconf import OmegaConf
from gensbi_sharding.checkpoint import saved_config, saved_info
from gensbi_sharding.harness import run_folder
out = sys.argv[1]
print(saved_config(out)["train"]["resume"], saved_info(out))
config = OmegaConf.create({"hydra": {"run": {"dir": out}, "sweep": {"dir": None},
                                     "overrides": {"task": ["train.resume=a"]}},
                           "train": {"resume": "a", "steps": 3000}, "distributed": {"mode": "none", "process_id": None}})
callback = run_folder.RefuseCompletedRun()
callback.on_run_start(config)  # launch.py's folder check of a requeue: reads the newest checkpoint's config
callback.on_run_end(config)
jax.config.update("jax_num_cpu_devices", 3)  # refused (RuntimeError) once the backend started
print(jax.device_count())
"""


def test_reading_a_checkpoints_config_and_info_leaves_jax_backend_unstarted(tmp_path):
    # Was: checkpoint.saved_config / saved_info read the JSON item through an Orbax Checkpointer, which starts JAX's
    # backend: any check before a run sets its device count that read one (the requeue check did, until round 45
    # read it another way) made the run fail "devices.cpu_count=8 was asked for, but JAX's backend already started".
    from gensbi_sharding.harness import outputs

    out = tmp_path / "b"
    _save_step(out, 30, resume="a")
    outputs.write_json(out / "metrics.json", {"status": "preempted", "stopped_at_step": 30})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("JAX_NUM_CPU_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", _READ_THEN_START, str(out)], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:2] == ["a {'n': 1}", "3"], proc.stdout


def test_a_negative_number_to_an_option_reaches_the_options_own_check(tmp_path, capsys):
    # Was: `sample.py run x.npy --seed -1e3` (and any benchmark script's option given -1e3, -inf, -1_000) ended in
    # argparse's "argument --seed: expected one argument": it took the value for an option, and named nothing.
    import pytest

    from gensbi_sharding.harness.own_observation import main

    sys.path.append(str(REPO / "benchmarks"))
    from sbibm import main as sbibm_main

    for argv, said in [
        (["r", "x.npy", "--seed", "-1e3"], "argument --seed: '-1e3' must be a whole number >= 0; e.g. 0"),
        (["r", "x.npy", "--se", "-1e3"], "argument --seed: '-1e3' must be a whole number >= 0; e.g. 0"),
        (["r", "x.npy", "--num-samples", "-inf"], "argument --num-samples: '-inf' is not a whole number; e.g. 10000"),
        (["r", "x.npy", "--ode-steps", "-1_0.5"], "argument --ode-steps: '-1_0.5' is not a whole number; e.g. 32"),
    ]:
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2 and f"sample.py: error: {said}\n" in capsys.readouterr().err, argv
    root = str(tmp_path / "root")
    for argv, said in [
        (["--budgets", "1000", "-1e3"], "argument --budgets: '-1e3' is not one of 1000, 10000, 100000"),
        (["--stop-grace", "-1e2"], "argument --stop-grace: '-1e2' must be an integer >= 1; e.g. 2"),
        (["--margin", "-5e-1"], "argument --margin: -5e-1 must be a finite number >= 0, e.g. --margin 0.5"),
    ]:
        with pytest.raises(SystemExit) as stop:
            sbibm_main(["run", "--root", root, *argv])
        assert stop.value.code == 2 and f" run: error: {said}\n" in capsys.readouterr().err, argv
    assert not (tmp_path / "root").exists()
    # A plain negative number, and the value given with '=', are read as before; an option's value is its own.
    with pytest.raises(SystemExit):
        main(["r", "x.npy", "--seed=-1e3", "--out", "-5"])
    assert "argument --seed: '-1e3' must be a whole number >= 0" in capsys.readouterr().err


def test_a_requeued_continuation_continued_once_by_auto_still_resumes_its_own_checkpoint(tmp_path, monkeypatch,
                                                                                       caplog):
    # Was: `python launch.py train.resume=a hydra.run.dir=b`, preempted after b's own save, continued once by hand
    # with train.resume=auto (which saved b's newest checkpoint), then preempted and requeued with the original
    # command: refused, "rerun with train.resume=auto", as if b continued another run; the requeued job ended in error.
    import shutil

    import pytest
    from omegaconf import OmegaConf

    from gensbi_sharding.checkpoint import committed_steps
    from gensbi_sharding.harness import outputs, run_folder
    from gensbi_sharding.harness.resume import resume_point

    monkeypatch.chdir(tmp_path)  # the launch folder, which a relative train.resume is read against
    out = tmp_path / "b"
    _save_step(tmp_path / "a", 10)
    _save_step(out, 30, resume="a")  # the original command's own save
    _save_step(out, 40, resume="auto")  # the attempt continued by hand
    outputs.write_json(out / "metrics.json", {"status": "preempted", "stopped_at_step": 40})
    assert run_folder.ensure_fresh(out, resume="a")["status"] == "preempted"
    with caplog.at_level("INFO", logger="gensbi_sharding"):
        assert resume_point(OmegaConf.create({"train": {"resume": "a"}}), out) == (out / "checkpoints" / "40").resolve()
    assert f"{out} already holds its own checkpoint (step 40) of this continuation" in caplog.text
    # Another lineage under the auto save: refused as before, naming the override that continues it here.
    _save_step(tmp_path / "a2", 5)
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder"):
        run_folder.ensure_fresh(out, resume="a2")
    # Every checkpoint kept saved by auto (the original's deleted, train.keep): which run b continues is not known,
    # so the requeue is refused, naming the one override that continues it.
    _save_step(out, 50, resume="auto")
    shutil.rmtree(out / "checkpoints" / "30", ignore_errors=True)  # the writer keeps two: gone already
    assert committed_steps(out / "checkpoints") == [40, 50]
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder"):
        run_folder.ensure_fresh(out, resume="a")


_HOLD_LOCK = """
import sys, time
from gensbi_sharding.harness.folder_lock import FolderLock
lock = FolderLock(sys.argv[1])
lock.acquire()
print("locked", flush=True)
time.sleep(120)
"""


def test_a_folder_refusal_of_a_run_started_from_python_names_the_settings_it_sets(tmp_path, monkeypatch):
    # Was: run(cfg) from Python into a folder holding a run was told "choose another hydra.run.dir", "rerun with
    # train.resume=auto", "the same command plus train.resume=auto ... hydra.run.dir=<new folder>": launch.py's
    # overrides, which no Python call takes (its continue hint already said cfg.output_dir in open_dict, round 45).
    import pytest
    from faults_helpers import compose_tiny
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from gensbi_sharding.harness import outputs, run_folder
    from gensbi_sharding.harness.folder_lock import FolderInUseError
    from gensbi_sharding.harness.run import run

    done, stopped, killed, used = (tmp_path / name for name in ("done", "stopped", "killed", "used"))
    outputs.write_json(done / "metrics.json", {"status": "ok", "final_step": 8})
    outputs.write_json(stopped / "metrics.json", {"status": "preempted", "stopped_at_step": 3})
    (killed / "checkpoints" / "5").mkdir(parents=True)
    python = "; set cfg.output_dir in omegaconf.open_dict(cfg)"
    for out, said in [
        (done, "which are never overwritten; choose another cfg.output_dir" + python),
        (stopped, "rerun with cfg.train.resume='auto' to continue it in this folder, or choose another cfg.output_dir"
                  + python),
        (killed, f"continue it here by the same call with cfg.train.resume='auto', or in a new folder with "
                 f"cfg.train.resume={str(killed)!r} and cfg.output_dir='<new folder>'" + python),
    ]:
        metrics = run(compose_tiny(output_dir=out))
        assert metrics["status"] == "error" and metrics["error"].endswith(said), metrics["error"]
        assert "hydra" not in metrics["error"]
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(used)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})  # another run writing there
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(FolderInUseError, match=r"wait for it to end, or choose another cfg\.output_dir; set "):
            run_folder.RunFolder(used, compose_tiny()).claim()
    finally:
        holder.kill()
        holder.wait()
    # Under launch.py (a Hydra job) the overrides it takes, as before.
    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
    hydra.hydra.runtime.output_dir, hydra.hydra.overrides.task = str(stopped), []
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(hydra)
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder, or choose "
                                              "another hydra.run.dir$"):
        run_folder.RunFolder(stopped, compose_tiny()).claim()
