"""Shared pieces of the fault tests: composing the tiny config, running it in-process, a NaN simulator."""

import copy
import re
import sys
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from gensbi_sharding.harness.config import register_configs

REPO = Path(__file__).resolve().parents[1]
# experiment=quick, smaller still: 8 steps, no posterior evaluation.
TINY = ("experiment=quick", "train.steps=8", "train.log_every=4", "eval.enabled=false",
        "data.num_simulations=768")


# Compositions made before, by overrides: a composition depends only on them and the files of conf/, and
# Hydra takes ~0.1 s a compose (many tests run the same tiny config). Each caller gets a deep copy of its own.
_COMPOSED = {}


def compose_tiny(*overrides: str, output_dir: Path | None = None):
    """The config launch.py composes from ``TINY`` plus ``overrides`` (and an output folder).

    One composed before is handed out again as a deep copy; not kept: one that raised (it raises
    again) and one with a ``hydra.searchpath`` (its files are the test's own, and may change).
    """
    if overrides in _COMPOSED:
        cfg = copy.deepcopy(_COMPOSED[overrides])
    else:
        register_configs()
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=[*TINY, *overrides])
        if not any(o.lstrip("+~").startswith("hydra.searchpath") for o in overrides):
            _COMPOSED[overrides] = copy.deepcopy(cfg)
    if output_dir is not None:
        with open_dict(cfg):
            cfg.output_dir = str(output_dir)
    return cfg


def run_tiny(out: Path, *overrides: str) -> dict:
    """``run()`` of the tiny config in this process (8 simulated devices), into ``out``."""
    from gensbi_sharding.harness.run import run

    return run(compose_tiny(*overrides, output_dir=out))


def ctrl_c_after(patch, step: int) -> None:
    """Make the training loop raise KeyboardInterrupt right after ``step``'s checkpoint hook, as Ctrl-C there would
    (``patch``: a ``monkeypatch`` or its ``context()``)."""
    from gensbi_sharding.harness import train as train_module

    real = train_module.train

    def train(*args, on_step, **kwargs):
        def hook(at, state):
            done = on_step(at, state)
            if at == step:
                raise KeyboardInterrupt
            return done
        return real(*args, on_step=hook, **kwargs)

    patch.setattr(train_module, "train", train)


