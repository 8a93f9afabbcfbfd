"""Several ``python launch.py <args>`` commands for the price of one Python start: each a forked child.

A launch that fails in its first second (a bad override) spends most of that second importing Hydra,
JAX and the harness (about 1.5 s of CPU). This script imports what the script (launch.py, or a benchmark)
imports at its top level once, then forks one child per command: the child takes the command's working
folder and arguments, sends its stdout and stderr to files, runs the script as ``__main__`` and ends as the
interpreter ends it (exit code, an uncaught exception's traceback, atexit handlers). Each command still runs
in a process of its own, from the script's first line; only the imports are shared. Importing never starts
JAX's backend (launch.py promises it; the benchmarks start it in their own code), so each child starts its
own, and forking before that is safe.

    python tests/fork_launch.py <spec.json>

spec.json: ``{"script": <path>, "runs": [{"args": [...], "cwd": ..., "stdout": ..., "stderr": ...}, ...]}``;
each run's exit code is written to ``<stdout>.rc``. A run may name its own ``"script"`` (in the folder of
``script``): the imports of every script named are made once, and each run's child runs its own. A run may name ``"snapshot": [src, dst]``: folder ``src`` is
copied to ``dst`` just before that run starts (what an earlier run left, as the run found it); with
``"group_deadline_s"``, the runs of one ``group`` start at once and the groups one after the other. The
environment is this process's, as the commands' would be (the callers launch them all with one environment).
``run_forked`` is the caller's side.
"""

import ast
import gc
import importlib
import json
import os
import runpy
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: What launch.py's run imports as it starts (JAX, Flax and the library: ~1.3 s of CPU), which launch.py's own imports
#: leave to it (its --help and a refused command need none of them): imported once here too, as they were with those.
RUN_START = ("gensbi_sharding.harness.devices", *(f"gensbi_sharding.{name}" for name in (
    "activations", "batch", "compiled", "host_input", "init", "mesh", "report", "rules", "sharding")))


def script_imports(script: Path) -> list[str]:
    """The modules ``script`` imports at its top level (inside a top-level ``try`` too) that this process may
    import for it: all of them for a script at the repository's root (``sys.path[0]`` is then the repository, as
    here), launch.py's with ``RUN_START``; for one elsewhere (benchmarks/, which put the repository on ``sys.path``
    themselves) only third-party ones, so the project's modules are still found from the path the script sets up."""
    tree = ast.parse(script.read_text())
    nodes = [*tree.body, *(n for t in tree.body if isinstance(t, ast.Try) for n in t.body)]
    names = [alias.name for n in nodes if isinstance(n, ast.Import) for alias in n.names]
    names += [n.module for n in nodes if isinstance(n, ast.ImportFrom) and n.level == 0]

    def ours(name):
        top = name.split(".")[0]
        return any((folder / top).exists() or (folder / f"{top}.py").exists() for folder in (REPO, script.parent))

    names += list(RUN_START) if script.resolve() == REPO / "launch.py" else []
    return [name for name in names if name != "__future__" and (script.parent == REPO or not ours(name))]


