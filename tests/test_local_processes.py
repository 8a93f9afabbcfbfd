"""distributed=local: the harness as two real JAX processes on loopback, against one process."""

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = ["experiment=quick", "rule=fsdp", "mesh.model_axis=2", "train.steps=12", "train.log_every=4",
        "eval.enabled=false"]
STRICT_FLUX1 = ("model=flux1", "model.num_heads=3", "model.axes_dim=[6,0]")  # "strict": 18 does not split over 4


def launch_env():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("HYDRA_FULL_ERROR", None)
    return env


# The module's launches, each as ``python launch.py <TINY> <args>`` in a folder of its own: name -> (its
# arguments, the folder its hydra.run.dir names, or None where the arguments name the output folder).
REFUSED = {  # jobs refused before training
    "bad": (("distributed=local", "distributed.local_processes=3"), "bad"),
    "uneven": (("distributed=local", "data.batch_size=66"), "uneven"),
    # A refusal only the processes can make: strict=true and a variable fsdp cannot split (Flux1's hidden size 3 heads
    # x 6 = 18 over the data axis 4), known once each process traces its model. The parent checks an mlp or a
    # transformer before the folder (was this case's model: model.width=34), not flux1/simformer: tracing them would
    # start its JAX backend (state_check.TRACED_STARTED), which its processes' devices must not share.
    "strict": (("distributed=local", "strict=true", *STRICT_FLUX1), "strict"),
    "none-False": (("distributed=local", "distributed.local_processes=2", "mesh=none", "mesh.model_axis=1",
                    "dry_run=False"), "none"),
    "none-True": (("distributed=local", "distributed.local_processes=2", "mesh=none", "mesh.model_axis=1",
                   "dry_run=True"), "none"),
    "wide": (("distributed=local", "distributed.local_processes=2", "mesh.model_axis=8"), "wide"),
    "strict-quiet": (("distributed=local", "strict=true", *STRICT_FLUX1, "hydra/job_logging=disabled"), "strict"),
}
TRAINED = {  # jobs that train
    "two": (("distributed=local", "distributed.local_processes=2"), "two"),
    # A sweep folder Hydra's grammar reads only quoted. The preset replaces experiment=quick, and with it quick's
    # tiny model, batch, budget and optimiser: set back here, so that its processes load the programs "two" compiled
    # from the session's compilation cache (the schema's width 128, depth 3 at batch 256 cost each process ~1.5 s of
    # compile and steps, sbibm's 1000 simulations and learning rate ~9 s of compile; what is tested is the preset's
    # MULTIRUN mode and the folder, not the model).
    "preset": (("experiment=sbibm", "mesh=dict", "data=two_moons", "data.num_simulations=1024", "distributed=local",
                "model.width=32", "model.depth=1", "data.batch_size=64", "train.learning_rate=3e-3",
                "train.val_every=250", "train.patience=0", 'hydra.sweep.dir="{cwd}/sweep (1)=x"'), None),
    # Its run_timeout_s is set from how long "preset", the launch before it, took to join JAX's distributed service
    # (``run_bound``).
    "bound": (("distributed=local", "distributed.local_processes=2", "distributed.run_timeout_s={bound}",
               "train.steps=100000", "train.log_every=50"), "bound"),
}


def launch_args(args: tuple, out: str | None, folder: Path, **values) -> list[str]:
    """The arguments of a launch of ``REFUSED`` or ``TRAINED`` in ``folder`` (``{cwd}`` and ``values`` filled in)."""
    run_dir = [f"hydra.run.dir={folder / out}"] if out else []
    return [*TINY, *(arg.format(cwd=folder, **values) for arg in args), *run_dir]


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    """The module's launches, forked from one process that imported launch.py's modules once (tests/fork_server.py:
    ~1.5 s of CPU less per launch; each launch still a process of its own from launch.py's first line, and the
    processes it starts real ones)."""
    from fork_server import ForkServer

    server = ForkServer(tmp_path_factory.mktemp("forks"), launch_env(), imports=())  # its processes train, not they
    yield server
    server.close()


def launch_all(forks, table: dict, root: Path) -> dict:
    """``{name: (its launch, its working folder)}`` for ``table``, one after the other (``forks``); a ``{bound}``
    in a launch's arguments is ``run_bound`` of the job ``preset`` launched before it. A bound that stopped its
    processes before any step (the machine loaded more than for that one) is tried once more, twice as long."""
    done = {}
    for name, (args, out) in table.items():
        folder = root / name
        folder.mkdir()
        values = {"bound": run_bound(root / "preset" / "sweep (1)=x" / "0")} if any("{bound}" in arg for arg in args) \
            else {}
        proc = forks.launch(launch_args(args, out, folder, **values), cwd=folder, stderr_apart=True)
        printed = proc.communicate(timeout=240)
        if values and stopped_before_training(folder / out):
            folder = root / f"{name}-again"
            folder.mkdir()
            proc = forks.launch(launch_args(args, out, folder, bound=2 * values["bound"]), cwd=folder,
                                stderr_apart=True)
            printed = proc.communicate(timeout=240)
        done[name] = (subprocess.CompletedProcess(proc.args, proc.returncode, *printed), folder)
    return done


def stopped_before_training(out: Path) -> bool:
    """Whether the job in ``out`` was stopped, but at no step: the bound came before its processes could stop at
    one."""
    try:
        metrics = json.loads((out / "metrics.json").read_text())
    except (OSError, ValueError):
        return False
    return metrics.get("status") == "preempted" and metrics.get("stopped_at_step") is None


