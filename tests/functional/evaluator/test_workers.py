"""EvaluatorService over real worker processes: warm reuse, recycling after limits and crashes, the kill
timer and RLIMIT_CPU for single long C calls, isolation of the child, concurrency and shutdown."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from codewell.app import create_app
from codewell.core.actors import INTERNAL
from codewell.core.errors import InvalidInput, Unavailable
from codewell.evaluator.pool import RunLimits, Worker, WorkerDied
from codewell.evaluator.sandbox import SandboxLimits
from codewell.evaluator.service import EvaluationResult, EvaluatorLimits, EvaluatorService
from codewell.evaluator.setup import setup, warm_workers
from codewell.runtime import Runtime

# Backtracks O(n^4) inside one string.find call: the instruction hook never fires during it.
PATHOLOGICAL = "return string.find(string.rep('a', 40000), '.-.-.-.-b')"

FAST = EvaluatorLimits(
    sandbox=SandboxLimits(max_instructions=5_000_000, max_memory=32 * 1024 * 1024, cpu_seconds=1.0),
    timeout=1.0,
    total_timeout=10.0,
    acquire_timeout=5.0,
)


@pytest.fixture
def make_service(runtime: Runtime) -> Iterator[Callable[..., EvaluatorService]]:
    made: list[EvaluatorService] = []

    def make(limits: EvaluatorLimits = FAST, pool_size: int = 1) -> EvaluatorService:
        service = EvaluatorService(runtime, limits=limits, pool_size=pool_size)
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()


def wait_for_idle(service: EvaluatorService, count: int = 1, timeout: float = 10.0) -> list[int]:
    """The idle worker PIDs once `count` are warm (replacements start in the background)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = service.pool.idle_pids()
        if len(pids) >= count:
            return pids
        time.sleep(0.01)
    raise AssertionError(f"no {count} idle workers after {timeout}s: {service.pool.stats()}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run(service: EvaluatorService, script: str) -> EvaluationResult:
    return service.run(INTERNAL, script)


def test_trivial_script_reuses_the_warm_worker(make_service: Callable[..., EvaluatorService]) -> None:
    service = make_service()
    service.warm()
    [pid] = wait_for_idle(service)
    for n in range(5):
        result = run(service, f"print('run', {n}) return {{n = {n}}}")
        assert result.ok
        assert result.value == {"n": n}
        assert result.output == f"run\t{n}\n"
        assert not result.worker_recycled
    assert service.pool.idle_pids() == [pid]


@pytest.mark.parametrize(
    ("script", "kind", "line"),
    [
        ("local x = = 1", "syntax_error", 1),
        ("local t = nil\nreturn t.x", "runtime_error", 2),
        ("return {f = print}", "result_error", None),
    ],
)
def test_script_errors_are_reported_and_recycle_the_worker(
    make_service: Callable[..., EvaluatorService], script: str, kind: str, line: int | None
) -> None:
    service = make_service()
    service.warm()
    [pid] = wait_for_idle(service)
    result = run(service, script)
    assert result.error is not None
    assert result.error.kind == kind
    assert result.error.line == line
    assert result.error.hint
    assert result.worker_recycled
    [new_pid] = wait_for_idle(service)
    assert new_pid != pid
    assert run(service, "return leaked_global").value is None


@pytest.mark.parametrize("script", ["local x = = 1", "local t = nil\nreturn t.x", "return {f = print}"])
def test_script_errors_may_keep_the_worker_when_configured(
    make_service: Callable[..., EvaluatorService], script: str
) -> None:
    service = make_service(dataclasses.replace(EvaluatorLimits(), recycle_on_script_error=False))
    service.warm()
    [pid] = wait_for_idle(service)
    result = run(service, script)
    assert result.error is not None
    # A fresh Lua state per script: nothing survives a failed script, so the process can be kept.
    assert not result.worker_recycled
    assert service.pool.idle_pids() == [pid]
    assert run(service, "return leaked_global").value is None


@pytest.mark.parametrize(
    ("script", "kind"),
    [
        ("while true do end", "instruction_limit"),
        ("local s = string.rep('x', 1e9) return #s", "memory_limit"),
        ("local t = {} for i = 1, 1e9 do t[i] = i end", "memory_limit"),
        ("for i = 1, 1e6 do print(string.rep('y', 99)) end", "output_limit"),
        ("local t = {} for i = 1, 1e5 do t[i] = 'xxxxxxxxxx' end return t", "result_limit"),
        ("local function f() return 1 + f() end return f()", "stack_overflow"),
        (PATHOLOGICAL, "time_limit"),
    ],
)
def test_limits_give_clear_errors_and_recycle_the_worker(
    make_service: Callable[..., EvaluatorService], script: str, kind: str
) -> None:
    # Only the pathological case may reach the time limit; the others get time to reach their own limit
    # even on a slow, loaded machine (50M Lua instructions took 3.4 s on a slow 2-core one).
    seconds = 1.0 if kind == "time_limit" else 20.0
    limits = EvaluatorLimits(
        sandbox=SandboxLimits(max_instructions=50_000_000, max_memory=32 * 1024 * 1024, cpu_seconds=seconds),
        timeout=seconds,
        total_timeout=seconds + 10,
    )
    service = make_service(limits)
    service.warm()
    [pid] = wait_for_idle(service)
    started = time.monotonic()
    result = run(service, script)
    elapsed = time.monotonic() - started
    assert result.error is not None
    if kind == "stack_overflow":
        # Deep Lua recursion ends at the stack limit or at the memory cap, whichever comes first.
        assert result.error.kind in {"stack_overflow", "memory_limit"}
    else:
        assert result.error.kind == kind, result.error
    assert result.error.hint
    assert result.worker_recycled
    assert elapsed < seconds + 4
    assert pid not in service.pool.idle_pids()
    [new_pid] = wait_for_idle(service)
    assert new_pid != pid
    assert not alive(pid)
    # The service is unaffected: the next script runs normally on the replacement.
    assert run(service, "return 'fine'").value == "fine"


@pytest.mark.parametrize("script", [PATHOLOGICAL, "table.move({}, 1, 1e12, 2)"])
def test_single_long_c_call_is_killed_by_the_timer(make_service: Callable[..., EvaluatorService], script: str) -> None:
    service = make_service()
    service.warm()
    started = time.monotonic()
    result = run(service, script)
    elapsed = time.monotonic() - started
    assert result.error is not None
    assert result.error.kind == "time_limit"
    assert result.error.message == "the script exceeded the time limit of 1 seconds"
    assert "backtracking pattern" in result.error.hint
    # The timer allows the script time plus a short grace, no more.
    assert 1.0 <= elapsed < 2.5


def test_rlimit_cpu_stops_a_c_call_the_wall_timer_would_allow(
    make_service: Callable[..., EvaluatorService],
) -> None:
    # A generous wall-clock timeout: only the worker's RLIMIT_CPU (cpu_seconds + 1 s) can stop this.
    limits = EvaluatorLimits(sandbox=SandboxLimits(cpu_seconds=0.5), timeout=30.0)
    service = make_service(limits)
    service.warm()
    started = time.monotonic()
    result = run(service, PATHOLOGICAL)
    elapsed = time.monotonic() - started
    assert result.error is not None
    assert result.error.kind == "time_limit"
    assert result.error.message == "the script exceeded the CPU time limit of 0.5 seconds"
    # CPU seconds, not wall seconds: on a loaded machine this takes longer, but well under the 30 s timer.
    assert elapsed < 20
    assert result.worker_recycled


def test_worker_killed_while_idle_is_replaced_transparently(make_service: Callable[..., EvaluatorService]) -> None:
    service = make_service()
    service.warm()
    [pid] = wait_for_idle(service)
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)
    result = run(service, "return 1")
    assert result.ok
    assert result.value == 1
    assert pid not in service.pool.idle_pids()


