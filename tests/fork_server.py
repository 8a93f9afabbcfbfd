"""``python launch.py <args>`` processes started when a test asks, each forked from one Python process that
imported launch.py's modules once, and each a handle as ``subprocess.Popen`` gives (pid, poll, send_signal, ...).

tests/fork_launch.py forks commands known beforehand and waits for all of them; a test that signals a run (while
it trains, as it ends) needs the process while it runs, and starts the next one only after reading the last one's
folder. This server does the same forking on demand: a test module starts one (``ForkServer``), each ``launch``
forks a child that takes its working folder, arguments, environment changes, umask and session, sends its stdout and
stderr (together, as ``stderr=STDOUT``) to a file and runs launch.py as ``__main__`` from its first line; the
interpreter ends it as it ends launch.py's own process (exit code, traceback, atexit handlers). Only the imports
(~1.5 s of CPU a launch) are shared; importing them never starts JAX's backend (launch.py promises it), so each
child starts its own, with the XLA_FLAGS it was given.

    python tests/fork_server.py <script> [<module> ...]    (requests on stdin, one JSON line each; pids on stdout)
"""

import contextlib
import gc
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: What a tiny training run imports inside its functions (~0.7 s of CPU a launch), beside launch.py's own imports:
#: the server imports them once too (none starts a thread or JAX's backend: forking after them is safe).
RUN_IMPORTS = ("gensbi_sharding.harness.train", "gensbi_sharding.harness.state", "gensbi_sharding.harness.data",
               "gensbi_sharding.harness.simulation_data", "gensbi_sharding.harness.models",
               "gensbi_sharding.harness.pipeline", "gensbi_sharding.harness.resume",
               "gensbi_sharding.harness.validation", "gensbi_sharding.checkpoint", "sbibm_jax", "matplotlib.figure",
               "matplotlib.backends.backend_agg", "PIL.Image")