def run_bound(folder: Path) -> int:
    """A ``distributed.run_timeout_s`` that reaches a job like the one in ``folder`` once its processes joined JAX's
    distributed service: 1.5 times the seconds from "started 2 local processes" (the bound counts from then) to the
    later of its processes' "process <i> of 2" (logged once ``jax.distributed.initialize`` returned), plus 2 s. From
    then JAX's preemption service has the stop (its SIGTERM handler, not Python's): the processes end their set-up and
    stop at their first step, with its checkpoint, where a bound after their "[5/7] train" (twice the seconds to it,
    ~38 s on the loaded 2-core machine) trained them ~20 s more (~30 s of CPU). The set-up after joining (data, model,
    programs loaded) takes ~3.5 s on the quiet 2-core machine, so the bound lands within it or a few steps into
    training (was twice those seconds plus 5 s: ~9 s and ~90 steps into training, ~15 s of CPU on the two
    processes). Before it the stop is no run bound's at a step (one process still importing is ended by the signal,
    the others with it: stopped while starting up, which ``launch_all`` tries again, twice as long)."""
    def at(path: Path, text: str) -> float:
        line = next(line for line in path.read_text().splitlines() if text in line)
        return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()

    started = at(folder / "launch.log", "started 2 local processes")
    joined = max(at(folder / f"process_{rank}.log", f"process {rank} of 2, ") for rank in (0, 1))
    return math.ceil(1.5 * (joined - started)) + 2