def test_worker_crash_during_a_run_is_reported(runtime: Runtime) -> None:
    worker = Worker(address_space=512 * 1024 * 1024, max_frame=1 << 20)

    def crash(name: str, args: list[Any], deadline: float) -> dict[str, Any]:
        os.kill(worker.pid, signal.SIGSEGV)
        return {"status": "ok", "value": {"files": [], "info": {}}, "kind": ""}

    with pytest.raises(WorkerDied) as died:
        worker.run("return search('x')", RunLimits(SandboxLimits()), crash)
    assert died.value.kind == "crashed"
    assert "exit status -11" in str(died.value)
    assert worker.process.returncode == -signal.SIGSEGV


def test_worker_has_no_server_environment_or_descriptors(
    make_service: Callable[..., EvaluatorService], runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEWELL_DATABASE_URL", "postgresql://secret@db/prod")
    # Open descriptors of the server (the database, a socket) must not be inherited.
    runtime.db.engine.connect().close()
    service = make_service()
    service.warm()
    [pid] = wait_for_idle(service)
    proc = Path(f"/proc/{pid}")
    environ = (proc / "environ").read_bytes().split(b"\0")
    assert not [item for item in environ if item.startswith(b"CODEWELL")]
    targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    assert all(t == "/dev/null" or t.startswith("pipe:") for t in targets), targets
    assert os.readlink(f"/proc/{pid}/cwd") == "/"
    limits = (proc / "limits").read_text()
    address_space = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert "unlimited" not in address_space
    assert os.getsid(pid) == pid  # its own session: terminal signals go to the server only


def test_concurrent_runs_share_the_pool(make_service: Callable[..., EvaluatorService]) -> None:
    service = make_service(pool_size=2)
    service.warm()
    results: list[EvaluationResult] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        result = run(service, f"local s = 0 for i = 1, 200000 do s = s + i end return {n}")
        with lock:
            results.append(result)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.value for r in results) == list(range(6))
    assert service.pool.stats()["live"] == 2


