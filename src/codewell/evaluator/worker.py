"""The evaluator's worker process: runs one script at a time in the sandbox, forever.

Started by the parent as `python -I -m codewell.evaluator.worker ADDRESS_SPACE_BYTES` with a minimal
environment and no inherited descriptors besides the protocol pipes (stdin/stdout). It imports only the
standard library, lupa and the sandbox: no settings, database or services. Host functions are forwarded to
the parent, which runs them with the caller's permissions.
"""

from __future__ import annotations

import math
import os
import resource
import sys
from typing import Any

from codewell.evaluator import protocol
from codewell.evaluator.sandbox import HostReply, SandboxLimits, SandboxOutcome, run_script

# Frames from the parent: a script (bounded by the service) or a host reply (bounded by the call limits).
MAX_FRAME = 64 * 1024 * 1024


def _limit_address_space(extra_bytes: int) -> None:
    """Cap virtual memory at what the interpreter uses now plus `extra_bytes`."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[0])
    limit = pages * os.sysconf("SC_PAGE_SIZE") + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # A worker killed by SIGXCPU must not leave a core file behind.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _limit_cpu(seconds: float) -> None:
    """Deliver SIGXCPU (fatal) once this run used `seconds` of CPU beyond what the process used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used + seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def serve(fd_in: int, fd_out: int) -> None:
    """Answer run requests until the parent closes the pipe."""
    protocol.write_frame(fd_out, {"type": "ready", "pid": os.getpid()})

    def host(name: str, args: list[Any]) -> HostReply:
        protocol.write_frame(fd_out, {"type": "call", "name": name, "args": args})
        reply = protocol.read_frame(fd_in, MAX_FRAME)
        return str(reply.get("status", "error")), reply.get("value"), str(reply.get("kind", ""))

    while True:
        try:
            message = protocol.read_frame(fd_in, MAX_FRAME)
        except protocol.ProtocolError:
            return
        if message["type"] != "run":
            continue
        limits = SandboxLimits(**message["limits"])
        # The hard stop behind the in-Lua limits: a single C call (a pathological pattern) is not
        # interrupted by the instruction hook. One extra second lets the clean in-Lua error win normally.
        _limit_cpu(limits.cpu_seconds + 1.0)
        try:
            outcome = run_script(str(message["script"]), limits, host)
        except MemoryError:
            # RLIMIT_AS reached outside Lua's own allocator (converting host data, say).
            outcome = SandboxOutcome(kind="memory_limit", message="the worker process ran out of memory")
        except protocol.ProtocolError:
            return  # the parent went away in the middle of a host call
        except Exception as exc:
            # A bug in the sandbox itself: report it (the parent replaces this worker) instead of dying silently.
            outcome = SandboxOutcome(kind="crashed", message=f"internal error in the sandbox ({type(exc).__name__})")
        protocol.write_frame(fd_out, {"type": "done", "outcome": outcome.as_dict()})


def main() -> None:
    extra = int(sys.argv[1]) if len(sys.argv) > 1 else 512 * 1024 * 1024
    # Keep the protocol on private descriptors; anything else writing to stdout cannot corrupt frames.
    fd_in, fd_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    _limit_address_space(extra)
    serve(fd_in, fd_out)


if __name__ == "__main__":
    main()