@pytest.fixture(scope="module")
def refused(tmp_path_factory, forks):
    return launch_all(forks, REFUSED, tmp_path_factory.mktemp("refused"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, forks):
    return launch_all(forks, TRAINED, tmp_path_factory.mktemp("trained"))


def test_a_childs_stderr_reaches_the_console_until_a_peer_dies_then_its_log(tmp_path, capfd):
    # Was: XLA's teardown of the survivors ("F1202 ... client.h:86] Terminating process because the JAX distributed
    # service detected fatal errors", E lines, source traces) on the console around the parent's error line.
    from gensbi_sharding.harness.local_children import ChildOutput

    (tmp_path / "process_0.log").write_text("[...][gensbi_sharding][INFO] - [5/7] train\n")
    read_end, write_end = os.pipe()
    output = ChildOutput(tmp_path)
    output.follow(0, os.fdopen(read_end, "rb"))
    os.write(write_end, b"train:  50%|#####     | 10/20\r")  # a progress bar, as it comes
    seen, deadline = "", time.monotonic() + 5
    while "10/20" not in seen and time.monotonic() < deadline:  # the pump's thread passes it on
        time.sleep(0.01)
        seen += capfd.readouterr().err
    output.quiet([0])
    fatal = b"F1202 01:06:15.164651   13719 client.h:86] Terminating process because ...\n"
    os.write(write_end, fatal)
    os.close(write_end)
    output.join()
    seen += capfd.readouterr().err
    assert seen == "train:  50%|#####     | 10/20\r"
    assert (tmp_path / "process_0.log").read_bytes() == b"[...][gensbi_sharding][INFO] - [5/7] train\n" + fatal


@pytest.mark.parametrize("written, ended", [
    (b"train:  10%|#         | 580/6000 [00:30<05:04, step=580]", True),  # a bar cut off as a peer died
    (b"[process 0/2] [5/7] train\rtrain:  10%|#    | 580/6000\r", True),  # a bar redrawn, cursor at its start
    (b"train: 100%|##########| 20/20\r" + b" " * 30 + b"\r", False),  # a bar its child cleared (tqdm leave=False)
    (b"train: 100%|##########| 20/20\ndone\n", False),  # a line ended
    (b"", False)])
def test_the_parents_next_line_never_continues_a_childs_progress_bar(tmp_path, written, ended):
    # Was: a peer killed mid-run gave "train:  10%|...| 580/6000 [...step=580][ERROR] process 1 of 2 died ..." on one
    # console line: the parent's error glued to the end of process 0's progress bar.
    from gensbi_sharding.harness.local_children import ChildOutput

    read_end, write_end = os.pipe()
    output = ChildOutput(tmp_path, console=write_end)
    child_read, child_write = os.pipe()
    output.follow(0, os.fdopen(child_read, "rb"))
    parts = written.split(b"\r")
    for i, part in enumerate(parts):  # in pieces, as a child's redraws come
        os.write(child_write, part + (b"\r" if i < len(parts) - 1 else b""))
    os.close(child_write)
    output.join()
    output.end_line()
    os.close(write_end)
    with os.fdopen(read_end, "rb") as console:
        assert console.read() == written + (b"\n" if ended else b"")


@pytest.mark.parametrize("codes, first", [
    ([-signal.SIGABRT, -signal.SIGKILL], 1),  # kill -9 of process 1; XLA aborts process 0 within the same poll
    ([-signal.SIGKILL, -signal.SIGABRT], 0),
    ([-signal.SIGABRT, -signal.SIGSEGV], 1),
    ([-signal.SIGABRT, 1], 0),  # a signal before an exit code, SIGABRT too
    ([1, -signal.SIGABRT, -signal.SIGABRT], 1),
    ([-signal.SIGABRT, -signal.SIGABRT], 0)])
def test_of_processes_seen_dead_at_once_the_one_xla_aborted_is_not_the_first(codes, first, tmp_path, monkeypatch):
    # Was: distributed=local, process 1 killed by SIGKILL mid-run: "process 0 of 2 died (killed by SIGABRT); the others
    # ended 0.0 s later ...: process 1 died (killed by SIGKILL)": the Gloo collective failed at once, so XLA's abort of
    # the survivor was seen in the same poll as the kill, and the lower rank was named the first to die.
    metrics = _run_with_children(tmp_path, monkeypatch, [_Ended([code]) for code in codes])
    assert metrics["process_exit_codes"] == codes and metrics["first_failed_process"] == first
    assert metrics["error"].startswith(f"process {first} of {len(codes)} died (killed by "), metrics["error"]


class _Ended:
    """A local process as ``subprocess.Popen`` shows it, whose ``poll()`` answers ``codes`` in turn (the last one
    from then on): None while it runs; it printed nothing."""

    def __init__(self, codes):
        import io

        self.codes, self.stderr = list(codes), io.BytesIO(b"")

    def poll(self):
        return self.codes.pop(0) if len(self.codes) > 1 else self.codes[0]

    def wait(self):
        return self.codes[-1]

    def send_signal(self, signum):
        pass

    kill = send_signal


def _run_with_children(tmp_path, monkeypatch, children, heartbeat_s=5, hydra_overrides=(), commands=None):
    """``run_local_processes`` of a launch.py job with ``distributed=local`` (and Hydra's ``hydra_overrides``), its
    processes ``children`` (started in rank order in place of ``subprocess.Popen``'s, their command lines appended
    to ``commands``): the metrics it returns."""
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from gensbi_sharding.harness import local_cluster

    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})  # a job of launch.py's
    hydra.hydra.runtime.output_dir, hydra.hydra.overrides.task = str(tmp_path), ["distributed=local"]
    hydra.hydra.overrides.hydra = list(hydra_overrides)
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(hydra)
    started, commands = iter(children), [] if commands is None else commands
    monkeypatch.setattr(local_cluster.subprocess, "Popen",
                        lambda command, env, pass_fds, stderr=None: commands.append(command) or next(started))
    cfg = OmegaConf.create({"distributed": {"local_processes": len(children), "run_timeout_s": 60,
                                            "heartbeat_s": heartbeat_s},
                            "devices": {"cpu_count": 2 * len(children)}, "mesh": {"spec": "auto", "devices": None}})
    return local_cluster.run_local_processes(cfg, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("console", ["read", "closed"])
def test_a_child_printing_much_never_blocks_and_loses_nothing(tmp_path, console):
    # Was: with the parent's stderr a closed pipe (launch.py ... 2>&1 | head), the first failed write ended the pump,
    # which closed the child's stderr: the child's next warning died of BrokenPipeError (a training process killed by
    # a log line), and all it said was lost.
    from gensbi_sharding.harness.local_children import ChildOutput

    text = b"".join(b"W1202 warning line %06d of a chatty child\n" % i for i in range(20000))  # 880 kB
    read_end, write_end = os.pipe()
    received = []
    if console == "closed":
        os.close(read_end)
    else:
        def drain():
            while data := os.read(read_end, 1 << 16):
                received.append(data)
        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
    output = ChildOutput(tmp_path, console=write_end)
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stderr.buffer.write(sys.stdin.buffer.read())"],
                             stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    output.follow(0, child.stderr)
    child.stdin.write(text)
    child.stdin.close()
    assert child.wait(timeout=20) == 0
    output.join()
    os.close(write_end)
    if console == "closed":  # all of it in the child's log instead
        assert (tmp_path / "process_0.log").read_bytes() == text
    else:
        reader.join(timeout=5)
        assert b"".join(received) == text and not (tmp_path / "process_0.log").exists()


@pytest.mark.slow
def test_a_local_child_ends_without_sweeping_the_objects_it_leaves():
    # Was: each process of a distributed=local job spent 1-5 s after its last line in Python's finalisation, full
    # collections over JAX's and Flax's objects (~1 s of CPU a process; the job waited for it). An object of a cycle
    # that a collection at exit would free says so as it goes: a child's are frozen before, never swept. Both cases
    # forked from one process that imported the module once.
    script = ("import os, sys\n"
              "from gensbi_sharding.harness.local_children import watch_parent\n"
              "from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV\n"
              "lifeline, keep_open = os.pipe()\n"
              "pids = [os.fork() for _ in range(1)]\n"
              "case = 'alone' if pids[0] else 'child'\n"
              "if case == 'child':\n"
              "    os.environ[LOCAL_CHILD_ENV] = str(lifeline)\n"
              "watch_parent()\n"
              "class Node:\n"
              "    def __del__(self):\n"
              "        os.write(1, f'{case} swept;'.encode())\n"
              "node = Node()\n"
              "node.cycle = node\n"
              "del node\n"
              "if pids[0]:\n"
              "    assert os.waitpid(pids[0], 0)[1] == 0\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "alone swept;"  # the child's cycle, frozen at its exit, is never collected


def run_in_this_process(*args, out):
    """``run()`` of ``TINY`` plus ``args`` in this process (conftest's 8 devices, as a one-process launch has)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.run import run

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*TINY, *args])
    with open_dict(cfg):
        cfg.output_dir = str(out)
    return run(cfg)


@pytest.mark.slow
@pytest.mark.timeout(600)  # the first test of TRAINED: its three launches run here
def test_two_local_processes_train_like_one_process_on_the_same_global_batches(tmp_path, devices, trained):
    two, folder = trained["two"]
    assert two.returncode == 0, two.stderr[-3000:]
    # One process with two data shards sees exactly the global batches of the two processes. Run here, not
    # launched: the same run() on the same 8 devices and compile flags, without a second JAX start (~5 s CPU).
    one = run_in_this_process("data.shards=2", out=tmp_path / "one")
    assert one["status"] == "ok", one.get("error")
    losses_two = np.load(folder / "two" / "train_losses.npz")["losses"]
    losses_one = np.load(tmp_path / "one" / "train_losses.npz")["losses"]
    assert losses_two.shape == (12,)
    np.testing.assert_allclose(losses_two, losses_one, rtol=1e-5, atol=1e-6)
    metrics = json.loads((folder / "two" / "metrics.json").read_text())
    assert metrics["status"] == "ok" and metrics["mesh_summary"]["n_processes"] == 2
    assert metrics["mesh_summary"]["devices_per_process"] == 4 and metrics["device_count"] == 8
    console = two.stdout + two.stderr
    logs = {i: (folder / "two" / f"process_{i}.log").read_text() for i in (0, 1)}
    assert "[process 0/2]" in logs[0] and "[process 1/2]" in logs[1]  # every process logs its index
    assert "[process 1/2]" not in console  # the console shows process 0 (others: their warnings only)
    # Was: "[1/7] devices" twice (each process, before they joined) and the placement block's lines
    # after its first untagged. Every line of the processes is tagged; the parent's own lines are not.
    lines = [line for line in two.stdout.splitlines() if line.strip()]
    assert [line for line in lines if "[1/7]" in line] == [
        "[process 0/2] [1/7] devices: cpu_count=4 (from devices.cpu_count), distributed=explicit"]
    assert [line for line in lines if not line.startswith("[process 0/2] ")] == [lines[0], lines[-1]]
    assert lines[0].startswith("started 2 local processes") and lines[-1].startswith("done in ")
    assert "[process 0/2] fallbacks: " in two.stdout and "[process 1/2] fallbacks: " in logs[1]
    assert "[Gloo]" not in console and "[Gloo] Rank" in logs[0] + logs[1]  # Gloo's lines: the log files only
    assert not (tmp_path / "two" / "posterior.png").exists()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_failing_process_ends_the_job_with_an_error(refused):
    # 8 CPU devices do not split over 3 processes: refused before any process starts.
    bad, _ = refused["bad"]
    assert bad.returncode != 0
    assert "devices.cpu_count=8 does not split over distributed.local_processes=3" in bad.stderr + bad.stdout
    assert "set distributed.local_processes=2 or devices.cpu_count=9" in bad.stderr + bad.stdout
    # A refusal of the processes' (strict=true and a variable fsdp cannot split) fails in both, bounded, non-zero.
    strict, tmp_path = refused["strict"]
    assert strict.returncode != 0
    metrics = json.loads((tmp_path / "strict" / "metrics.json").read_text())
    assert metrics["status"] == "error"
    assert "strict=true and rule 'fsdp' cannot split 29 variable(s); without strict, 29 variable(s) replicated " \
           "instead of split under rule 'fsdp' on mesh {'data': 4, 'model': 2}" in metrics["error"]
    assert "or set strict=false" in metrics["error"]
    # Was said three times (each process's console line, then the parent's "process 1 of 2 failed ...; process 0
    # reported: ..."): a refusal every process raises is said once, by the parent, as a one-process job says it.
    assert metrics["error"].startswith("ConfigError: strict=true and rule 'fsdp' cannot split"), metrics["error"]
    console = strict.stderr + strict.stdout
    assert console.count("strict=true and rule 'fsdp' cannot split") == 1, console[-3000:]
    # the console's refusal carries no class name (5ad5b16); metrics.json keeps it
    assert f"[ERROR] {metrics['error'].removeprefix('ConfigError: ')}\n" in console, console[-3000:]
    for rank in (0, 1):  # each process's log keeps its own
        assert "strict=true and rule 'fsdp' cannot split" in (tmp_path / "strict" / f"process_{rank}.log").read_text()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_batch_the_processes_cannot_split_is_refused_before_any_folder(refused):
    # Was: refused by each process once started (~14 s), in the run's folder, left behind; one process's same
    # command was refused by the check before any folder. Now the processes' batch is checked there too, as they
    # word it (the meshes that keep it: each process's 2 devices and model_axis=2 at devices.cpu_count=4).
    uneven, tmp_path = refused["uneven"]
    assert uneven.returncode == 1 and not (tmp_path / "uneven").exists()
    assert uneven.stderr == (
        "[ERROR] data.batch_size=66 cannot be used: the global batch size 66 must be a multiple of 4 "
        "(it is split over 2 data shards (one per process) and over the data-parallel size 4); set "
        "data.batch_size=64; or keep data.batch_size=66 on another mesh: mesh.model_axis=4 (data-parallel size 2) "
        "or devices.cpu_count=4 (data-parallel size 2)\n"), uneven.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_processes_console_follows_the_job_logging_chosen_and_their_refusal_is_said_once(refused):
    # Was: under hydra/job_logging=disabled (one process: nothing but errors and its progress bar), the children,
    # not given it, printed process 0's info lines ("[process 0/2] [1/7] devices: ..."); given it alone, they would
    # write no process_<i>.log, where the parent reads a refusal of process 1.
    proc, tmp_path = refused["strict-quiet"]
    metrics = json.loads((tmp_path / "strict" / "metrics.json").read_text())
    assert proc.returncode != 0 and metrics["error"].startswith("ConfigError: strict=true and rule 'fsdp' cannot split")
    said = metrics["error"].removeprefix("ConfigError: ")  # the console's words carry no class name (5ad5b16)
    assert proc.stdout == "" and proc.stderr == f"[ERROR] {said}\n", proc.stdout[-2000:] + proc.stderr
    assert not (tmp_path / "strict" / "launch.log").exists()  # the parent's: the config writes none
    for rank in (0, 1):  # each process's log keeps its own refusal, under the config's levels: errors only
        log_text = (tmp_path / "strict" / f"process_{rank}.log").read_text()
        assert f"[ERROR] - [process {rank}/2] ConfigError: strict=true and rule 'fsdp' cannot split" in log_text
        assert "[INFO]" not in log_text


def test_the_children_are_given_the_job_s_logging_overrides_only(tmp_path, monkeypatch):
    # Was: only the job's task overrides: hydra/job_logging=disabled, hydra.verbose, ... reached no child.
    chosen = ["hydra/job_logging=disabled", "+hydra.job_logging.root.level=WARNING", "hydra/hydra_logging=none",
              "hydra.verbose=true"]
    commands = []
    _run_with_children(tmp_path, monkeypatch, [_Ended([0]), _Ended([0])], commands=commands, hydra_overrides=[
        "hydra.run.dir=elsewhere", chosen[0], "hydra.mode=RUN", *chosen[1:3], "hydra.job.chdir=false", chosen[3],
        "hydra.job_logging_x=1"])
    assert len(commands) == 2
    for rank, command in enumerate(commands):
        given = [arg for arg in command if arg.startswith(("hydra", "+hydra"))]
        assert given == [*chosen, f"hydra.run.dir={tmp_path}", f"hydra.job.name=process_{rank}",
                         "hydra.output_subdir=null", "hydra.mode=RUN"], given


@pytest.mark.parametrize("config", ["disabled", "none", "gensbi"])
def test_a_child_keeps_its_process_log_whatever_logging_the_job_chose(tmp_path, config, capfd):
    # Was: a child under hydra/job_logging=disabled (or none) wrote no process_<i>.log: its refusal unread.
    import logging

    from gensbi_sharding.harness.child_logging import LOG_FORMAT, keep_process_log
    from gensbi_sharding.harness.child_errors import refusals

    root, ours, path = logging.getLogger(), logging.getLogger("gensbi_sharding"), tmp_path / "process_1.log"
    before, own = (root.handlers[:], root.level), logging.StreamHandler(sys.stderr)
    root.handlers[:] = []
    if config == "disabled":  # root at ERROR, no handler; the job's errors on stderr (log_file.errors_on_console)
        root.setLevel(logging.ERROR)
        own.setLevel(logging.ERROR)
        ours.addHandler(own)
    elif config == "gensbi":  # the project's own config writes the file already: nothing added
        root.addHandler(logging.FileHandler(path))
        root.handlers[0].setFormatter(logging.Formatter(LOG_FORMAT))
    try:
        added = keep_process_log(path)
        logger = logging.getLogger("gensbi_sharding.test_child")
        logger.error("[process 1/2] ConfigError: refused here")
        # A library's logger, none of the job's: under disabled (was: the file only) and none, stderr as in one process.
        logging.getLogger("some_library.test_child").error("OSError: a library's own error")
        if added is not None:
            added.close()
        assert (added is None) == (config == "gensbi")
    finally:
        for handler in root.handlers:
            if handler not in before[0] and handler is not logging.lastResort:
                handler.close()
        root.handlers[:] = before[0]
        root.setLevel(before[1])
        ours.removeHandler(own)
    assert refusals(tmp_path, [1, 1], None) == {1: "ConfigError: refused here"}
    if config != "gensbi":
        assert ("][gensbi_sharding.test_child][ERROR] - [process 1/2] ConfigError: refused here\n[" in path.read_text()
                and LOG_FORMAT.startswith("[%(asctime)s]"))
    err = capfd.readouterr().err
    assert err.count("ConfigError: refused here") == (config != "gensbi")  # once, as before
    assert err.count("OSError: a library's own error") == (config != "gensbi"), err  # gensbi: its file handler only
    if config != "gensbi":
        assert path.read_text().count("OSError: a library's own error") == 1  # and in the file, once


def test_refusals_alike_up_to_a_measured_figure_are_said_once(tmp_path):
    from gensbi_sharding.harness.child_errors import common_refusal, refusals

    fits = "ConfigError: the training state cannot fit: model=mlp needs at least 3200.4 GB, but {} GB is available"
    (tmp_path / "process_1.log").write_text(f"[t][gensbi_sharding][ERROR] - [process 1/2] {fits.format('22.2')}\n")
    found = refusals(tmp_path, [1, 1], fits.format("22.3"))
    assert found == {0: fits.format("22.3"), 1: fits.format("22.2")}  # the memory each process measured
    assert common_refusal(found, [1, 1]) == fits.format("22.3")  # process 0's, once
    assert common_refusal({0: "ConfigError: a", 1: "ConfigError: b"}, [1, 1]) is None  # two refusals: both named
    assert common_refusal({0: fits.format("22.3")}, [1, -6]) is None  # process 1 killed: the summary names it
    assert refusals(tmp_path, [1, -6], "RuntimeError: gloo") == {}


def test_a_device_listed_twice_is_refused_by_the_parent_before_any_process_starts():
    # Was: launch.py experiment=quick distributed=local 'mesh.devices=[0,0]' started both processes, each refused it
    # ("lists device 0 more than once") in the run's folder (error.txt, launch.log, process_<i>.log left there).
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.local_children import model_group_problem

    cfg = OmegaConf.create({"mesh": {"spec": "dict", "devices": [0, 3, 0, 3], "model_axis": 1}})
    assert model_group_problem(cfg, 2, 4) == ("mesh.devices=[0,3,0,3] lists device 0, 3 more than once; set "
                                              "mesh.devices=[0,3] (or mesh.devices=null for all of them)")
    cfg.mesh.devices = [0, 99]  # an id no process has: each process knows its devices (left to them)
    assert model_group_problem(cfg, 2, 4) is None


def test_a_model_group_no_process_can_hold_is_refused_as_each_process_would_refuse_it():
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.local_children import model_group_problem

    cfg = OmegaConf.create({"mesh": {"spec": "dict", "devices": None, "model_axis": 3}})
    assert model_group_problem(cfg, 2, 4) == (  # all 8 devices: run_mesh's first check
        "mesh.model_axis=3: 8 devices are not divisible by model_axis=3; set mesh.model_axis=2; a model group stays "
        "inside one process, and each of the 2 processes has 4 devices (divisors of 4: [1, 2, 4])")  # (was: 8 too)
    cfg.mesh.model_axis = 4
    assert model_group_problem(cfg, 4, 2) == (
        "mesh.model_axis=4: each of the 4 processes holds 2 devices; 2 devices are not divisible by model_axis=4; set "
        "mesh.model_axis=2; a model group stays inside one process (divisors of 2: [1, 2])")  # was: "2 devices", first
    assert model_group_problem(cfg, 2, 4) is None
    cfg.mesh.devices = [0, 1, 2, 3, 4, 5]  # the devices listed decide: each process checks them
    assert model_group_problem(cfg, 4, 2) is None
    cfg.mesh.devices, cfg.mesh.spec = None, "auto"  # auto: the facts only shape the mesh
    assert model_group_problem(cfg, 4, 2) is None


def test_a_model_group_wider_than_a_joined_process_names_each_processs_devices(monkeypatch, devices):
    # Was, in a process of a joined job (distributed=auto / explicit): "mesh.model_axis=4: 2 devices are not
    # divisible by model_axis=4", read as the job's 8 devices: it meant each of its 4 processes' 2.
    import jax
    from faults_helpers import compose_tiny

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.run_mesh import run_mesh

    monkeypatch.setattr(jax, "process_count", lambda: 4)
    monkeypatch.setattr(jax, "local_device_count", lambda: 2)
    with pytest.raises(ConfigError) as refused:
        run_mesh(compose_tiny("mesh.model_axis=4"), "default", "fsdp", {})
    assert str(refused.value) == (
        "mesh.model_axis=4: each of the 4 processes holds 2 devices; 2 devices are not divisible by model_axis=4; "
        "set mesh.model_axis=2 (divisors of 2: [1, 2]); a model group stays inside one process")


@pytest.mark.parametrize("processes, devices, model_axis, batch_size, shards", [
    (2, 3, 4, 63, None), (2, 3, 4, 64, None), (2, 3, 2, 63, None), (2, 4, 3, 60, None), (2, 4, 8, 36, None),
    (4, 2, 4, 6, None), (3, 4, 3, 60, None), (2, 6, 4, 90, None), (2, 6, 4, 90, 5), (2, 4, 3, 64, 3),
])
def test_every_model_group_suggestion_passes_the_batch_checks_that_follow(processes, devices, model_axis, batch_size,
                                                                          shards):
    # Was: 6 devices over 2 processes, mesh.model_axis=4, data.batch_size=63: "set mesh.model_axis=3", whose processes
    # started, simulated and then refused data.batch_size=63 (2 shards, data-parallel size 2); model_axis=8 over
    # 2 x 4 devices: a divisor of the job's 8, refused next by each process (a group stays inside one process).
    import re

    from omegaconf import OmegaConf

    from gensbi_sharding.harness.hints import batch_size_problem
    from gensbi_sharding.harness.local_children import model_group_problem

    cfg = OmegaConf.create({"mesh": {"spec": "dict", "devices": None, "model_axis": model_axis},
                            "data": {"batch_size": batch_size, "shards": shards}})
    problem = model_group_problem(cfg, processes, devices)
    suggested = dict(re.findall(r"(mesh\.model_axis|data\.batch_size)=(\d+)", problem.split("; set ", 1)[1].split(" (")[0]))
    axis, batch = int(suggested["mesh.model_axis"]), int(suggested.get("data.batch_size", batch_size))
    cfg.mesh.model_axis, cfg.data.batch_size = axis, batch
    assert model_group_problem(cfg, processes, devices) is None, problem
    assert batch_size_problem(batch, shards=shards or processes, data_parallel=processes * devices // axis,
                              train_rows=10_000, per_process=not shards) is None, problem
    assert ("data.batch_size" in suggested) == all(  # a batch size only where no model axis keeps it
        batch_size % math.lcm(shards or processes, processes * devices // d) for d in range(1, devices + 1)
        if devices % d == 0), problem
    assert batch <= batch_size  # never above it: within the training pairs it was within


def test_processes_the_run_bound_killed_name_the_error_they_were_stuck_on(tmp_path):
    # Was "local processes killed after distributed.run_timeout_s=60 s (exit codes [-9, -9])" alone: a save whose
    # commit failed on process 0 (its checkpoint folder turned read-only) left both waiting in Orbax's barriers.
    from gensbi_sharding.harness.child_errors import stuck_errors

    (tmp_path / "process_0.log").write_text(
        "[t][absl][ERROR] - [process 0/2] [process=0] Failed to run 3 Handler Commit operations or the Commit "
        "callback in background save thread, directory: c/200\nTraceback (most recent call last):\n  File \"p.py\", "
        "line 214, in rename\n    os.rename(path, dst)\nPermissionError: [Errno 1] Operation not permitted: "
        "'c/200.orbax-checkpoint-tmp' -> 'c/200'\n[t][gensbi_sharding][WARNING] - [process 0/2] received SIGTERM\n")
    (tmp_path / "process_1.log").write_text("[t][gensbi_sharding][INFO] - [process 1/2] [5/7] train: steps 0..9\n")
    assert stuck_errors(tmp_path, 2) == (
        "; they were stuck, not slow: process 0 logged PermissionError: [Errno 1] Operation not permitted: "
        "'c/200.orbax-checkpoint-tmp' -> 'c/200'")
    assert stuck_errors(tmp_path / "gone", 2) == ""  # no logs: the bound alone is said


def test_a_failed_process_without_a_log_refused_nothing_nor_another_process_s_refusal(tmp_path, monkeypatch):
    # Was: UnboundLocalError out of the parent for a process that failed with no process_<i>.log (its output went to
    # the console: no peer had died), and a later rank without one reported the rank before's refusal as its own.
    from gensbi_sharding.harness.child_errors import refusals

    assert refusals(tmp_path, [0, 1], None) == {}
    refused = "ConfigError: data.batch_size=64 does not fit"
    (tmp_path / "process_1.log").write_text(f"[t][gensbi_sharding][ERROR] - [process 1/3] {refused}\n")
    assert refusals(tmp_path, [1, 1, 1], "ConfigError: mine") == {0: "ConfigError: mine", 1: refused}
    metrics = _run_with_children(tmp_path, monkeypatch, [_Ended([-signal.SIGABRT]), _Ended([1])])
    assert metrics["status"] == "error" and ": process 1 failed (exit code 1)" in metrics["error"], metrics["error"]


@pytest.mark.slow
def test_a_process_that_exited_0_beside_a_failed_one_is_not_called_failed(tmp_path, monkeypatch):
    # Was "process 0 of 2 failed (exit code 1); ...: process 1 failed (exit code 0)" when process 0 failed writing
    # what only it writes (its folder turned read-only) and process 1 ended its part.
    import re

    metrics = _run_with_children(tmp_path, monkeypatch, [_Ended([1]), _Ended([None] * 5 + [0])], heartbeat_s=10)
    assert metrics["first_failed_process"] == 0 and metrics["process_exit_codes"] == [1, 0]
    said = re.sub(r"ended \d+\.\d s later", "ended <lag> s later", metrics["error"])  # as long as its polls took
    assert said.startswith(
        "process 0 of 2 failed (exit code 1); the others ended <lag> s later (bound: distributed.heartbeat_s=10 + 5 s): "
        "process 1 ended (exit code 0)"), metrics["error"]


@pytest.mark.slow
@pytest.mark.timeout(200)
@pytest.mark.parametrize("dry_run", [False, True])
def test_no_mesh_in_a_job_of_several_processes_is_refused_before_training(refused, dry_run):
    # Was: each process trained its own copy unsynchronised, then the job failed at the checkpoint with
    # Orbax's "Cannot serialize host local jax.Array ... in multi-host setting": the training lost.
    # Since the run's checks run before Hydra makes the run's folder (preflight.run_config_problem), nothing is
    # written: the refusal is the one line on stderr (was: the refused job's folder, its metrics.json holding it).
    proc, tmp_path = refused[f"none-{dry_run}"]  # launched with f"dry_run={dry_run}"
    out = tmp_path / "none"
    assert proc.returncode == 1 and not out.exists()
    assert ("[ERROR] mesh=none in a job of 2 processes: each process would train its own copy of the "
            "model, unsynchronised; set mesh=auto (or mesh=dict) to train one model on every process's devices, or "
            "distributed=none for one process") in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_a_model_axis_wider_than_one_process_names_the_override_that_fits(refused):
    # Was the library's ValueError, naming model_axis but not mesh.model_axis, after every process built its mesh;
    # then each process's refusal once it had started JAX (~3 s of CPU each): now the parent's, before any starts.
    # Then refused in the run's folder, left behind: now by the preflight, before anything is written.
    proc, tmp_path = refused["wide"]
    out = tmp_path / "wide"
    assert proc.returncode != 0 and not out.exists()
    assert ("[ERROR] mesh.model_axis=8: each of the 2 processes holds 4 devices; 4 devices are not divisible by "
            "model_axis=8; set mesh.model_axis=4; a model group stays inside one process (divisors of 4: "
            "[1, 2, 4])") in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)  # TRAINED's three launches run in the first test of them
def test_the_run_bound_stops_the_processes_at_a_step_with_a_checkpoint(trained):
    # Was: at distributed.run_timeout_s the processes were killed (SIGKILL): every step since the last
    # checkpoint lost, and the console said only "did not finish within the bound".
    proc, tmp_path = trained["bound"]  # distributed.run_timeout_s=<bound> train.steps=100000 train.log_every=50
    bound = run_bound(trained["preset"][1] / "sweep (1)=x" / "0")
    assert f"distributed.run_timeout_s={bound}" in proc.args or f"distributed.run_timeout_s={2 * bound}" in proc.args
    bound = int(next(arg for arg in proc.args if arg.startswith("distributed.run_timeout_s=")).split("=")[1])
    out = tmp_path / "bound"
    assert proc.returncode == 75, (proc.stdout + proc.stderr)[-3000:]  # EX_TEMPFAIL: continue it
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "preempted" and metrics["stop_signal"] is None
    assert metrics["error"].startswith(f"stopped at distributed.run_timeout_s={bound} s: ")
    assert metrics["error"].endswith("; raise distributed.run_timeout_s for the rest")
    assert metrics["stopped_at_step"] > 0 and (out / "checkpoints" / str(metrics["stopped_at_step"])).is_dir()


@pytest.mark.slow
@pytest.mark.timeout(600)  # TRAINED's three launches run in the first test of them
def test_local_processes_of_a_multirun_preset_run_once_each(trained):
    # Was: experiment=sbibm sets hydra.mode=MULTIRUN, which the processes inherited: each started a sweep of
    # its own (into multirun/<date>/... of the working folder), never the job it was started for.
    # In a folder Hydra's grammar reads only quoted: the processes of a run there failed in Hydra's grammar.
    proc, tmp_path = trained["preset"]  # experiment=sbibm ... distributed=local hydra.sweep.dir="<it>/sweep (1)=x"
    sweep = tmp_path / "sweep (1)=x"
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    metrics = json.loads((sweep / "0" / "metrics.json").read_text())
    assert metrics["status"] == "ok" and metrics["process_exit_codes"] == [0, 0] and metrics["final_step"] == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == [sweep.name]  # no multirun/ of the processes' own


@pytest.mark.slow
def test_processes_killed_at_a_second_ctrl_c_say_nothing_on_the_console(tmp_path, monkeypatch, capfd):
    """Was: killed one after the other, each once the one before had ended, so the others saw their coordinator
    (process 0) gone first and printed JAX's fatal error ("Terminating process because the JAX distributed service
    detected fatal errors", 6 lines) on the console before the parent's one line."""
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from gensbi_sharding.harness import local_cluster

    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})  # a job of launch.py's
    hydra.hydra.runtime.output_dir, hydra.hydra.overrides.task = str(tmp_path), ["distributed=local"]
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(hydra)
    peer_gone, peer_alive = os.pipe()  # process 1 reads end of file once process 0 (holding the write end) died
    real_popen, started = subprocess.Popen, []
    stays = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
    scripts = [stays + "time.sleep(60)",  # process 0: ignores the parent's stop, as one mid-step would for a while
               stays + f"import os, sys; os.read({peer_gone}, 1); sys.stderr.write('F fatal: coordinator gone\\n'); "
               "sys.stderr.flush(); time.sleep(60)"]

    class Child(real_popen):
        def kill(self):
            super().kill()
            if self is started[0]:  # the coordinator's death reaches the others first
                time.sleep(0.5)

    def start(command, env, pass_fds, stderr=None):
        rank = int(next(a for a in command if a.startswith("distributed.process_id=")).split("=")[1])
        started.append(Child([sys.executable, "-c", scripts[rank]], stderr=stderr, stdout=subprocess.PIPE,
                             pass_fds=(peer_gone, peer_alive) if rank == 0 else (peer_gone,)))
        if rank == 0:
            os.close(peer_alive)  # process 0's alone now
        return started[-1]

    def two_ctrl_cs():  # once both are up, Ctrl-C twice: the second stops at once
        for child in started:
            child.stdout.readline()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", start)
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 30},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    presses = threading.Timer(0.5, two_ctrl_cs)
    try:
        presses.start()
        with pytest.raises(KeyboardInterrupt):
            local_cluster.run_local_processes(cfg, tmp_path)
    finally:
        presses.join()
        os.close(peer_gone)
    assert all(child.poll() is not None for child in started)
    assert "coordinator gone" not in capfd.readouterr().err
    assert "F fatal: coordinator gone" in (tmp_path / "process_1.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("typed", ["distributed.process_id=0", "distributed.coordinator_address=10.0.0.1:1234",
                                   "distributed.num_processes=4"])