def test_busy_pool_answers_unavailable(make_service: Callable[..., EvaluatorService]) -> None:
    limits = EvaluatorLimits(
        sandbox=SandboxLimits(max_instructions=10**12, cpu_seconds=1.0), timeout=1.0, acquire_timeout=0.2
    )
    service = make_service(limits)
    service.warm()
    busy = threading.Thread(target=run, args=(service, "while true do end"))
    busy.start()
    deadline = time.monotonic() + 5
    while service.pool.idle_pids() and time.monotonic() < deadline:
        time.sleep(0.01)  # until the busy script holds the only worker
    with pytest.raises(Unavailable, match="all 1 evaluator workers are busy"):
        run(service, "return 1")
    busy.join()
    wait_for_idle(service)  # the recycled worker's replacement
    assert run(service, "return 1").value == 1


def test_bad_scripts_are_invalid_input(make_service: Callable[..., EvaluatorService]) -> None:
    service = make_service()
    with pytest.raises(InvalidInput, match="the script is empty"):
        run(service, "   \n")
    with pytest.raises(InvalidInput, match="the limit is 65536"):
        run(service, "return '" + "x" * 70000 + "'")
    assert service.pool.stats()["live"] == 0  # rejected before any worker was started


def test_close_stops_every_worker(make_service: Callable[..., EvaluatorService]) -> None:
    service = make_service(pool_size=2)
    service.warm()
    pids = wait_for_idle(service, 2)
    service.close()
    assert not any(alive(pid) for pid in pids)
    with pytest.raises(Unavailable, match="shutting down"):
        run(service, "return 1")


def test_worst_case_escaping_of_output_and_result_fits_the_frame(
    make_service: Callable[..., EvaluatorService],
) -> None:
    service = make_service()
    script = (
        "print(string.rep('\\1', 65535))\n"  # 64 KB of output that escapes to six bytes per byte
        "return string.rep('\"', 120000)"  # a result whose JSON is escaped again inside the frame
    )
    result = run(service, script)
    assert result.ok, result.error
    assert result.value == '"' * 120000
    assert result.output == "\x01" * 65535 + "\n"
    assert not result.worker_recycled


@pytest.mark.parametrize(
    ("script", "position", "name"),
    [
        ("local files = search(string.rep('a', 1024 * 1024)) return #files", 1, "search"),
        ("local f = read_file('r', string.rep('\\1', 65537)) return f", 2, "read_file"),
        # Invalid UTF-8 is repaired to U+FFFD (3 bytes each) before it is sent: the repaired size counts.
        ("local f = read_file(string.rep('\\255', 30000), 'p') return f", 1, "read_file"),
    ],
)
def test_oversized_host_call_arguments_are_refused_before_the_pipe(
    make_service: Callable[..., EvaluatorService], script: str, position: int, name: str
) -> None:
    # A 1 MB argument used to exceed the call frame limit: the parent killed the worker ("crashed ... retry").
    service = make_service()
    result = run(service, script)
    assert result.error is not None
    assert result.error.kind == "runtime_error"
    assert f"bad argument #{position} to '{name}'" in result.error.message
    assert "the limit is 65536 bytes" in result.error.message
    assert result.error.line == 1