def _child(script: Path, request: dict) -> None:
    """In the forked child: become the command ``request`` names and run ``script``; never returns."""
    if request.get("new_session"):
        os.setsid()
    if request.get("umask") is not None:
        os.umask(request["umask"])
    for key in request.get("unset", ()):
        os.environ.pop(key, None)
    os.environ.update(request.get("env", {}))
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # never the server's requests
    for fd, path in ((1, request["output"]), (2, request.get("errors") or request["output"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), fd)  # append: both to one file
    os.chdir(request["cwd"])
    if request.get("prelude"):  # a test's patch, run as `python -c "<patch>; runpy.run_path(launch.py)"` runs it
        exec(compile(request["prelude"], "<prelude>", "exec"), {"__name__": "__prelude__"})
    sys.argv = [request.get("argv0") or str(script), *request["args"]]
    runpy.run_path(str(script), run_name="__main__")
    sys.exit(0)  # the script ran to its end


def serve(script: Path, imports: list[str]) -> None:
    """Import what ``script`` imports (and ``imports``), then fork a child per request line until stdin closes; each child's exit
    code goes to ``<output>.rc`` (written whole) once it is reaped. At stdin's end the children left are killed."""
    from fork_launch import script_imports

    sys.path[0] = str(script.parent)  # as `python <script>` has it (this file's folder otherwise)
    for name in [*script_imports(script), *imports]:
        importlib.import_module(name)
    gc.freeze()  # the imports' objects out of each child's collections, as in fork_launch.main
    os.write(1, b"ready\n")
    children, pending, open_ = {}, b"", True
    while open_ or children:
        if open_ and select.select([0], [], [], 0.01 if children else None)[0]:  # idle: asleep until asked
            data = os.read(0, 1 << 16)
            open_ = bool(data)
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(script, request)
                children[pid] = request["output"], request.get("new_session")
                os.write(1, f"{pid}\n".encode())
            if not open_:  # the tests are done: nothing left may outlive them
                for pid, (_, session) in children.items():  # unreaped: its pid (and group) still its own
                    if session:  # what it started in its own session too
                        with contextlib.suppress(ProcessLookupError):  # not yet in it (setsid is its first call)
                            os.killpg(pid, signal.SIGKILL)
                    os.kill(pid, signal.SIGKILL)
        elif not open_:
            time.sleep(0.01)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            output = children.pop(pid)[0]
            Path(f"{output}.rc.part").write_text(str(os.waitstatus_to_exitcode(status)))
            os.replace(f"{output}.rc.part", f"{output}.rc")


class Forked:
    """One forked launch, as ``subprocess.Popen(..., stdout=PIPE, stderr=STDOUT, text=True)`` is used here:
    ``pid``, ``returncode``, ``poll``, ``wait``, ``communicate`` (its output, None), ``send_signal``, ``kill``;
    with ``errors`` (a file for stderr), as ``stderr=PIPE`` too: ``communicate`` gives (stdout, stderr)."""

    def __init__(self, args: list[str], pid: int, output: Path, errors: Path | None = None):
        self.args, self.pid, self.output, self.errors, self.returncode = args, pid, output, errors, None

    def poll(self) -> int | None:
        if self.returncode is None and Path(f"{self.output}.rc").exists():
            self.returncode = int(Path(f"{self.output}.rc").read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.01)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        self.wait(timeout)
        return (self.output.read_text(errors="replace"),
                None if self.errors is None else self.errors.read_text(errors="replace"))

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """A server (above) for ``script``, started with ``env``; ``workdir`` keeps the children's output files;
    ``imports``: modules the script imports inside its functions, to import once in the server too."""

    def __init__(self, workdir: Path, env: dict, script: Path = REPO / "launch.py",
                 imports: tuple[str, ...] = RUN_IMPORTS, ready_s: float = 300, pid_s: float = 60):
        self.workdir, self.count, self.pid_s, self.pending = Path(workdir), 0, pid_s, b""
        # A session of its own: close() can end the server with every child it forked (but those in their own session).
        self.proc = subprocess.Popen([sys.executable, __file__, str(script), *imports], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, start_new_session=True)
        self.forked = []
        ready = self._line(ready_s, "'ready' line (its imports done)", "ready_s")
        assert ready == b"ready", f"the fork server did not start (exit {self.proc.wait(timeout=60)})"

    def _line(self, within_s: float, what: str, setting: str) -> bytes:
        """The server's next stdout line, waited for at most ``within_s`` seconds (ForkServer's ``setting``); none
        by then (or the server gone): the server is killed with its group and the error names ``what``."""
        from fork_launch import end_group

        deadline, fd = time.monotonic() + within_s, self.proc.stdout.fileno()  # os.read: no buffer hides a line
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            data = os.read(fd, 1 << 16) if left > 0 and select.select([fd], [], [], left)[0] else None
            if not data:  # the deadline passed (None) or the server's stdout ended (b"")
                end_group(self.proc)
                raise RuntimeError(f"the fork server (pid {self.proc.pid}) sent no {what} within {within_s:g} s "
                                   f"(exit {self.proc.returncode}); it was killed with its children: a longer "
                                   f"wait is ForkServer's {setting}")
            self.pending += data
        line, self.pending = self.pending.split(b"\n", 1)
        return line

    def launch(self, args: list[str], *, cwd: Path, env: dict | None = None, unset: tuple[str, ...] = (),
               umask: int | None = None, start_new_session: bool = False, prelude: str | None = None,
               argv0: str | None = None, stderr_apart: bool = False) -> Forked:
        """``python <script> <args>`` in ``cwd``, with ``env`` added to the server's environment and ``unset``
        removed; ``prelude``: Python code run first in the process (a test's patch); ``argv0``: its
        ``sys.argv[0]`` (the script's path otherwise); ``stderr_apart``: stderr to a file of its own."""
        self.count += 1
        output = self.workdir / f"{self.count}.out"
        errors = self.workdir / f"{self.count}.err" if stderr_apart else None
        request = {"args": list(args), "cwd": str(cwd), "env": env or {}, "unset": list(unset), "umask": umask,
                   "new_session": start_new_session, "prelude": prelude, "argv0": argv0, "output": str(output),
                   "errors": errors and str(errors)}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        pid = int(self._line(self.pid_s, f"pid for the launch of {args}", "pid_s"))
        self.forked.append(Forked([sys.executable, "launch.py", *args], pid, output, errors))
        return self.forked[-1]

    def close(self, timeout: float = 60) -> None:
        """End the server; a child still running is killed, and so is every process left in the server's group
        (what a launch started itself: a ``distributed=local`` job's processes). A server not ended ``timeout``
        seconds after its stdin closed is killed too, and its children in sessions of their own: none outlives the
        tests."""
        from fork_launch import end_group

        self.proc.stdin.close()
        if self.proc.returncode is not None:  # reaped already (a wait that timed out ended it with its group)
            return
        deadline = time.monotonic() + timeout
        # WNOWAIT: ended but not reaped, its pid names no other process's group when end_group kills the group.
        while os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            if time.monotonic() > deadline:
                for child in self.forked:  # not reaped (no exit code written): its pid is still its own
                    with contextlib.suppress(ProcessLookupError):
                        child.kill()
                break
            time.sleep(0.01)
        end_group(self.proc)


def launch_together(forks: ForkServer, launches: list[dict], bound: float) -> list[tuple[str, int]]:
    """Every launch of ``launches`` (each ``forks.launch``'s keyword arguments: ``args``, ``cwd``, ``prelude``, ...)
    forked at once, as faults_helpers.run_together starts its commands (the processes of one job), and waited for,
    each at most ``bound`` seconds: their console output (stderr into stdout) and exit codes. Any still running when
    this returns (a bound passed, an error) is killed, so a hung process of several never outlives its test."""
    procs = [forks.launch(**launch) for launch in launches]
    try:
        return [(proc.communicate(timeout=bound)[0], proc.returncode) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()  # nothing once it has exited (its exit code read)


if __name__ == "__main__":
    serve(Path(sys.argv[1]).resolve(), sys.argv[2:])