def test_a_setting_distributed_local_gives_its_processes_typed_on_its_command_is_refused_naming_it(typed, monkeypatch):
    # Was: distributed=local distributed.process_id=0 ran as one of its processes, a child's, and was refused after
    # its folder was made ("distributed.mode=explicit needs distributed.coordinator_address"); an address or a count
    # typed was dropped without a word (the parent gives each process its own).
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.command_checks import config_problem
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    monkeypatch.delenv("GENSBI_SHARDING_PARENT_FD", raising=False)
    key, value = typed.split("=")
    # the run's checks, which launch.py makes before Hydra makes the run's folder
    assert config_problem(["experiment=quick", "distributed=local", typed]) == (
        f"ConfigError: {key}={value}: distributed=local gives each process it starts its own process_id, "
        f"coordinator_address and num_processes; set {key}=null")
    # one of its processes, which its parent gives them to, runs
    monkeypatch.setenv("GENSBI_SHARDING_PARENT_FD", "3")
    cfg = compose_tiny("distributed=local", typed)
    try:
        validate(cfg)
    except ConfigError as err:
        assert "distributed=local gives each process" not in str(err), err


@pytest.mark.slow
@pytest.mark.parametrize("overrides, message", [
    (["mesh.model_axis=8"], "ConfigError: mesh.model_axis=8: each of the 2 processes holds 4 devices; 4 devices are "
     "not divisible by model_axis=8; set mesh.model_axis=4; a model group stays inside one process (divisors of 4: "
     "[1, 2, 4])"),
    (["distributed.local_processes=4", "mesh.model_axis=4", "data.batch_size=6"],
     "ConfigError: mesh.model_axis=4: each of the 4 processes holds 2 devices; 2 devices are not divisible by "
     "model_axis=4; set mesh.model_axis=2 and data.batch_size=4 (the batch is split over 4 data shards and the "
     "data-parallel size 4; no model axis keeps data.batch_size=6); a model group stays inside one process (divisors "
     "of 2: [1, 2])"),
    # Was: passed the parent's checks (an empty list read as no list), then each process refused it once started
    # ("mesh.devices=[] lists no device ..."), inside the run's folder (error.txt, launch.log, metrics.json)
    (["mesh.devices=[]"], "ConfigError: mesh.devices=[] lists no device; pass mesh.devices=null for all devices")])