def under_command(overrides, check):
    """``check(cfg)`` with the config and Hydra's state ``launch.py``'s app holds for ``overrides`` (what
    ``composed_defaults`` reads), Hydra's state cleared after."""
    from hydra.core.hydra_config import HydraConfig

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        config = compose("config", overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(config)
        try:
            cfg = config.copy()
            with open_dict(cfg):
                del cfg["hydra"]
            return check(cfg)
        finally:
            HydraConfig.instance().cfg = None



def run_with_own_preset(tmp_path):
    """A run folder's ``.hydra`` record of ``<searchpath> experiment=mine seed=3``, where ``experiment/mine`` is a
    preset of one's own (``model.width: 24``) in ``tmp_path/my_conf``: ``(the preset's file, the searchpath override,
    the run folder)``."""
    preset = tmp_path / "my_conf" / "experiment" / "mine.yaml"
    preset.parent.mkdir(parents=True)
    preset.write_text("# @package _global_\nmodel:\n  width: 24\n")
    search = f"hydra.searchpath=[file://{tmp_path / 'my_conf'}]"
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(under_command([search, "experiment=mine", "seed=3"], OmegaConf.to_yaml))
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=mine\n- seed=3\n")
    (run / ".hydra" / "hydra.yaml").write_text(f"hydra:\n  overrides:\n    hydra:\n    - {search}\n")
    return preset, search, run

def hint(message: str, key: str) -> str:
    """The value a message tells the user to give ``key`` (``set key=V`` or ``key to at least V``)."""
    found = re.search(rf"(?:set |add ){re.escape(key)}=([\w\-]+)|{re.escape(key)} to at least (\d+)", message)
    assert found, (key, message)
    return found.group(1) or found.group(2)


class NonFiniteTask:
    """An sbibm task whose simulator returns NaN / inf in chosen rows (and maybe a bad observation)."""

    def __init__(self, task, bad_rows: dict[int, float], observation=None):
        self.task, self.bad_rows, self.observation, self.simulated = task, bad_rows, observation, []

    def __getattr__(self, name):
        return getattr(self.task, name)

    def get_observation(self, num_observation):
        # One observation for every number, or {number: observation} for some of them.
        chosen = (self.observation.get(num_observation) if isinstance(self.observation, dict)
                  else self.observation)
        if chosen is not None:
            return np.asarray(chosen, np.float32)
        return self.task.get_observation(num_observation)



def patch_task(monkeypatch, bad_rows: dict[int, float], observation=None) -> list:
    """Make every sbibm task simulate through ``NonFiniteTask``; returns the list of tasks made.

    The simulator runs jitted, one row at a time (``harness.tasks.simulate``), so the bad
    values are written into the simulated batch right after it, where ``load_task`` gets it.
    """
    import sbibm_jax

    from gensbi_sharding.harness import data

    real, made, real_simulate = sbibm_jax.get_task, [], data.simulate

    def get_task(name):
        made.append(NonFiniteTask(real(name), bad_rows, observation))
        return made[-1]

    def simulate(task, key, num_simulations):
        theta, x = real_simulate(task, key, num_simulations)
        x = np.array(x, dtype=np.float32)
        for row, value in task.bad_rows.items():
            if row < len(x):
                x[row, 0] = value
        task.simulated.append(x)
        return theta, x

    monkeypatch.setattr(sbibm_jax, "get_task", get_task)
    monkeypatch.setattr(data, "simulate", simulate)
    return made


def local_process_commands(monkeypatch, run_dir: Path) -> list[list[str]]:
    """The commands ``distributed=local`` starts its 2 processes with, each replaced by a process that ends at
    once (only its command is checked)."""
    import subprocess
    import sys

    from omegaconf import OmegaConf

    from gensbi_sharding.harness import local_cluster

    started, real_popen = [], subprocess.Popen

    def record(command, env, pass_fds, stderr=None):
        started.append(command)
        return real_popen([sys.executable, "-c", "pass"], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", record)
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    local_cluster.run_local_processes(cfg, run_dir)
    return started


def saved_checkpoint(run_dir: Path, config: dict, info: dict, step: int = 8) -> Path:
    """``run_dir/checkpoints/<step>``, written by the library's ``CheckpointWriter``: ``config`` and ``info`` as a run
    saves them beside one small array, so a reader finds what it finds in a run's folder (no training, no model)."""
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter

    with CheckpointWriter(Path(run_dir) / "checkpoints", config=config, async_save=False) as writer:
        writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0), info=info)
    return Path(run_dir) / "checkpoints" / str(step)


def saved_two_moons_run(run_dir: Path, **config) -> Path:
    """``run_dir``, a two_moons MLP run's folder holding one checkpoint at step 8 (``saved_checkpoint``: no training,
    no model) with identity normalisation; ``config`` adds or replaces top-level config entries (``train=...``)."""
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    saved = {"data": {"name": "two_moons", "x_transform": "none"}, "model": {"name": "mlp"}, "seed": 0,
             "eval": {"num_samples": 16, "ode_steps": 4}, **config}
    stats = {"theta_mean": [0.0, 0.0], "theta_std": [1.0, 1.0], "x_mean": [0.0, 0.0], "x_std": [1.0, 1.0]}
    return saved_checkpoint(run_dir, saved, {NORMALIZATION: stats}).parents[1]


def sweep_of_runs(tmp_path: Path, run: Path, records) -> Path:
    """``tmp_path/sweep``, a sweep folder whose job ``k`` is a copy of ``run``'s folder with ``records[k]`` as its
    metrics.json (None: none, as a killed job leaves), and the ``multirun.yaml`` that marks a sweep."""
    import json
    import shutil

    sweep = tmp_path / "sweep"
    for k, record in enumerate(records):
        shutil.copytree(run, sweep / str(k))
        if record is not None:
            (sweep / str(k) / "metrics.json").write_text(json.dumps(record))
    (sweep / "multirun.yaml").write_text("")
    return sweep


def registered(request, kind: str, name: str, factory):
    """Register ``factory`` as ``name`` as a user does (``register_model`` or ``register_data``, by ``kind``); the
    registration is removed (``registry.unregister``) when the test ends, so no other test sees it."""
    from gensbi_sharding.harness import registry

    registry.model_names()  # the built-ins first, so this registration is the only addition
    (registry.register_model if kind == "model" else registry.register_data)(name)(factory)
    request.addfinalizer(lambda: registry.unregister(kind, name))
    return factory


