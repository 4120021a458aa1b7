"""The Lua sandbox in-process: environment, limits, escapes, error reporting and JSON conversion.

Host calls go to `FakeHost`, a double of the pipe protocol's parent side only (it answers "search" and
"read_file" requests the way the parent does: ok/error/limit replies). The real services are exercised in
tests/functional/evaluator.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from codewell.evaluator.sandbox import HostReply, SandboxLimits, SandboxOutcome, run_script

LIMITS = SandboxLimits(max_instructions=2_000_000, max_memory=32 * 1024 * 1024, cpu_seconds=5.0)

FILES = [
    {
        "repo": "github.com/acme/api",
        "path": "src/a.go",
        "commit": "a" * 40,
        "language": "Go",
        "matches": [{"line": 3, "text": "\tctx := context.TODO()"}, {"line": 9, "text": "context.TODO()"}],
    },
    {
        "repo": "github.com/other/web",
        "path": "b.go",
        "commit": "b" * 40,
        "language": "Go",
        "matches": [{"line": 1, "text": "context.TODO()"}],
    },
]


class FakeHost:
    """Answers host calls like the parent does; records them."""

    def __init__(self, limit_after: int | None = None) -> None:
        self.calls: list[tuple[str, list[Any]]] = []
        self.limit_after = limit_after

    def __call__(self, name: str, args: list[Any]) -> HostReply:
        self.calls.append((name, args))
        if self.limit_after is not None and len(self.calls) > self.limit_after:
            return "limit", f"the script called {name} more than {self.limit_after} times", "call_limit"
        if name == "search":
            if args[0] == "bad(":
                return "error", "search: unbalanced parenthesis (close it)", ""
            info = {"matchCount": 3, "limitHit": False, "timedOut": False, "skipped": []}
            return "ok", {"files": FILES, "info": info}, ""
        if name == "read_file":
            if args[0] != "github.com/acme/api":
                return "error", f"read_file: repository {args[0]!r} not found", ""
            return "ok", {"content": "one\ntwo\n", "lines": ["one", "two"], "startLine": args[2] or 1}, ""
        return "error", "unknown", ""


def run(source: str, limits: SandboxLimits = LIMITS, host: FakeHost | None = None) -> SandboxOutcome:
    return run_script(source, limits, host or FakeHost())


def value(source: str) -> Any:
    outcome = run(source)
    assert outcome.kind == "ok", outcome
    assert outcome.result is not None
    return json.loads(outcome.result)


# --- results and output ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("return 1 + 1", 2),
        ("return 7 / 2", 3.5),
        ("return 2^53", 9007199254740992.0),
        ("return 'héllo\\n\"q\"'", 'héllo\n"q"'),
        ("return true", True),
        ("return nil", None),
        ("local x = 1", None),
        ("return {1, 2, 3}", [1, 2, 3]),
        ("return {}", []),
        ("return {a = 1, b = {c = 'd'}}", {"a": 1, "b": {"c": "d"}}),
        ("return {1, 2, x = 3}", {"1": 1, "2": 2, "x": 3}),
        ("return {[1] = 'a', [3] = 'c'}", {"1": "a", "3": "c"}),
        ("return {[1.5] = 'x'}", {"1.5": "x"}),
        ("return 1, 'two', nil", [1, "two", None]),
        ("local t = {1} return t, t", [[1], [1]]),
        ("return '\\0\\1\\127'", "\x00\x01\x7f"),
    ],
)
def test_return_values_become_json(source: str, expected: Any) -> None:
    assert value(source) == expected


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    outcome = run("print('a\\255b') return {['k\\254'] = 'v\\255'}")
    assert outcome.kind == "ok"
    assert json.loads(outcome.result or "") == {"k\ufffd": "v\ufffd"}
    assert outcome.output == "a\ufffdb\n"


def test_print_is_captured_with_tabs_and_newlines() -> None:
    outcome = run("print('a', 1, nil, true, 2.5) print() return 0")
    assert outcome.output == "a\t1\tnil\ttrue\t2.5\n\n"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("local t = {} t.self = t return t", "reference cycle; a table cannot contain itself (at $.self)"),
        ("local t = {{}} t[1][1] = t return t", "reference cycle; a table cannot contain itself (at $[1][1])"),
        ("return {f = print}", "a function cannot be converted to JSON"),
        ("return {co = coroutine.create(print)}", "a thread cannot be converted to JSON"),
        ("return {[true] = 1}", "a table key of type boolean cannot be converted to JSON"),
        ("return {n = 0/0}", "cannot be converted to JSON (at $.n)"),
        ("return {['a b'] = {math.huge}}", 'the number inf cannot be converted to JSON (at $["a b"][1])'),
        ("return {[1] = 'x', ['1'] = 'y'}", "collide in JSON"),
    ],
)
def test_unconvertible_results_are_clear_errors(source: str, message: str) -> None:
    outcome = run(source)
    assert outcome.kind == "result_error"
    assert outcome.message is not None
    assert message in outcome.message


def test_deep_nesting_and_huge_results_are_limited() -> None:
    deep = run("local t = {} for i = 1, 100 do t = {t} end return t")
    assert deep.kind == "result_error"
    assert "nested more than 64 levels" in (deep.message or "")
    roomy = SandboxLimits(max_instructions=50_000_000)
    big = run("local t = {} for i = 1, 100000 do t[i] = 'xxxxxxxxxx' end return t", roomy)
    assert big.kind == "result_limit"
    assert big.message == f"the script's result is larger than {LIMITS.max_result} bytes of JSON"
    # A DAG that doubles at each level would encode to 2^40 copies: stopped by the size limit, quickly.
    dag = run("local t = {} for i = 1, 40 do t = {t, t} end return t", roomy)
    assert dag.kind in {"result_limit", "result_error"}


def test_metamethods_do_not_run_during_conversion() -> None:
    # The encoder reads raw fields: __index/__pairs cannot inject values or run code outside the hook.
    source = """
        local t = setmetatable({a = 1}, {__index = function() while true do end end,
                                        __pairs = function() error('no') end, __len = function() return 99 end})
        return t
    """
    assert value(source) == {"a": 1}


# --- script errors ----------------------------------------------------------------------------------


def test_syntax_error_has_line_and_message() -> None:
    outcome = run("local a = 1\nlocal b = = 2\nreturn b")
    assert outcome.kind == "syntax_error"
    assert outcome.line == 2
    assert outcome.message == "unexpected symbol near '='"


def test_unfinished_block_reports_where_it_ended() -> None:
    outcome = run("for i = 1, 3 do\n  print(i)\n")
    assert outcome.kind == "syntax_error"
    assert outcome.line == 3
    assert "'end' expected" in (outcome.message or "")


def test_runtime_error_has_line_message_and_traceback() -> None:
    outcome = run("local function f(t)\n  return t.x.y\nend\nprint('before')\nreturn f({})")
    assert outcome.kind == "runtime_error"
    assert outcome.line == 2
    assert outcome.message == "attempt to index a nil value (field 'x')"
    assert outcome.output == "before\n"
    assert outcome.traceback[0].startswith("script:2:")


def test_error_with_table_value_and_level_zero() -> None:
    table_error = run("error({code = 1})")
    assert table_error.kind == "runtime_error"
    assert table_error.message == "(error object is a table value)"
    assert table_error.line == 1
    plain = run("\n\nerror('plain message', 0)")
    assert plain.message == "plain message"
    assert plain.line == 3  # from the traceback, as the message carries no position


def test_huge_error_messages_are_truncated() -> None:
    outcome = run("error(string.rep('x', 100000))")
    assert outcome.kind == "runtime_error"
    assert len(outcome.message or "") < 2100
    assert (outcome.message or "").endswith("... (truncated)")


def test_yield_outside_a_coroutine_is_an_error() -> None:
    outcome = run("coroutine.yield(1)\nreturn 2")
    assert outcome.kind == "runtime_error"
    assert outcome.message == "coroutine.yield was called outside a coroutine"


# --- limits ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "while true do end",
        "local i = 0 repeat i = i + 1 until false",
        "for i = 1, 100 do pcall(function() while true do end end) end return 'escaped'",
        "for i = 1, 100 do xpcall(function() while true do end end, function() return 'ok' end) end return 1",
        "local co = coroutine.wrap(function() while true do end end) co() return 'escaped'",
        "local co = coroutine.create(function() while true do end end) coroutine.resume(co) return 'escaped'",
        "local ok = pcall(coroutine.wrap(function() while true do end end)) return 'escaped'",
        "string.gsub(string.rep('a', 100), 'a', function() while true do end end)",
        "table.sort({3, 2, 1}, function(a, b) while true do end end)",
        "local t = setmetatable({}, {__index = function(t, k) while true do end end}) return t.x",
        "local s = setmetatable({}, {__tostring = function() while true do end end}) print(s)",
        "local f = load('while true do end') f()",
        "local x <close> = setmetatable({}, {__close = function() while true do end end}) while true do end",
    ],
)
def test_infinite_loops_stop_at_the_instruction_limit(source: str) -> None:
    outcome = run(source)
    assert outcome.kind == "instruction_limit"
    assert outcome.message == "the script exceeded the limit of 2000000 instructions"
    assert outcome.instructions > LIMITS.max_instructions


def test_caught_limit_stays_caught() -> None:
    # A handler that catches the stop and keeps working (or returns) is stopped again.
    source = """
        local n = 0
        while true do
          local ok, err = pcall(function() while true do end end)
          n = n + 1
          if n > 3 then return 'survived', n end
        end
    """
    outcome = run(source)
    assert outcome.kind == "instruction_limit"
    assert outcome.result is None


def test_cpu_time_limit_inside_lua() -> None:
    limits = SandboxLimits(max_instructions=10**12, cpu_seconds=0.2)
    outcome = run("while true do end", limits)
    assert outcome.kind == "time_limit"
    assert outcome.message == "the script exceeded the time limit of 0.2 seconds"


@pytest.mark.parametrize(
    "source",
    [
        "local s = string.rep('x', 1e9) return #s",
        "local s = string.rep('x', 2^16, string.rep('y', 2^10))",
        "local ok, e = pcall(string.rep, 'x', 1e9) return ok, e",
        "local t = {} for i = 1, 1e9 do t[i] = i end",
        "local t = {} for i = 1, 1e9 do t[#t + 1] = tostring(i) .. 'padding-padding' end",
        "local s = 'x' while true do s = s .. s end",
        "local ok = pcall(function() local s = 'x' while true do s = s .. s end end) return ok",
        "return table.concat(setmetatable({}, {__index = function() return string.rep('z', 2^20) end}), '', 1, 1e6)",
    ],
)
def test_memory_bombs_stop_at_the_memory_limit(source: str) -> None:
    # A generous CPU limit: on a slow or loaded machine the memory cap must still be what stops these.
    limits = SandboxLimits(max_instructions=50_000_000, max_memory=32 * 1024 * 1024, cpu_seconds=30.0)
    outcome = run(source, limits)
    assert outcome.kind == "memory_limit", outcome
    assert outcome.message == "the script exceeded the memory limit of 33554432 bytes"


def test_deep_recursion_is_stopped() -> None:
    outcome = run("local function f(n) return 1 + f(n + 1) end\nreturn f(1)")
    assert outcome.kind in {"stack_overflow", "memory_limit"}
    assert outcome.line == 1
    # Through pcall the C stack overflows first; pcall catches that like any error and the script ends.
    c_stack = run("local function f() return pcall(f) end return f()")
    assert c_stack.kind == "ok"
    assert (c_stack.result or "").endswith('false,"C stack overflow"]')
    uncaught = run("local function f() return 1 + select(2, assert(pcall(f))) end\nreturn f()")
    assert uncaught.kind == "stack_overflow"
    assert "stack overflow" in (uncaught.message or "")


def test_huge_output_is_cut_at_the_limit() -> None:
    outcome = run("for i = 1, 1e6 do print(string.rep('y', 99)) end")
    assert outcome.kind == "output_limit"
    assert len(outcome.output.encode()) == LIMITS.max_output
    single = run("print(string.rep('z', 1e6))")
    assert single.kind == "output_limit"
    assert len(single.output) == LIMITS.max_output


# --- escapes -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("return io.open('/etc/passwd'):read('a')", "attempt to index a nil value (global 'io')"),
        ("return io.popen('id')", "attempt to index a nil value (global 'io')"),
        ("return os.execute('id')", "attempt to call a nil value (field 'execute')"),
        ("return os.getenv('HOME')", "attempt to call a nil value (field 'getenv')"),
        ("return os.remove('/tmp/x')", "attempt to call a nil value (field 'remove')"),
        ("os.exit(1)", "attempt to call a nil value (field 'exit')"),
        ("return require('os')", "attempt to call a nil value (global 'require')"),
        ("return package.loaded.os", "attempt to index a nil value (global 'package')"),
        ("return dofile('/etc/passwd')", "attempt to call a nil value (global 'dofile')"),
        ("return loadfile('/etc/passwd')", "attempt to call a nil value (global 'loadfile')"),
        ("return string.dump(print)", "attempt to call a nil value (field 'dump')"),
        ("return ('x'):dump()", "attempt to call a nil value (method 'dump')"),
        ("return debug.getinfo(1)", "attempt to index a nil value (global 'debug')"),
        ("debug.sethook()", "attempt to index a nil value (global 'debug')"),
        ("return getmetatable('').__index.dump", "attempt to index a boolean value"),
        ("return python.eval('1')", "attempt to index a nil value (global 'python')"),
        ("return load('\\27Lua')", "load: precompiled bytecode is not allowed"),
        ("return load('return 1', 'x', 'b')", 'load: only text chunks are allowed (mode "t")'),
        ("return load('return 1', 'x', 'bt')", 'load: only text chunks are allowed (mode "t")'),
        ("collectgarbage('stop')", 'collectgarbage: only collectgarbage("count") is allowed'),
        ("collectgarbage()", 'collectgarbage: only collectgarbage("count") is allowed'),
        ("setmetatable({}, {__gc = function() while true do end end})", "__gc metamethods are not allowed"),
        ("setmetatable({}, {__gc = true})", "__gc metamethods are not allowed"),
    ],
)
def test_escape_attempts_fail_clearly(source: str, message: str) -> None:
    outcome = run(source)
    if outcome.kind == "ok":
        # load returns nil, message instead of raising: surface it.
        assert message in json.dumps(json.loads(outcome.result or "null"))
        return
    assert outcome.kind == "runtime_error"
    assert message in (outcome.message or "")


@pytest.mark.parametrize(
    "source",
    [
        "return load('return io')()",
        "return load('return debug')()",
        "return load('return require')()",
        "return load(function() return nil end)()",
        "return _G.io",
        "return _ENV.os.execute",
        "return rawget(_G, 'debug')",
        "local e = setmetatable({}, {__index = _G}) return load('return io', 'x', 't', e)()",
        "return getmetatable('')",
        "return getmetatable(print)",
        "return select(2, pcall(string.dump, print))",
    ],
)
def test_nothing_outside_the_whitelist_is_reachable(source: str) -> None:
    outcome = run(source)
    assert outcome.kind in {"ok", "runtime_error"}
    if outcome.kind == "ok":
        assert json.loads(outcome.result or "null") in (None, False, [], "attempt to call a nil value")


def test_globals_are_exactly_the_whitelist() -> None:
    names = value("local n = {} for k in pairs(_G) do n[#n + 1] = k end table.sort(n) return n")
    assert names == sorted(
        [
            "_G",
            "_VERSION",
            "assert",
            "collectgarbage",
            "coroutine",
            "error",
            "getmetatable",
            "ipairs",
            "load",
            "math",
            "next",
            "os",
            "pairs",
            "pcall",
            "print",
            "rawequal",
            "rawget",
            "rawlen",
            "rawset",
            "read_file",
            "search",
            "select",
            "setmetatable",
            "string",
            "table",
            "tonumber",
            "tostring",
            "type",
            "utf8",
            "xpcall",
        ]
    )
    assert value("local n = {} for k in pairs(os) do n[#n + 1] = k end table.sort(n) return n") == [
        "clock",
        "date",
        "difftime",
        "time",
    ]


def test_scripts_cannot_break_the_sandbox_by_replacing_its_functions() -> None:
    # Replacing the script's copies of pcall/string/coroutine does not affect the limits or conversion.
    source = """
        string.rep = nil; string.format = nil; table.concat = nil; coroutine.create = nil
        pcall = function(f) return true end
        local t = {} t.x = 'still encoded'
        return t
    """
    assert value(source) == {"x": "still encoded"}
    assert run("string.gsub = nil while true do end").kind == "instruction_limit"


def test_string_methods_still_work_without_the_real_string_table() -> None:
    assert value("return ('Hello'):upper(), ('a,b'):find(',', 1, true), ('%d'):format(7)") == ["HELLO", 2, "7"]
    assert value("string.shout = function(s) return s:upper() .. '!' end return ('hi'):shout()") == "HI!"


def test_allowed_libraries_work() -> None:
    result = value(
        "return {math.max(1, 5), utf8.len('héllo'), table.concat({'a', 'b'}, '-'), type(os.time()), "
        "os.date('!%Y', 0), #string.format('%5.1f', 3.14159), select('#', 1, 2, 3), collectgarbage('count') > 0}"
    )
    assert result == [5, 5, "a-b", "number", "1970", 5, 3, True]


def test_coroutines_and_pcall_work_normally() -> None:
    source = """
        local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end)
        local ok, err = pcall(error, 'boom', 0)
        local ok2, v = xpcall(function() return 5 end, debug_handler or print)
        return {gen(), gen(), gen(), ok, err, ok2, v}
    """
    assert value(source) == [1, 2, 3, False, "boom", True, 5]


# --- host calls -------------------------------------------------------------------------------------


def test_search_returns_files_and_info() -> None:
    host = FakeHost()
    source = """
        local files, info = search('context.TODO')
        local per_repo = {}
        for _, f in ipairs(files) do per_repo[f.repo] = (per_repo[f.repo] or 0) + #f.matches end
        return {per_repo = per_repo, first = files[1].matches[1].line, count = info.matchCount}
    """
    outcome = run(source, host=host)
    assert outcome.kind == "ok", outcome
    assert json.loads(outcome.result or "") == {
        "count": 3,
        "first": 3,
        "per_repo": {"github.com/acme/api": 2, "github.com/other/web": 1},
    }
    assert host.calls == [("search", ["context.TODO"])]


def test_host_errors_are_catchable_lua_errors() -> None:
    outcome = run("local ok, err = pcall(search, 'bad(') return ok, err")
    assert json.loads(outcome.result or "") == [False, "search: unbalanced parenthesis (close it)"]
    uncaught = run("local x = 1\nlocal f = search('bad(')\nreturn f")
    assert uncaught.kind == "runtime_error"
    assert uncaught.line == 2
    assert uncaught.message == "search: unbalanced parenthesis (close it)"


def test_host_limits_cannot_be_caught() -> None:
    host = FakeHost(limit_after=2)
    source = "for i = 1, 10 do pcall(search, 'x') end return 'survived'"
    outcome = run(source, host=host)
    assert outcome.kind == "call_limit"
    assert outcome.message == "the script called search more than 2 times"
    assert len(host.calls) == 3


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("return search()", "bad argument #1 to 'search' (string expected, got nil)"),
        ("return search({})", "bad argument #1 to 'search' (string expected, got table)"),
        ("return read_file('r')", "bad argument #2 to 'read_file' (string expected, got nil)"),
        (
            "return read_file('r', 'p', 'x')",
            "bad argument #3 to 'read_file' (integer line number expected, got string)",
        ),
        ("return read_file('r', 'p', 1.5)", "bad argument #3 to 'read_file' (integer line number expected, got float)"),
    ],
)
def test_host_function_arguments_are_checked(source: str, message: str) -> None:
    host = FakeHost()
    outcome = run(source, host=host)
    assert outcome.kind == "runtime_error"
    assert outcome.message == message
    assert host.calls == []


def test_read_file_passes_lines_and_returns_content() -> None:
    host = FakeHost()
    assert value("return read_file('github.com/acme/api', 'a.go', 2.0, 5).startLine") == 2
    outcome = run("return read_file('github.com/acme/api', 'a.go', 2.0, 5).content", host=host)
    assert json.loads(outcome.result or "") == "one\ntwo\n"
    assert host.calls == [("read_file", ["github.com/acme/api", "a.go", 2, 5])]
    missing = run("local f = read_file('nope', 'a')")
    assert missing.message == "read_file: repository 'nope' not found"


def test_each_run_starts_from_a_fresh_state() -> None:
    assert run("leak = 'x' string.secret = 1 return 1").kind == "ok"
    assert value("return {leak, string.secret}") == []