def test_a_model_group_across_local_processes_is_refused_before_the_run_folder_is_made(tmp_path, overrides, message):
    # Was: launch.py distributed=local mesh.model_axis=8 made the run folder (.hydra, metrics.json, error.txt,
    # launch.log), then refused it there: the preflight checked only the processes' device split.
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.job_check import job_problem

    local = ["distributed=local", "distributed.local_processes=2"]
    assert job_problem(compose_tiny(*local, *overrides)) == message
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "launch.py", *local, *overrides, f"hydra.run.dir={out}"], cwd=REPO,
                          text=True, capture_output=True, timeout=120)
    console = message.removeprefix("ConfigError: ")  # the console's refusals carry no class name (5ad5b16)
    assert proc.returncode == 1 and console in proc.stderr + proc.stdout and not out.exists(), proc.stderr


def test_a_local_jobs_record_keeps_the_jobs_config_and_names_process_0s_apart(tmp_path, monkeypatch):
    # Was: process 0's config became the job's record (devices.cpu_count=4, local_processes=1, mode=explicit for a job
    # of 2 processes on 8 devices), so '-m distributed=local distributed.local_processes=2,4' showed cpu_count 4 / 2.
    from omegaconf import OmegaConf

    from gensbi_sharding.harness import local_cluster

    asked = {"devices": {"cpu_count": 8}, "distributed": {"mode": "auto", "local_processes": 2}}
    process_0 = {"devices": {"cpu_count": 4}, "distributed": {"mode": "explicit", "local_processes": 1}}
    monkeypatch.setattr(local_cluster, "run_local_processes",
                        lambda cfg, out, watch=None: {"status": "ok", "config": process_0, "final_step": 12})
    metrics = {"status": "error", "config": asked}
    assert local_cluster.run_local_job(OmegaConf.create(asked), tmp_path, metrics) is None
    assert metrics == {"status": "ok", "config": asked, "process_0_config": process_0, "final_step": 12}