def save_step(out, step, resume=None, info=None):
    """A complete checkpoint of ``step`` in ``out/checkpoints`` (a tiny state), as a job's own save, with
    ``train.resume=<resume>`` in its config as the harness saves it (None: no config) and ``info`` beside it."""
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter

    config = None if resume is None else {"train": {"resume": resume, "steps": 3000}}
    with CheckpointWriter(out / "checkpoints", async_save=False, config=config) as writer:
        writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0), info=info)


def assert_refused_before_training(metrics: dict, out, *needles: str) -> None:
    assert metrics["status"] == "error", metrics
    for needle in needles:
        assert needle in metrics["error"], (needle, metrics["error"])
    assert not (out / "train_losses.npz").exists() and not (out / "checkpoints").exists()


def as_hydra_job(monkeypatch, out, task, mode=None, hydra_overrides=()):
    """Make Hydra's config say this process is the job in ``out`` (of Hydra's ``mode``; None: a single run), launched
    with overrides ``task`` (and ``hydra_overrides``, which Hydra records apart: ``hydra.searchpath=...``)."""
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig

    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
    hydra.hydra.runtime.output_dir, hydra.hydra.overrides.task = str(out), task
    hydra.hydra.overrides.hydra = list(hydra_overrides)
    if mode is not None:
        hydra.hydra.mode = mode
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(hydra)


def launches_in_folders(root: Path, commands: dict, prepare) -> dict:
    """``{name: (its process, its folder)}``: each ``launch.py`` command of ``commands`` (``{name: args}``, ``{tmp}``
    in an argument standing for its folder) run in a folder of its own under ``root``, filled first by
    ``prepare(folder)``; all forked from one process that imported launch.py's modules once (tests/fork_launch.py)."""
    import os

    from fork_launch import REPO, run_forked, script_imports

    runs = []
    for name, args in commands.items():
        folder = root / name.replace(" ", "_")
        prepare(folder)
        runs.append({"args": [a.format(tmp=folder) for a in args], "cwd": folder})
    (root / "fork").mkdir()
    procs = run_forked(runs, env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=600, workdir=root / "fork",
                       imports=tuple(script_imports(REPO / "launch.py")))
    return {name: (proc, run["cwd"]) for name, proc, run in zip(commands, procs, runs)}


def load_benchmark(name: str):
    """A benchmark script (``benchmarks/<name>.py``) as a module, its ``main()`` not run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{name}_script", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a local coordinator)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_together(commands: list[list[str]], bound: float, envs: list[dict] | None = None) -> list[tuple[str, int]]:
    """Start every command at once (one process each, stderr into stdout) and wait for all, each at most ``bound``
    seconds: their console output and exit codes. Any still running when this returns (a bound passed, an error) is
    killed, so a hung process of several never outlives its test."""
    import subprocess

    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for command, env in zip(commands, envs or [None] * len(commands))]
    try:
        return [(proc.communicate(timeout=bound)[0], proc.returncode) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


LAUNCH = Path(__file__).parent.parent / "launch.py"


def sweep_on_two(sweep, *overrides, prelude0=None, prelude1=None, bound=240):
    """Processes 0 and 1 of one ``launch.py -m`` sweep (dry runs), explicit mode, a free local coordinator port:
    their console output and exit codes. ``prelude0``/``prelude1``: Python run by process 0/1 before launch.py (a
    patch; it ends by running launch.py, ``sys.argv[1]``)."""
    port = free_port()
    args = [str(LAUNCH), "-m", *TINY, "dry_run=true", "distributed.mode=explicit", "distributed.num_processes=2",
            f"distributed.coordinator_address=127.0.0.1:{port}", "distributed.timeout_s=60",
            f"hydra.sweep.dir={sweep}", *overrides]
    preludes = (prelude0, prelude1)
    return run_together([[sys.executable, *(["-c", preludes[rank]] if preludes[rank] else []), *args,
                          f"distributed.process_id={rank}"] for rank in (0, 1)], bound)


def counted(monkeypatch, module, name: str) -> list:
    """Patch ``module.name`` to record each call (one entry per call) and go on to the original: the list of calls."""
    calls = []
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls
