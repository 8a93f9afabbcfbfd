"""A forked run that times out ends with everything it started: the fork driver (tests/fork_launch.py), the fork
server (tests/fork_server.py) and their children. Was: run_forked's timeout killed only its driver, whose forked
child went on sleeping (a review saw one alive 11 minutes after test_benchmark_arguments.py timed out)."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: A script that says who it is and who forked it, then sleeps past every bound here.
SLEEPER = "import os, time\nopen('pids', 'w').write(f'{os.getpid()} {os.getppid()}')\ntime.sleep(600)\n"


def ended(pid: int, within_s: float = 30) -> bool:
    """Whether process ``pid`` ends (gone, or a zombie: dead, its parent not yet reaping it) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


def sleeper_pids(folder: Path, within_s: float = 30) -> list[int]:
    """The sleeper's pid and its parent's (the driver or server that forked it), once it has written them."""
    deadline = time.monotonic() + within_s
    while not (folder / "pids").exists() or len((folder / "pids").read_text().split()) < 2:
        assert time.monotonic() < deadline, "the sleeper never started"
        time.sleep(0.05)
    return [int(pid) for pid in (folder / "pids").read_text().split()]


@pytest.mark.slow
def test_a_forked_run_that_times_out_leaves_no_process(tmp_path):
    from fork_launch import run_forked

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    (tmp_path / "fork").mkdir()
    with pytest.raises(subprocess.TimeoutExpired):
        run_forked([{"args": [], "cwd": tmp_path}], env=dict(os.environ), timeout=10, workdir=tmp_path / "fork",
                   script=tmp_path / "sleeper.py")
    child, driver = sleeper_pids(tmp_path, within_s=1)  # it had started: the timeout came while it slept
    assert driver != os.getpid()
    assert ended(driver) and ended(child)


@pytest.mark.slow
def test_a_fork_server_that_does_not_end_in_time_is_killed_with_its_children(tmp_path):
    from fork_server import ForkServer

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    server = ForkServer(tmp_path, dict(os.environ), script=tmp_path / "sleeper.py", imports=())
    child = server.launch([], cwd=tmp_path)
    assert sleeper_pids(tmp_path) == [child.pid, server.proc.pid]
    os.kill(server.proc.pid, signal.SIGSTOP)  # a server stuck: it never reads its stdin's end
    try:
        server.close(timeout=1)
    finally:  # the old close left it stopped: let it read its stdin's end and end its children
        if server.proc.poll() is None:
            os.kill(server.proc.pid, signal.SIGCONT)
    assert server.proc.returncode == -signal.SIGKILL
    assert ended(child.pid)


#: A script that starts a process of its own (as a ``distributed=local`` launch starts its job's), says both pids,
#: then ends or sleeps as its argument says.
STARTER = ("import os, subprocess, sys, time\nchild = subprocess.Popen([sys.executable, '-c', 'import time; "
           "time.sleep(600)'])\nopen('pids', 'w').write(f'{os.getpid()} {child.pid}')\n"
           "time.sleep(600) if sys.argv[1:] == ['sleep'] else None\n")


@pytest.mark.slow
@pytest.mark.parametrize("ends", [True, False], ids=["launch ended", "launch running"])
def test_a_fork_server_closed_as_usual_leaves_no_process_a_launch_started(tmp_path, ends):
    """Was: close() ended the server, which killed only the children it forked; what they had started lived on."""
    from fork_server import ForkServer

    (tmp_path / "starter.py").write_text(STARTER)
    server = ForkServer(tmp_path, dict(os.environ), script=tmp_path / "starter.py", imports=())
    launch = server.launch([] if ends else ["sleep"], cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not (tmp_path / "pids").exists() or len((tmp_path / "pids").read_text().split()) < 2:
        assert time.monotonic() < deadline, "the starter never started its process"
        time.sleep(0.05)
    started = int((tmp_path / "pids").read_text().split()[1])
    if ends:
        assert launch.wait(timeout=30) == 0
    server.close()
    assert server.proc.returncode == 0 and ended(started, within_s=5)


@pytest.mark.slow
@pytest.mark.timeout(60)  # the old waits were bounded by this alone: it fails them
def test_a_fork_server_that_never_says_ready_is_refused_in_time_and_killed(tmp_path):
    from fork_server import ForkServer

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    (tmp_path / "stuck.py").write_text("import time\ntime.sleep(600)\n")  # an import that never ends
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"server \(pid (\d+)\) sent no 'ready' line \(its imports done\) within 2 s "
                       r".*ready_s") as refused:
        ForkServer(tmp_path, dict(os.environ), script=tmp_path / "sleeper.py", imports=("stuck",), ready_s=2)
    assert time.monotonic() - start < 30
    assert ended(int(re.search(r"pid (\d+)", str(refused.value))[1]), within_s=1)  # reaped, not left stuck


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_launch_whose_pid_never_comes_is_refused_in_time(tmp_path):
    from fork_server import ForkServer

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    server = ForkServer(tmp_path, dict(os.environ), script=tmp_path / "sleeper.py", imports=(), pid_s=2)
    os.kill(server.proc.pid, signal.SIGSTOP)  # a server stuck: it never reads the request
    with pytest.raises(RuntimeError, match=r"sent no pid for the launch of \['x'\] within 2 s .*pid_s"):
        server.launch(["x"], cwd=tmp_path)
    assert server.proc.returncode == -signal.SIGKILL
    server.close()  # nothing left to end: returns at once
