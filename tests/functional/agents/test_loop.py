"""The agent loop end to end: real repositories and services, a scripted model on loopback (both protocols)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from codewell.agents import answering
from codewell.agents.answers import Citation
from codewell.agents.llm import build_model
from codewell.agents.loop import Budget, LoopFailed, run_loop
from codewell.agents.toolbox import Toolbox
from codewell.capabilities import wire
from codewell.config.models import ModelEndpoint
from codewell.core.actors import Actor
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user, set_site_config
from tests.fakes.llm import Call, Fail, FakeAnthropic, FakeModel, FakeOpenAI, Recorded, Step, Turn
from tests.gitfixtures import git, make_repo, register_local_repo

KEY = "sk-loop-Hq3Jt9Vb1Ck5Wd7"
KEY_ENV = "CW_LOOP_MODEL_KEY"
FILLER = "".join(f"\ndef filler_{i}(value):\n    return value + {i}\n" for i in range(60))
APP = {
    "app/session.py": (
        "def purgeExpiredSessions(store, now):\n"
        "    # remove sessions whose lifetime has ended\n"
        "    for key in list(store):\n"
        "        if store[key] < now:\n"
        "            del store[key]\n" + FILLER
    ),
    "app/http_client.py": "def send_request(url, retries):\n    # retry the request on failure\n    return url\n",
    "README.md": "A sample app.\n",
}
SECRET = {"hidden/vault.py": "def purge_secret_sessions():\n    return 0\n"}
FAKES = {"openai-compatible": FakeOpenAI, "anthropic": FakeAnthropic}


class World:
    def __init__(self, runtime: Runtime, alice: Actor, app_sha: str, secret_sha: str) -> None:
        self.runtime = runtime
        self.alice = alice
        self.app_sha = app_sha
        self.secret_sha = secret_sha


@pytest.fixture
def world(runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    wire(runtime)  # sync listeners: registering a repository indexes it (search, history, codenav, nls)
    app = make_repo(tmp_path / "app", APP)
    secret = make_repo(tmp_path / "secret", SECRET)
    register_local_repo(runtime, app, "acme/app")
    register_local_repo(runtime, secret, "acme/secret", private=True)
    monkeypatch.setenv(KEY_ENV, KEY)
    alice = actor_of_user(runtime, make_user(runtime, "alice"))
    return World(runtime, alice, git(app, "rev-parse", "HEAD").strip(), git(secret, "rev-parse", "HEAD").strip())


def configure(world: World, fake: FakeModel, **extra: Any) -> None:
    provider = "anthropic" if fake.protocol == "anthropic" else "openai-compatible"
    entry = {"provider": provider, "baseURL": fake.base_url, "model": "scripted", "apiKeyEnv": KEY_ENV, **extra}
    set_site_config(world.runtime, {"models": {"default": entry}})


def tool_results(request: Recorded) -> list[str]:
    """The tool outputs the model was sent in this request (either protocol), in order."""
    out: list[str] = []
    for m in request.body["messages"]:
        if m["role"] == "tool":
            out.append(m["content"])
        elif m["role"] == "user" and isinstance(m["content"], list):
            out.extend(b["content"] for b in m["content"] if b.get("type") == "tool_result")
    return out


def offered_tools(request: Recorded) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in request.body.get("tools", [])]


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_loop_answers_with_checked_citations(world: World, provider: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sha = world.app_sha
    final = (
        f"Expired sessions are purged by `purgeExpiredSessions` (acme/app@{sha}:app/session.py#L1-5), "
        f"which deletes each key past `now` (acme/app@{sha[:10]}:app/session.py#L4-5).\n\n"
        f"Made up: acme/app@{sha}:app/nope.py#L1-2 and acme/app@{sha}:app/session.py#L1-9999; "
        f"never shown: acme/app@{sha}:README.md#L1-1.\n\n## Sources\n- acme/app@{sha}:app/http_client.py#L1-3\n"
    )
    script = [
        Turn(
            calls=[
                Call("keyword_search", {"query": "repo:^acme/app$ purgeExpiredSessions"}),
                Call("read_file", {"repo": "acme/app", "path": "app/session.py", "start_line": 1, "end_line": 5}),
            ],
            input_tokens=1000,
            output_tokens=40,
        ),
        Turn(text=final, input_tokens=1500, output_tokens=120),
    ]
    with FAKES[provider](script, api_key=KEY) as fake:
        configure(world, fake)
        got = answering.answer(
            world.runtime, world.alice, "How are expired sessions purged?", purpose="deepsearch", scope=None
        )

    assert got.author == "model"
    assert got.notice == ""
    assert got.sources == [
        Citation("acme/app", sha, "app/session.py", 1, 5),
        Citation("acme/app", sha, "app/session.py", 4, 5),
    ]
    assert f"acme/app@{sha}:app/session.py#L4-5" in got.text  # the short SHA was pinned to the full one
    assert got.text.count("(unverified reference removed)") == 3
    assert "nope.py" not in got.text
    assert "Sources" not in got.text
    stats = got.stats
    assert (stats.steps, stats.tool_calls, stats.input_tokens, stats.output_tokens) == (2, 2, 2500, 160)
    assert stats.model == "scripted"
    assert stats.seconds > 0

    first, second = fake.requests
    assert {
        "keyword_search",
        "nls_search",
        "read_file",
        "list_files",
        "go_to_definition",
        "find_references",
        "commit_search",
        "diff_search",
    } == set(offered_tools(first))
    searched, read = tool_results(second)
    assert searched.startswith(f"# acme/app@{sha} \u2013 app/session.py\n1: def purgeExpiredSessions")
    assert read.splitlines()[0] == f"# acme/app@{sha} \u2013 app/session.py"
    assert read.splitlines()[5] == "5:             del store[key]"
    for text in (caplog.text, got.text, got.notice, str(fake.requests[0].body)):
        assert KEY not in text


def test_tools_run_in_parallel_threads(world: World) -> None:
    calls = [
        Call("read_file", {"repo": "acme/app", "path": p})
        for p in ("app/session.py", "app/http_client.py", "README.md")
    ]
    script = [Turn(calls=calls), Turn(text="Read three files.")]
    seen_threads: set[str] = set()
    together = threading.Barrier(3, timeout=5)  # passes only when the three calls run at the same time
    box = Toolbox(world.runtime, world.alice)
    original = box.run

    def spy(name: str, arguments: str) -> Any:
        seen_threads.add(threading.current_thread().name)
        together.wait()
        return original(name, arguments)

    box.run = spy  # type: ignore[method-assign,unused-ignore]
    with FakeOpenAI(script) as fake:
        model = build_model(
            ModelEndpoint.model_validate({"provider": "openai-compatible", "baseURL": fake.base_url, "model": "m"}), {}
        )
        got = run_loop(world.runtime, world.alice, model, "Read them", toolbox=box)
    assert got.stats.tool_calls == 3
    assert len(seen_threads) == 3
    assert all(name.startswith("agent-tool") for name in seen_threads)
    assert [r.splitlines()[0].split(" \u2013 ")[1] for r in tool_results(fake.requests[1])] == [
        "app/session.py",
        "app/http_client.py",
        "README.md",
    ]


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_unknown_tools_and_bad_arguments_are_answered_as_tool_errors(world: World, provider: str) -> None:
    bad = [
        Call("rm_rf", {"path": "/"}),
        Call("read_file", {"repo": "acme/app"}),
        Call("read_file", {"repo": 3, "path": "x"}),
    ]
    if provider == "openai-compatible":
        bad.append(Call("read_file", raw='{"repo": "acme/app", "path": '))
    script = [Turn(calls=bad), Turn(text="I could not read anything useful.")]
    with FAKES[provider](script, api_key=KEY) as fake:
        configure(world, fake)
        got = answering.answer(world.runtime, world.alice, "Read it", purpose="deepsearch", scope=None)
    assert got.author == "model"
    assert got.text == "I could not read anything useful."
    results = tool_results(fake.requests[1])
    assert results[0].startswith("error: unknown tool 'rm_rf'; the tools are: commit_search, diff_search")
    assert results[1] == "error: bad arguments for read_file: arguments: 'path' is a required property"
    assert results[2] == "error: bad arguments for read_file: repo: 3 is not of type 'string'"
    if provider == "openai-compatible":
        assert results[3].startswith("error: the arguments of read_file are not valid JSON")
        # The malformed call is sent back to the model as it wrote it, next to its error.
        replay = fake.requests[1].body["messages"][2]["tool_calls"][3]["function"]["arguments"]
        assert replay == '{"repo": "acme/app", "path": '
    if provider == "anthropic":
        assert all(b.get("is_error") for b in fake.requests[1].body["messages"][-1]["content"])


def test_repairs_are_bounded_then_retrieval_answers(world: World) -> None:
    script = [Turn(calls=[Call("no_such_tool")]) for _ in range(6)]
    with FakeOpenAI(script) as fake:
        configure(world, fake, apiKeyEnv=None)
        got = answering.answer(world.runtime, world.alice, "purgeExpiredSessions", purpose="deepsearch", scope=None)
    assert len(fake.requests) == 5  # four repairs allowed, the fifth bad call gives up
    assert got.author == "retrieval"
    assert got.notice.startswith(
        "The model could not answer (the model kept calling tools wrongly (5 unknown tools or bad arguments)), "
        "so the retrieval pipeline did."
    )


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_step_budget_forces_a_final_answer_without_tools(world: World, provider: str) -> None:
    search = Call("keyword_search", {"query": "purgeExpiredSessions"})
    sha = world.app_sha
    script = [Turn(calls=[search]), Turn(calls=[search]), Turn(text=f"Here: acme/app@{sha}:app/session.py#L1-5")]
    with FAKES[provider](script) as fake:
        configure(world, fake, maxSteps=3)
        got = answering.answer(world.runtime, world.alice, "Where?", purpose="code_finder", scope=None)
    assert got.author == "model"
    assert got.stats.steps == 3
    assert got.sources == [Citation("acme/app", sha, "app/session.py", 1, 5)]
    assert [bool(offered_tools(r)) for r in fake.requests] == [True, True, False]
    last = fake.requests[2].body["messages"][-1]
    assert last["role"] == "user"
    nudge = "Your budget is spent: write your final answer now from what the tools showed."
    if provider == "anthropic":  # one user turn: the tool result, then the nudge
        assert [b["type"] for b in last["content"]] == ["tool_result", "text"]
        assert last["content"][1]["text"] == nudge
    else:
        assert last["content"] == nudge


def test_step_budget_spent_without_answer_fails(world: World) -> None:
    search = Call("keyword_search", {"query": "purgeExpiredSessions"})
    with FakeOpenAI([Turn(calls=[search]), Turn(calls=[search])]) as fake:
        model = build_model(
            ModelEndpoint.model_validate({"provider": "openai-compatible", "baseURL": fake.base_url, "model": "m"}), {}
        )
        with pytest.raises(LoopFailed) as caught:
            run_loop(world.runtime, world.alice, model, "Where?", budget=Budget(max_steps=2))
    assert caught.value.reason == "budget"
    assert caught.value.message == "the model used its budget (2 steps) without answering"


def test_unreadable_repository_reads_as_missing_and_is_never_cited(world: World) -> None:
    hidden = Call("read_file", {"repo": "acme/secret", "path": "hidden/vault.py"})
    missing = Call("read_file", {"repo": "acme/nothing", "path": "hidden/vault.py"})
    search = Call("keyword_search", {"query": "purge_secret_sessions"})
    pinned = f"acme/secret@{world.secret_sha}:hidden/vault.py#L1-2"
    script = [Turn(calls=[hidden, missing, search]), Turn(text=f"It is in {pinned}.")]
    with FakeOpenAI(script) as fake:
        configure(world, fake, apiKeyEnv=None)
        got = answering.answer(
            world.runtime, world.alice, "Where are secret sessions purged?", purpose="deepsearch", scope=None
        )
    denied, absent, searched = tool_results(fake.requests[1])
    assert denied.replace("secret", "X") == absent.replace("nothing", "X")
    assert denied.startswith("error:")
    assert searched == "No results."
    assert got.sources == []
    assert "acme/secret@" not in got.text
    assert got.text == "It is in (unverified reference removed)."


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_context_overflow_shortens_older_tool_outputs(world: World, provider: str) -> None:
    read = Call("read_file", {"repo": "acme/app", "path": "app/session.py"})
    sha = world.app_sha
    script: list[Step] = [
        Turn(calls=[read]),
        Turn(calls=[Call("read_file", {"repo": "acme/app", "path": "app/http_client.py"})]),
        Fail(400, code="context_length_exceeded", message="This model's maximum context length is 8192 tokens"),
        Turn(text=f"See acme/app@{sha}:app/http_client.py#L1-3 and acme/app@{sha}:app/session.py#L1-5."),
    ]
    with FAKES[provider](script) as fake:
        configure(world, fake)
        got = answering.answer(world.runtime, world.alice, "Where?", purpose="deepsearch", scope=None)
    before, after = fake.requests[2], fake.requests[3]
    full, latest = tool_results(before)
    shortened, kept = tool_results(after)
    assert len(full) > 2000
    assert shortened.endswith("[older output shortened to fit the context window]")
    assert len(shortened) < 400
    assert kept == latest  # the latest turn's output stays whole
    assert got.author == "model"
    assert [c.path for c in got.sources] == ["app/http_client.py", "app/session.py"]


def test_fallback_to_retrieval_when_the_endpoint_is_down(world: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeOpenAI([]) as fake:
        down = fake.base_url  # the server stops at the end of this block: connections are refused
    set_site_config(
        world.runtime,
        {
            "models": {
                "default": {
                    "provider": "openai-compatible",
                    "baseURL": down,
                    "model": "gone",
                    "apiKeyEnv": KEY_ENV,
                    "maxRetries": 1,
                }
            }
        },
    )
    got = answering.answer(
        world.runtime, world.alice, "How are expired sessions purged?", purpose="deepsearch", scope=None
    )
    assert got.author == "retrieval"
    assert got.notice.startswith(
        "The model could not answer (the model endpoint could not be reached after 1 retries), so the retrieval "
        "pipeline did."
    )
    assert any(c.path == "app/session.py" for c in got.sources)
    assert got.stats.model is None
    for text in (caplog.text, got.text, got.notice):
        assert KEY not in text
        assert down not in got.notice


def test_code_finder_uses_its_own_model(world: World) -> None:
    with (
        FakeOpenAI([Turn(text="cheap answer")]) as cheap,
        FakeAnthropic([Turn(text="default answer")], api_key=KEY) as main,
    ):
        set_site_config(
            world.runtime,
            {
                "models": {
                    "default": {
                        "provider": "anthropic",
                        "baseURL": main.base_url,
                        "model": "big",
                        "apiKeyEnv": KEY_ENV,
                    },
                    "codeFinder": {"provider": "openai-compatible", "baseURL": cheap.base_url, "model": "small"},
                }
            },
        )
        finder = answering.answer(world.runtime, world.alice, "Where?", purpose="code_finder", scope=None)
        deep = answering.answer(world.runtime, world.alice, "Where?", purpose="deepsearch", scope=None)
    assert (finder.text, finder.stats.model) == ("cheap answer", "small")
    assert (deep.text, deep.stats.model) == ("default answer", "big")


def test_without_a_model_retrieval_answers(world: World) -> None:
    got = answering.answer(world.runtime, world.alice, "purgeExpiredSessions", purpose="code_finder", scope=None)
    assert got.author == "retrieval"
    assert got.notice.startswith("No model wrote this answer")


def test_wall_time_budget_bounds_a_slow_model(world: World) -> None:
    with FakeOpenAI([Turn(text="too late", delay=3)]) as fake:
        configure(world, fake, apiKeyEnv=None, maxSeconds=1, maxRetries=0)
        started = time.monotonic()
        got = answering.answer(world.runtime, world.alice, "purgeExpiredSessions", purpose="deepsearch", scope=None)
        elapsed = time.monotonic() - started
    assert elapsed < 2.5
    assert got.author == "retrieval"
    assert got.notice.startswith("The model could not answer (the model did not answer in time)")


def test_scope_and_follow_up_history_reach_the_model(world: World) -> None:
    scope = world.runtime.get(RepoService).resolve(world.alice, "acme/app")
    history = [("Where are sessions stored?", "In a dict passed to purgeExpiredSessions.")]
    with FakeAnthropic([Turn(text="Follow-up answer.")], api_key=KEY) as fake:
        configure(world, fake)
        got = answering.answer(
            world.runtime, world.alice, "And when are they purged?", purpose="deepsearch", scope=scope, history=history
        )
    assert got.text == "Follow-up answer."
    body = fake.requests[0].body
    assert f"about repository acme/app at commit {world.app_sha} (main)" in body["system"]
    assert body["messages"] == [
        {"role": "user", "content": "Where are sessions stored?"},
        {"role": "assistant", "content": [{"type": "text", "text": "In a dict passed to purgeExpiredSessions."}]},
        {"role": "user", "content": "And when are they purged?"},
    ]


def _sockets() -> int:
    """Open socket descriptors of this process."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return found


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_the_runtime_closes_the_model_clients_it_built(world: World, provider: str) -> None:
    # The clients keep their connections to the provider for the next answer; closing the runtime closes them
    # (a module-level cache kept one socket per endpoint ever configured, for the life of the process).
    with FAKES[provider]([Turn(text="one"), Turn(text="two")], api_key=KEY) as fake:
        configure(world, fake)
        clients = world.runtime.get(answering.ModelClients)
        before = _sockets()
        for question in ("first?", "second?"):
            got = answering.answer(world.runtime, world.alice, question, purpose="deepsearch", scope=None)
            assert got.text.startswith(("one", "two")), got.text
        assert len(fake.requests) == 2
        endpoint = world.runtime.config.models.default
        assert endpoint is not None
        model = clients.get(endpoint)
        assert clients.get(endpoint) is model  # built once
        kept = _sockets()
        assert kept > before  # the kept-alive connection (both its ends: the fake provider runs in this process)
        world.runtime.close()
        assert model._client.is_closed()  # type: ignore[attr-defined]
        deadline = time.monotonic() + 5
        while _sockets() > before and time.monotonic() < deadline:
            time.sleep(0.05)  # the fake provider's end closes once it reads the client's close
        assert _sockets() == before, (before, kept, _sockets())
