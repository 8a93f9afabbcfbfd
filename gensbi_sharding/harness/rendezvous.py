"""The explicit-mode rendezvous before ``jax.distributed.initialize``: every process meets at the coordinator's
address first, so an address nobody serves, a process that never comes or two given one ``process_id`` end in a
``ConfigError`` within ``distributed.timeout_s`` instead of an abort inside JAX's C++ client."""

from __future__ import annotations

import contextlib
import socket
import time

from gensbi_sharding.harness.config import ConfigError

__all__ = ["check_coordinator"]


def check_coordinator(address: str, process_id: int, num_processes: int, timeout_s: float) -> None:
    """Meet every process at ``address`` before ``jax.distributed.initialize``, bounded by ``timeout_s``.

    ``initialize`` aborts the process in C++ when the coordinator is unreachable or a
    process never joins, leaving no record. So process 0 first listens on the
    coordinator's port until the other ``num_processes - 1`` have connected, and each
    of them connects (retrying: process 0 may start later) and waits for its go-ahead.
    Any failure is a ``ConfigError`` naming the address, raised in Python.

    Raises
    ------
    ConfigError
        Naming the address, what failed (missing processes, refused connection, a host
        that is not this machine's, a port in use) and the setting to change.
    """
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise ConfigError(f"distributed.coordinator_address={address} is not host:port, "
                          "e.g. distributed.coordinator_address=10.0.0.1:1234")
    deadline = time.monotonic() + timeout_s
    if process_id == 0:
        _serve_rendezvous(address, host, int(port), num_processes, timeout_s, deadline)
        return
    error = "no answer"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=max(deadline - time.monotonic(), 0.1)) as s:
                s.sendall(f"{process_id} {num_processes}\n".encode())  # the count too: "1..n-1" is process 0's
                s.settimeout(max(deadline - time.monotonic(), 0.1))
                answer = s.recv(16).split()
                if answer == [b"go"]:
                    return
                if answer[:1] == [b"no"]:  # was: retried until timeout_s, then told to start process 0 (it had)
                    raise ConfigError(_refused(address, process_id, num_processes, int((answer + [num_processes])[1])))
                error = "process 0 closed the connection"
        except OSError as err:
            error = err.strerror or type(err).__name__
        time.sleep(0.2)
    # Refused: process 0 not yet serving, or done already (met its n-1 others) and this process_id one's twin
    twin = (f" (where process 0 runs, it met its {num_processes - 1} other(s) already: is distributed.process_id="
            f"{process_id} given to two processes?)") if error == "Connection refused" else ""
    raise ConfigError(
        f"process {process_id} could not join the coordinator at distributed.coordinator_address={address} "
        f"within distributed.timeout_s={timeout_s} s ({error}): start process 0 there, or fix the address{twin}")


def _serve_rendezvous(address: str, host: str, port: int, num_processes: int, timeout_s: float,
                      deadline: float) -> None:
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, 0))  # the coordinator must be an address of this machine
        server = socket.create_server(("", port))
    except OSError as err:
        raise ConfigError(
            f"process 0 cannot serve the coordinator at distributed.coordinator_address={address} "
            f"({err.strerror}): give an address of this host and a free port") from None
    joined: dict[int, socket.socket] = {}
    strays: list[int] = []  # turned away: a process_id outside 1..n-1 or given twice
    others: list[str] = []  # turned away: started with another distributed.num_processes ("3 of 4")
    with server:
        while len(joined) < num_processes - 1 and time.monotonic() < deadline:
            server.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                conn, _ = server.accept()
                conn.settimeout(max(deadline - time.monotonic(), 0.01))
                with contextlib.ExitStack() as unread:  # closed at once unless it parses (no wait for the GC)
                    unread.callback(conn.close)
                    rank, count = map(int, conn.recv(32).split())
                    unread.pop_all()
                # another count (initialize would wait for processes that never come), a stray or a twin: told no
                if count != num_processes or not 0 < rank < num_processes or rank in joined:
                    if count == num_processes:
                        strays.append(rank)
                    else:
                        others.append(f"{rank} of {count}")
                    with conn:
                        conn.sendall(f"no {num_processes}".encode())
                    continue
                joined[rank] = conn
            except (OSError, ValueError):
                continue
        complete = len(joined) == num_processes - 1
        for conn in joined.values():
            with conn:
                if complete:
                    conn.sendall(b"go")
    missing = sorted(set(range(1, num_processes)) - set(joined))
    if missing:
        raise ConfigError(
            f"process(es) {missing} of {num_processes} did not reach the coordinator at "
            f"distributed.coordinator_address={address} within distributed.timeout_s={timeout_s} s: "
            "start them with this address, or raise distributed.timeout_s"
            + (f" (refused: process_id {sorted(set(strays))}, outside 1..{num_processes - 1} or given twice)"
               if strays else "")
            + (f" (refused: process_id {', '.join(sorted(set(others)))}: started with another "
               "distributed.num_processes)" if others else ""))


def _refused(address: str, process_id: int, num_processes: int, served: int) -> str:
    """What a process process 0 turned away is told: the setting to fix, by the count process 0 runs."""
    said = f"process 0 at distributed.coordinator_address={address} refused distributed.process_id={process_id}: "
    if served != num_processes:  # "not one of 1..n-1" with this process's n would name a range that holds it
        return (f"{said}it runs distributed.num_processes={served}, this process {num_processes}; give every "
                f"process the same distributed.num_processes")
    return (f"{said}another process has it, or it is not one of 1..{served - 1}; give each process its own, "
            "numbered from 0")