def test_oversized_arguments_can_be_caught_and_the_worker_survives(
    make_service: Callable[..., EvaluatorService],
) -> None:
    service = make_service(dataclasses.replace(FAST, recycle_on_script_error=False))
    service.warm()
    [pid] = wait_for_idle(service)
    result = run(service, "local ok, err = pcall(search, string.rep('a', 70000)) return {ok, err}")
    assert result.ok, result.error
    assert result.value[0] is False
    assert "(70000 bytes; the limit is 65536 bytes)" in result.value[1]
    assert not result.worker_recycled
    assert service.pool.idle_pids() == [pid]


def test_server_start_warms_the_pool(runtime: Runtime) -> None:

    create_app(runtime, background=False)
    assert [name for name, _ in runtime.background].count("evaluator-warm") == 1
    setup(runtime)  # idempotent
    assert [name for name, _ in runtime.background].count("evaluator-warm") == 1
    service = EvaluatorService(runtime, limits=FAST, pool_size=2)
    runtime.provide(EvaluatorService, service)
    try:
        asyncio.run(warm_workers(runtime))
        assert len(service.pool.idle_pids()) == 2
    finally:
        service.close()


def test_a_stuck_script_does_not_slow_the_others(make_service: Callable[..., EvaluatorService]) -> None:
    service = make_service(pool_size=2)
    service.warm()
    wait_for_idle(service, 2)
    stuck: list[EvaluationResult] = []
    thread = threading.Thread(target=lambda: stuck.append(run(service, PATHOLOGICAL)))
    thread.start()
    time.sleep(0.1)
    for n in range(10):
        started = time.monotonic()
        assert run(service, f"return {n}").value == n
        assert time.monotonic() - started < 1.0
    thread.join()
    assert stuck[0].error is not None
    assert stuck[0].error.kind == "time_limit"


def test_runs_and_recycles_are_counted_in_metrics(make_service: Callable[..., EvaluatorService]) -> None:
    def sample(name: str, labels: dict[str, str] | None = None) -> float:
        return REGISTRY.get_sample_value(name, labels or {}) or 0.0

    service = make_service()
    ok_before = sample("codewell_evaluator_runs_total", {"outcome": "ok"})
    loop_before = sample("codewell_evaluator_runs_total", {"outcome": "instruction_limit"})
    recycled_before = sample("codewell_evaluator_workers_recycled_total")
    run(service, "return 1")
    run(service, "while true do end")
    assert sample("codewell_evaluator_runs_total", {"outcome": "ok"}) == ok_before + 1
    assert sample("codewell_evaluator_runs_total", {"outcome": "instruction_limit"}) == loop_before + 1
    assert sample("codewell_evaluator_workers_recycled_total") == recycled_before + 1


def test_escape_attempts_recycle_the_worker(make_service: Callable[..., EvaluatorService]) -> None:
    service = make_service(FAST)
    service.warm()
    [pid] = wait_for_idle(service)
    assert run(service, "return io.open('/etc/passwd')").worker_recycled
    [new_pid] = wait_for_idle(service)
    assert new_pid != pid
    assert not run(service, "return 1").worker_recycled
    assert service.pool.idle_pids() == [new_pid]


ESCAPES = {
    "return io.open('/etc/passwd'):read('a')": "attempt to index a nil value (global 'io')",
    "return os.execute('id')": "attempt to call a nil value (field 'execute')",
    "return require('os')": "attempt to call a nil value (global 'require')",
    "return load('\\27Lua\\84\\0')": "load: precompiled bytecode is not allowed",
    "return load('return 1', '=x', 'b')": 'load: only text chunks are allowed (mode "t")',
    "return string.dump(print)": "attempt to call a nil value (field 'dump')",
    "return debug.sethook()": "attempt to index a nil value (global 'debug')",
    "return getmetatable('').__index.dump": "attempt to index a boolean value",
    "collectgarbage('stop') return 1": 'collectgarbage: only collectgarbage("count") is allowed in scripts',
    "setmetatable({}, {__gc = function() while true do end end})": "__gc metamethods are not allowed",
    "return python.eval('__import__(\"os\")')": "attempt to index a nil value (global 'python')",
}


def test_escape_attempts_through_a_real_worker(make_service: Callable[..., EvaluatorService]) -> None:
    service = make_service()
    for script, message in ESCAPES.items():
        result = run(service, script)
        if result.ok:  # load returns nil plus the message rather than raising
            assert result.value == [None, message], script
        else:
            assert result.error is not None
            assert result.error.kind == "runtime_error", script
            assert message in result.error.message, script
        # The worker keeps serving, from a fresh state.
        assert run(service, "return {io ~= nil, debug ~= nil, string.dump ~= nil}").value == [False, False, False]
