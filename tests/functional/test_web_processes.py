"""`codewell serve --web-processes 2` (src/codewell/cli/web_processes.py): two real processes answer on one
port, share what they cache through the database (a token revoked through one is refused by the other on its
next request), and end together: SIGTERM to the first stops both with exit status 0; SIGKILL of the first leaves
no replica behind.

Which process answers a connection is read from the kernel (/proc/net/tcp and each process's open sockets), not
from anything the server tells its clients. Each test starts one server: every process start costs ~2.5 CPU-s.
"""

from __future__ import annotations

import http.client
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codewell.accounts.tokens import TokenService
from codewell.cli import web_processes
from codewell.cli.web_processes import WebReplicas
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user
from tests.functional.jobs.test_processes import Deployment, alive, deployed, descendants

# How long a replica may take to end after its parent was killed (parent-death signal, then a graceful stop).
ORPHAN_SECONDS = 30.0


@pytest.fixture
def deployment(tmp_path: Path, settings: Settings) -> Iterator[Deployment]:
    with deployed(tmp_path, settings) as found:
        yield found


def _serve_two(deployment: Deployment) -> tuple[int, int]:
    """Start `serve --web-processes 2` (no job worker children: not what is tested); (first pid, replica pid)."""
    deployment.serve("web", "--web-processes", "2", "--job-processes", "0")
    deployment.wait_ready("web")
    first = deployment.processes["web"].pid
    replicas = [pid for pid in descendants(first) if b"--web-process-of" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(replicas) == 1, replicas
    port = deployment.ports["web"]
    deadline = time.monotonic() + 90  # the first answers /readyz while its replica may still be starting
    while not all(_listening(pid, port) for pid in (first, replicas[0])):
        assert time.monotonic() < deadline, deployment.log("web")
        time.sleep(0.2)
    return first, replicas[0]


def _listening(pid: int, port: int) -> bool:
    """Whether `pid` holds a socket listening on 127.0.0.1:`port`."""
    local = f"0100007F:{port:04X}"
    inodes = {
        fields[9]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
        if (fields := line.split())[1] == local and fields[3] == "0A"
    }
    return bool(inodes & _socket_inodes(pid))


def _socket_inodes(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            found.add(target[8:-1])
    return found


def _server_side_inode(server_port: int, client_port: int) -> str:
    """The inode of the server's end of the TCP connection from 127.0.0.1:`client_port`."""
    local, remote = f"0100007F:{server_port:04X}", f"0100007F:{client_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[2] == remote:
            return fields[9]
    raise AssertionError(f"no connection {client_port} -> {server_port} in /proc/net/tcp")


def _answering_pid(connection: http.client.HTTPConnection, port: int, pids: tuple[int, ...]) -> int:
    assert connection.sock is not None
    inode = _server_side_inode(port, connection.sock.getsockname()[1])
    owners = [pid for pid in pids if inode in _socket_inodes(pid)]
    assert len(owners) == 1, (inode, owners)
    return owners[0]


def _get(connection: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> int:
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    response.read()
    return response.status


def _one_connection_each(port: int, pids: tuple[int, int]) -> dict[int, http.client.HTTPConnection]:
    """A kept-alive connection answered by each of `pids` (new connections until both are seen)."""
    found: dict[int, http.client.HTTPConnection] = {}
    for _ in range(64):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        assert _get(connection, "/healthz", {}) == 200
        pid = _answering_pid(connection, port, pids)
        if pid in found:
            connection.close()
        else:
            found[pid] = connection
        if len(found) == len(pids):
            return found
    raise AssertionError(f"64 connections were all answered by {list(found)}: one port, not both processes")


def test_two_web_processes_share_one_port_and_a_revocation_then_stop_together(
    runtime: Runtime, deployment: Deployment
) -> None:
    alice = make_user(runtime, "alice")
    headers = auth_headers(make_token(runtime, alice))
    admin = auth_headers(make_token(runtime, make_user(runtime, "admin", site_admin=True)))
    first, replica = _serve_two(deployment)
    port = deployment.ports["web"]
    connections = _one_connection_each(port, (first, replica))
    for _ in range(2):  # the second answer of each comes from its process's cache
        for connection in connections.values():
            assert _get(connection, "/.api/users/alice", headers) == 200
    token_id = runtime.get(TokenService).list(INTERNAL, alice.id)[0].id
    connections[first].request("DELETE", f"/.api/tokens/{token_id}", headers=admin)
    revoked = connections[first].getresponse()
    assert revoked.status == 200, revoked.read()
    revoked.read()
    assert _get(connections[replica], "/.api/users/alice", headers) == 401
    assert _get(connections[first], "/.api/users/alice", headers) == 401
    for connection in connections.values():
        connection.close()

    server = deployment.processes["web"]
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=60) == 0, deployment.log("web")
    deadline = time.monotonic() + 10
    while alive(replica) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(replica), deployment.log("web")


def test_killing_the_first_web_process_ends_its_replica(deployment: Deployment) -> None:
    _first, replica = _serve_two(deployment)
    server = deployment.processes["web"]
    server.send_signal(signal.SIGKILL)  # no chance to stop its replica: the kernel tells it
    server.wait(10)
    deadline = time.monotonic() + ORPHAN_SECONDS
    while alive(replica) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(replica), deployment.log("web")


# --- the supervision on its own (stand-in commands: no server start) ------------------------------------


def test_a_replica_failing_at_its_start_stops_the_server_with_its_exit_status() -> None:
    replicas = WebReplicas(2, "127.0.0.1", 1, "text", {})
    replicas.command = [sys.executable, "-c", "import sys, time; time.sleep(0.2); sys.exit(3)"]
    stopping = threading.Event()
    replicas.start(on_failure=stopping.set)
    assert stopping.wait(30)
    assert replicas.stop() == 3


def test_a_replica_that_dies_later_is_started_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_processes, "CRASH_SECONDS", 0.5)
    replicas = WebReplicas(1, "127.0.0.1", 1, "text", {})
    replicas.command = [sys.executable, "-c", "import time; time.sleep(1)"]
    replicas.start(on_failure=lambda: None)
    for _ in range(2):  # the 1-second replica is replaced, then (the command changed) by one that runs on
        before = replicas.processes[0].pid
        deadline = time.monotonic() + 30
        while replicas.processes[0].pid == before:
            assert time.monotonic() < deadline, "the replica was not started again"
            time.sleep(0.1)
        replicas.command = [sys.executable, "-c", "import time; time.sleep(60)"]
    assert replicas.failed is None
    # Stopped by SIGTERM, which a plain Python process does not catch: reported as the shell would, 128 + 15.
    assert replicas.stop() == 128 + signal.SIGTERM