def _child(script: Path, run: dict) -> None:
    """In the forked child: run ``script`` as ``__main__`` with ``run``'s arguments; never returns.

    Whatever ends the script (its end, ``sys.exit``, an uncaught exception) ends this interpreter as it would
    end the script's own: the exit code, the traceback, then the threads, atexit handlers and flushes of
    Python's exit.
    """
    for fd, path in ((1, run["stdout"]), (2, run["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    os.chdir(run["cwd"])
    sys.argv = [str(script), *run["args"]]
    runpy.run_path(str(script), run_name="__main__")
    sys.exit(0)  # the script ran to its end


def _wait(pids: dict, runs: list, deadline: float | None) -> None:
    """Wait for the children ``pids`` (pid -> run index); write each one's exit code and exit time (epoch
    seconds); at ``deadline`` (epoch seconds) kill those left (SIGKILL) and mark them hung."""
    while pids:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            if deadline is not None and time.time() > deadline:
                for left in pids:
                    os.kill(left, signal.SIGKILL)
                    Path(runs[pids[left]]["stdout"] + ".hung").write_text("")
                deadline = None
            time.sleep(0.01)
            continue
        run = runs[pids.pop(pid)]
        Path(run["stdout"] + ".at").write_text(repr(time.time()))
        Path(run["stdout"] + ".rc").write_text(str(os.waitstatus_to_exitcode(status)))


def _groups(script: Path, runs: list, deadline_s: float) -> None:
    """Fork the runs of each group (a run's ``group``) at once, the groups one after the other: each group's
    start time written beside its runs' outputs (``<stdout>.start``), those alive ``deadline_s`` after it
    killed (hung)."""
    for group in dict.fromkeys(run["group"] for run in runs):
        pids, started = {}, time.time()
        for i, run in enumerate(runs):
            if run["group"] == group:
                Path(run["stdout"] + ".start").write_text(repr(started))
                pids[_fork(script, run)] = i
        _wait(pids, runs, started + deadline_s)


def _fork(script: Path, run: dict) -> int:
    """Fork a child that runs ``run`` (never returns in it): ``script``, or the run's own ``script``; the parent's
    buffers flushed first, so none is written twice. Returns the child's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(Path(run["script"]).resolve() if run.get("script") else script, run)
    return pid


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    script = Path(spec["script"]).resolve()
    runs, pids = spec["runs"], {}
    scripts = list(dict.fromkeys([script, *(Path(run["script"]).resolve() for run in runs if run.get("script"))]))
    assert {s.parent for s in scripts} == {script.parent}, "the runs' scripts are in one folder"
    sys.path[0] = str(script.parent)  # as `python <script>` has it (this file's folder otherwise)
    for name in [*(name for s in scripts for name in script_imports(s)), *spec.get("imports", [])]:
        importlib.import_module(name)
    # What the imports built is moved out of the cycle collector's reach, in this process and so in every child: a
    # child's collections (Python's last one at its exit among them) walked all of JAX's, Flax's and Hydra's objects,
    # ~0.6 s of a refused command's 0.8 s, and wrote to every page they share with this process. The child's own
    # objects, from the script's first line on, are collected as in `python <script>`.
    gc.freeze()
    if spec.get("group_deadline_s") is not None:
        return _groups(script, runs, spec["group_deadline_s"])
    for i, run in enumerate(runs):
        if run.get("snapshot"):
            shutil.copytree(*run["snapshot"])
        pids[_fork(script, run)] = i
        if not spec.get("together"):  # one after the other
            _wait(pids, runs, None)
    _wait(pids, runs, spec.get("deadline"))  # all at once


def end_group(proc: subprocess.Popen, wait_s: float = 30) -> None:
    """Kill ``proc`` (started with ``start_new_session=True``) and every process of its group (what it forked), then
    reap it, waiting at most ``wait_s``: nothing a timed-out run started outlives the test. The group is killed
    before ``proc`` is reaped, so its id (``proc``'s pid) names no other process's group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # the group has ended already
        pass
    proc.wait(timeout=wait_s)


def run_forked(runs: list[dict], *, env: dict, timeout: float, workdir: Path, script: Path = REPO / "launch.py",
               together: bool = False, imports: tuple[str, ...] = (), deadline_s: float | None = None,
               grouped: bool = False) -> list[subprocess.CompletedProcess]:
    """Each of ``runs`` (``args``, ``cwd``) as ``python <script> <args>`` in ``cwd`` would end, forked as above
    (a run's own ``script``, in the folder of ``script``, in place of ``script``: each script's imports shared).

    Returns one ``CompletedProcess`` per run (``returncode``, text ``stdout`` and ``stderr``, and ``seconds``
    from this call, as a caller of Popen times it from its own start, to the run's exit), in order; ``workdir``
    (outside every ``cwd``) keeps the spec and the captured streams. ``together``: all started at once
    (processes of one job) instead of one after the other; those alive ``deadline_s`` after this call are
    killed, their ``hung`` True. ``imports``: modules the script imports inside its functions, to import once
    here too. A run's ``snapshot`` (``(src, dst)``, one after the other only): folder ``src`` copied to ``dst``
    as the run starts, e.g. to compare what a run leaves of an earlier run's files with what it found.
    ``grouped``: the runs of one ``group`` (a run's key: the processes of one job) started at once, the groups
    one after the other; a group's runs alive ``deadline_s`` after the group started are killed, and their
    ``seconds`` count from that start.
    """
    if grouped and deadline_s is None:
        raise ValueError("grouped=True needs deadline_s: a group's bound")
    started = time.time()
    spec = {"script": str(script), "together": together, "imports": list(imports),
            "deadline": None if deadline_s is None else started + deadline_s,
            "group_deadline_s": deadline_s if grouped else None,
            "runs": [{"args": list(run["args"]), "cwd": str(run["cwd"]), "stdout": str(workdir / f"{i}.out"),
                      "stderr": str(workdir / f"{i}.err"), "group": run.get("group"),
                      "script": str(run["script"]) if run.get("script") else None,
                      "snapshot": [str(p) for p in run["snapshot"]] if run.get("snapshot") else None}
                     for i, run in enumerate(runs)]}
    (workdir / "spec.json").write_text(json.dumps(spec))
    # A session of its own: a timeout (or pytest-timeout's exception, a ^C) kills the driver and every child it forked.
    with subprocess.Popen([sys.executable, __file__, str(workdir / "spec.json")], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as driver:
        try:
            _, stderr = driver.communicate(timeout=timeout)
        except BaseException:
            end_group(driver)
            raise
    assert driver.returncode == 0, stderr[-3000:]
    done = []
    for run, files in zip(runs, spec["runs"]):
        out = Path(files["stdout"])
        proc = subprocess.CompletedProcess([sys.executable, str(run.get("script") or script), *run["args"]],
                                           int(Path(f"{out}.rc").read_text()), out.read_text(),
                                           Path(files["stderr"]).read_text())
        began = float(Path(f"{out}.start").read_text()) if grouped else started
        proc.seconds, proc.hung = float(Path(f"{out}.at").read_text()) - began, Path(f"{out}.hung").exists()
        done.append(proc)
    return done


if __name__ == "__main__":
    main(sys.argv[1])
