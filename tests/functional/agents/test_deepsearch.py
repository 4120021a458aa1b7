"""Deep search conversations end to end over the real database, real git repositories and the real answering
path (no model configured: the retrieval pipeline answers): lifecycle, reading forms, not-found sameness,
sharing, redaction, serialized follow-ups, restarts, cancel and metering."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update
from starlette.testclient import TestClient

from codewell.agents.answers import AgentAnswer
from codewell.agents.conversations import ConversationStore
from codewell.agents.jobs import DeepSearchJobs, answer_with_agents
from codewell.agents.models import JobRow, QuestionRow
from codewell.agents.render import WITHHELD_NOTICE, conversation_json, render_conversation
from codewell.agents.service import AgentService
from codewell.analytics.credits import CreditService
from codewell.core.actors import ANONYMOUS, INTERNAL, Actor
from codewell.core.errors import Conflict, InvalidInput, NotFound, PermissionDenied, Unauthenticated
from codewell.db.base import utcnow
from codewell.jobs.runner import JobRunner
from codewell.licensing.plans import TRIAL_DAYS
from codewell.licensing.service import FeatureNotLicensed
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.factories import actor_of_user, auth_headers, make_token, make_user, set_site_config
from tests.fakes.llm import Call, FakeOpenAI, Turn
from tests.gitfixtures import make_repo, register_local_repo
from tests.unit.licensing.testkeys import Clock, licensing

pytestmark = pytest.mark.database

APP = {
    "billing/retry.py": (
        "def retry_failed_charge(charge, attempts):\n"
        "    # charges that failed are retried with exponential backoff\n"
        "    delay = 2 ** attempts\n"
        "    return schedule_charge(charge, delay)\n"
    ),
    "billing/schedule.py": "def schedule_charge(charge, delay):\n    return (charge, delay)\n",
    "README.md": "Billing service.\n",
}
SECRET = {"vault/rotate.py": "def rotate_vault_keys(vault):\n    # rotate the vault master keys\n    return vault\n"}
QUESTION = "How does retry_failed_charge retry failed charges?"
SECRET_QUESTION = "Where does rotate_vault_keys rotate the vault master keys?"


class World:
    def __init__(self, runtime: Runtime, tmp_path: Path) -> None:
        self.runtime = runtime
        register_local_repo(runtime, make_repo(tmp_path / "app", APP), "acme/app")
        register_local_repo(runtime, make_repo(tmp_path / "secret", SECRET), "acme/secret", private=True)
        for name in ("acme/app", "acme/secret"):
            runtime.get(SearchService).index(runtime.get(RepoService).get(INTERNAL, name))
        self.alice_user = make_user(runtime, "alice")
        self.bob_user = make_user(runtime, "bob")
        runtime.get(RepoService).set_user_repos(INTERNAL, self.alice_user.id, ["acme/secret"])
        self.alice = actor_of_user(runtime, self.alice_user)
        self.bob = actor_of_user(runtime, self.bob_user)
        self.seen: list[tuple[str, str, tuple[tuple[str, str], ...]]] = []  # (question, status inside, history)
        self.hook: threading.Event | None = None
        # The real answering path, observed: the status while answering and the history it was given.
        self.jobs = DeepSearchJobs(runtime, self._answer)
        runtime.provide(DeepSearchJobs, self.jobs)
        self.service = runtime.get(AgentService)
        self.store = ConversationStore(runtime.db)

    def _answer(
        self, runtime: Runtime, actor: Actor, question: str, history: Sequence[tuple[str, str]], deadline: float
    ) -> AgentAnswer:
        with runtime.db.session() as session:
            status = session.scalar(select(QuestionRow.status).where(QuestionRow.question == question))
        self.seen.append((question, str(status), tuple(history)))
        if self.hook is not None:
            self.hook.set()
        return answer_with_agents(runtime, actor, question, history, deadline)


@pytest.fixture
def world(runtime: Runtime, tmp_path: Path) -> World:
    return World(runtime, tmp_path)


def test_lifecycle_pending_processing_completed(world: World) -> None:
    view = world.service.deepsearch(world.alice, QUESTION)
    conversation = view.conversation
    assert conversation.status == "pending"
    assert conversation.title == QUESTION
    uuid.UUID(conversation.read_token)
    pending = render_conversation(world.service.read(world.alice, view.url))
    assert "status: pending" in pending
    assert f"# {QUESTION}\n\n_Status: pending" in pending

    assert world.jobs.run_one() is True
    assert world.seen == [(QUESTION, "processing", ())]  # the job moved it to processing before answering
    assert world.jobs.run_one() is False

    done = world.service.read(world.alice, conversation.read_token)
    text = render_conversation(done)
    assert text.startswith(f'---\ntitle: "{QUESTION}"\nshare_url: ""\ncreated: ')
    assert "\nupdated: " in text
    assert "\nstatus: completed\n---\n\n" in text
    assert f"\n# {QUESTION}\n\n" in text
    sources = text.split("## Sources\n\n", 1)[1]
    commit = done.conversation.questions[0].sources[0].commit
    assert "- [acme/app – billing/retry.py:1-" in sources
    assert f"{world.runtime.external_url}/acme/app@{commit}/-/blob/billing/retry.py%3FL1-" in sources
    assert "No model wrote this answer" in text  # the retrieval pipeline says so
    question = done.conversation.questions[0]
    assert question.status == "completed"
    assert question.author == "retrieval"
    assert question.tool_calls >= 0
    assert question.elapsed_ms >= 0
    body = conversation_json(done)
    assert body["questions"][0]["stats"]["author"] == "retrieval"
    assert body["questions"][0]["sources"][0]["repository"] == "acme/app"


def test_read_forms_and_not_found_sameness(world: World) -> None:
    view = world.service.deepsearch(world.alice, QUESTION)
    token = view.conversation.read_token
    for identifier in (view.url, token, f"/deepsearch/{token}", token.upper(), f"{view.url}/"):
        assert world.service.read(world.alice, identifier).conversation.id == view.conversation.id

    def refusal(actor: Actor, identifier: str) -> tuple[str, str | None]:
        with pytest.raises(NotFound) as caught:
            world.service.read(actor, identifier)
        return caught.value.message, caught.value.hint

    missing = refusal(world.alice, str(uuid.uuid4()))
    assert refusal(world.bob, view.url) == missing  # someone else's reads exactly like a missing one
    assert refusal(world.bob, token) == missing
    # The shared form of a conversation that is not shared (and sharing off) is just as missing.
    assert refusal(world.alice, f"{world.runtime.external_url}/deepsearch/shared/{token}") == missing
    with pytest.raises(NotFound):
        world.service.cancel(world.bob, token)
    with pytest.raises(NotFound):
        world.service.follow_up(world.bob, token, "and then?")
    with pytest.raises(InvalidInput):
        world.service.read(world.alice, "https://example.com/not/a/conversation")
    with pytest.raises(Unauthenticated):
        world.service.read(ANONYMOUS, token)
    # Site admins may read every conversation (they read every repository).
    root = actor_of_user(world.runtime, make_user(world.runtime, "root", site_admin=True))
    assert world.service.read(root, token).conversation.id == view.conversation.id


def test_share_and_reset_share(world: World) -> None:
    view = world.service.deepsearch(world.alice, QUESTION)
    world.jobs.run_pending()
    with pytest.raises(PermissionDenied, match="sharing"):
        world.service.share(world.alice, view.url)  # off by default
    set_site_config(world.runtime, {"deepSearch": {"sharing": {"enabled": True}}})
    shared = world.service.share(world.alice, view.url).share_url
    assert shared is not None
    assert shared.startswith(f"{world.runtime.external_url}/deepsearch/shared/")
    assert world.service.share(world.alice, view.url).share_url == shared  # sharing again keeps the link
    assert f'share_url: "{shared}"' in render_conversation(world.service.read(world.alice, view.url))
    as_bob = world.service.read(world.bob, shared)
    assert as_bob.conversation.id == view.conversation.id
    assert as_bob.share_url is None
    assert not as_bob.is_owner
    assert "stats" not in conversation_json(as_bob)["questions"][0]
    with pytest.raises(PermissionDenied):
        world.service.reset_share(world.bob, shared)  # readers of a shared link cannot manage it
    with pytest.raises(PermissionDenied):
        world.service.delete(world.bob, shared)

    fresh = world.service.reset_share(world.alice, view.url).share_url
    assert fresh is not None
    assert fresh != shared
    with pytest.raises(NotFound):
        world.service.read(world.bob, shared)  # the old link stopped working
    assert world.service.read(world.bob, fresh).conversation.id == view.conversation.id
    # The bare share token works as an identifier too.
    assert world.service.read(world.bob, fresh.rsplit("/", 1)[1]).conversation.id == view.conversation.id
    set_site_config(world.runtime, {"deepSearch": {"sharing": {"enabled": False}}})
    with pytest.raises(NotFound):
        world.service.read(world.bob, fresh)  # sharing turned off: shared links read as missing


def test_shared_answer_citing_a_repository_the_reader_cannot_read_is_withheld(world: World) -> None:
    set_site_config(world.runtime, {"deepSearch": {"sharing": {"enabled": True}}})
    view = world.service.deepsearch(world.alice, SECRET_QUESTION)
    world.jobs.run_pending()
    own = world.service.read(world.alice, view.url)
    assert own.withheld == frozenset()
    assert "acme/secret" in render_conversation(own)  # alice may read acme/secret
    shared = world.service.share(world.alice, view.url).share_url
    assert shared is not None

    as_bob = world.service.read(world.bob, shared)
    text = render_conversation(as_bob)
    body = conversation_json(as_bob)
    assert WITHHELD_NOTICE in text
    for leak in ("acme/secret", "vault/rotate.py", "def rotate_vault_keys"):
        assert leak not in text.split("---", 2)[2].split("\n", 3)[3]  # after the title and question lines
        assert leak not in str(body["questions"][0]["answer"]) + str(body["questions"][0]["sources"])
    assert body["questions"][0]["withheld"] is True
    assert body["questions"][0]["sources"] == []

    # The owner losing access later hides it from the owner too.
    world.runtime.get(RepoService).set_user_repos(INTERNAL, world.alice_user.id, [])
    assert world.service.read(world.alice, view.url).withheld == frozenset({1})


def test_follow_ups_are_serialized_and_get_the_history(world: World) -> None:
    view = world.service.deepsearch(world.alice, QUESTION)
    with pytest.raises(Conflict, match="still being answered"):
        world.service.follow_up(world.alice, view.url, "And where is schedule_charge?")
    world.jobs.run_pending()
    first_answer = world.service.read(world.alice, view.url).conversation.questions[0].answer

    # Eight concurrent follow-ups on one conversation: exactly one is accepted, the others are told to wait.
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def ask(n: int) -> None:
        barrier.wait()
        try:
            world.service.follow_up(world.alice, view.url, f"Follow-up {n}: where is schedule_charge defined?")
            outcomes.append("ok")
        except Conflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict"] * 7 + ["ok"]
    world.jobs.run_pending()
    conversation = world.service.read(world.alice, view.url).conversation
    assert [q.position for q in conversation.questions] == [1, 2]
    assert [q.status for q in conversation.questions] == ["completed", "completed"]
    assert world.seen[-1][2] == ((QUESTION, first_answer),)  # the follow-up was answered with the history
    assert "schedule_charge" in render_conversation(world.service.read(world.alice, view.url)).split("# Follow-up")[1]


def test_an_expired_lease_is_taken_over_after_a_restart(world: World) -> None:
    view = world.service.deepsearch(world.alice, QUESTION)
    crashed = world.store.claim_question("crashed-process", view.conversation.questions[0].id, lease_seconds=60)
    assert crashed is not None
    assert crashed.attempts == 1
    world.store.start(crashed.question_id)
    fresh = DeepSearchJobs(world.runtime, world._answer)
    assert fresh.run_one() is False  # the lease is still valid: nobody steals a live job
    with world.runtime.db.session() as session:  # the process died a minute ago: its lease ran out
        session.execute(update(JobRow).values(lease_expires_at=utcnow() - timedelta(seconds=1)))
    assert fresh.run_one() is True
    question = world.service.read(world.alice, view.url).conversation.questions[0]
    assert question.status == "completed"
    with world.runtime.db.session() as session:
        job = session.scalars(select(JobRow)).one()
        assert (job.state, job.attempts, job.lease_owner) == ("done", 2, None)


def test_a_job_interrupted_too_often_fails_with_its_reason(world: World) -> None:
    view = world.service.deepsearch(world.alice, QUESTION)
    attempts = world.runtime.config.deep_search.max_attempts
    for _ in range(attempts):
        question_id = view.conversation.questions[0].id
        assert world.store.claim_question("crashing-process", question_id, lease_seconds=60) is not None
        world.store.start(view.conversation.questions[0].id)
        with world.runtime.db.session() as session:
            session.execute(update(JobRow).values(lease_expires_at=utcnow() - timedelta(seconds=1)))
    assert DeepSearchJobs(world.runtime, world._answer).run_one() is True
    question = world.service.read(world.alice, view.url).conversation.questions[0]
    assert (question.status, question.error_code) == ("failed", "interrupted")
    assert f"interrupted {attempts} times" in question.error_message
    assert world.seen == []  # given up without running the agent again
    text = render_conversation(world.service.read(world.alice, view.url))
    assert "_Status: failed (interrupted): the answer was interrupted" in text
    # The conversation is free again: a follow-up is accepted.
    world.service.follow_up(world.alice, view.url, "Try again: how are failed charges retried?")


def test_cancel_pending_and_while_answering(world: World) -> None:
    view = world.service.deepsearch(world.alice, QUESTION)
    cancelled = world.service.cancel(world.alice, view.url)
    assert cancelled.conversation.status == "cancelled"
    assert world.jobs.run_one() is False  # its job ended
    assert world.seen == []

    second = world.service.deepsearch(world.alice, QUESTION + " (again)")
    world.hook = threading.Event()
    runner = threading.Thread(target=world.jobs.run_one)
    original = world._answer

    def slow(*args: object) -> AgentAnswer:
        answer = original(*args)  # type: ignore[arg-type]
        world.service.cancel(world.alice, second.url)  # the owner cancels while the agent works
        return answer

    world.jobs.answerer = slow
    runner.start()
    runner.join(timeout=60)
    question = world.service.read(world.alice, second.url).conversation.questions[0]
    assert (question.status, question.answer, question.credits) == ("cancelled", "", 0)


def test_deep_search_consumes_credits_and_fails_when_exhausted(world: World) -> None:
    today = utcnow().date()
    bucket = world.runtime.get(CreditService).allocate(INTERNAL, 1, today, today)
    first = world.service.deepsearch(world.alice, QUESTION)
    world.jobs.run_pending()
    question = world.service.read(world.alice, first.url).conversation.questions[0]
    assert (question.status, question.credits) == ("completed", 1)
    buckets = world.runtime.get(CreditService).list_buckets(INTERNAL)
    assert [(b.id, b.consumed, b.consumption_by_feature) for b in buckets] == [(bucket.id, 1, {"deepsearch": 1})]

    second = world.service.deepsearch(world.alice, "Where is schedule_charge defined?")
    world.jobs.run_pending()
    failed = world.service.read(world.alice, second.url).conversation.questions[0]
    assert (failed.status, failed.error_code) == ("failed", "quota_exceeded")
    assert "credits" in failed.error_message
    assert world.seen[-1][0] == QUESTION  # the agent did not even start for the unpaid question
    assert world.runtime.get(CreditService).list_buckets(INTERNAL)[0].consumed == 1


def test_list_is_own_and_delete_removes(world: World) -> None:
    a = world.service.deepsearch(world.alice, QUESTION)
    world.service.deepsearch(world.bob, "Where is schedule_charge defined?")
    assert [v.conversation.id for v in world.service.list(world.alice)] == [a.conversation.id]
    world.service.delete(world.alice, a.url)
    assert world.service.list(world.alice) == []
    with pytest.raises(NotFound):
        world.service.read(world.alice, a.url)
    assert world.jobs.run_pending() == 1  # only bob's job is left


def test_rest_routes(world: World, client: TestClient) -> None:
    alice = auth_headers(make_token(world.runtime, world.alice_user))
    bob = auth_headers(make_token(world.runtime, world.bob_user))
    created = client.post("/.api/deepsearch", json={"question": QUESTION}, headers=alice)
    assert created.status_code == 201, created.text
    body = created.json()
    token = body["readToken"]
    assert body["status"] == "pending"
    assert body["url"] == f"{world.runtime.external_url}/deepsearch/{token}"
    assert client.post("/.api/deepsearch", json={"question": "  "}, headers=alice).status_code == 400
    assert client.post("/.api/deepsearch", json={"question": QUESTION}).status_code == 401
    assert client.get(f"/.api/deepsearch/{token}", headers=bob).status_code == 404
    assert (
        client.get(f"/.api/deepsearch/{uuid.uuid4()}", headers=bob).json()
        == client.get(f"/.api/deepsearch/{token}", headers=bob).json()
    )  # same body as a missing one
    busy = client.post(f"/.api/deepsearch/{token}/questions", json={"question": "and?"}, headers=alice)
    assert busy.status_code == 409

    world.jobs.run_pending()
    read = client.get(f"/.api/deepsearch/{token}", headers=alice).json()
    assert read["status"] == "completed"
    assert read["text"].startswith("---\ntitle: ")
    assert read["questions"][0]["sources"][0]["repository"] == "acme/app"
    listed = client.get("/.api/deepsearch", headers=alice).json()["conversations"]
    assert [c["readToken"] for c in listed] == [token]
    assert client.get("/.api/deepsearch", headers=bob).json() == {"conversations": []}

    follow = client.post(
        f"/.api/deepsearch/{token}/questions", json={"question": "Where is schedule_charge?"}, headers=alice
    )
    assert follow.status_code == 201
    assert [q["status"] for q in follow.json()["questions"]] == ["completed", "pending"]
    cancelled = client.post(f"/.api/deepsearch/{token}/cancel", headers=alice).json()
    assert [q["status"] for q in cancelled["questions"]] == ["completed", "cancelled"]

    assert client.post(f"/.api/deepsearch/{token}/share", headers=alice).status_code == 403  # sharing is off
    set_site_config(world.runtime, {"deepSearch": {"sharing": {"enabled": True}}})
    shared = client.post(f"/.api/deepsearch/{token}/share", headers=alice).json()["shareURL"]
    share_token = shared.rsplit("/", 1)[1]
    assert client.get(f"/.api/deepsearch/{share_token}", headers=bob).json()["readToken"] is None
    renewed = client.post(f"/.api/deepsearch/{token}/reset-share", headers=alice).json()["shareURL"]
    assert renewed != shared
    assert client.get(f"/.api/deepsearch/{share_token}", headers=bob).status_code == 404
    assert client.delete(f"/.api/deepsearch/{token}", headers=bob).status_code == 404
    assert client.delete(f"/.api/deepsearch/{token}", headers=alice).status_code == 204
    assert client.get(f"/.api/deepsearch/{token}", headers=alice).status_code == 404


def test_a_scripted_model_answer_is_stored_within_five_seconds_of_its_last_reply(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEARCH_TEST_KEY", "sk-scripted")
    sha = world.runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit
    script = [
        Turn(calls=[Call("keyword_search", {"query": "repo:^acme/app$ retry_failed_charge"})], input_tokens=900),
        Turn(text=f"Failed charges are retried by `retry_failed_charge` (acme/app@{sha}:billing/retry.py#L1-4).",
             input_tokens=1200, output_tokens=60),
    ]  # fmt: skip
    with FakeOpenAI(script, api_key="sk-scripted") as fake:
        entry = {"provider": "openai-compatible", "baseURL": fake.base_url, "model": "scripted",
                 "apiKeyEnv": "DEEPSEARCH_TEST_KEY"}  # fmt: skip
        set_site_config(world.runtime, {"models": {"default": entry}})
        world.runtime.provide(DeepSearchJobs, DeepSearchJobs(world.runtime))  # the production answerer
        runner = JobRunner(world.runtime, role="test", kinds=frozenset({"agents.deepsearch"}), concurrency=1)
        runner.start()  # real job runner threads, as `codewell serve` or `codewell worker` run them
        try:
            view = world.service.deepsearch(world.alice, QUESTION)
            done = world.service.wait(world.alice, view, 30)
            stored_at = time.monotonic()
        finally:
            runner.stop()
        last_reply = fake.requests[-1].at
    question = done.conversation.questions[0]
    assert question.status == "completed", question.error_message
    assert stored_at - last_reply < 5.0
    assert (question.author, question.model, question.tool_calls) == ("model", "scripted", 1)
    assert (question.input_tokens, question.output_tokens) == (2100, 80)
    assert [(c.repo, c.path, c.start_line, c.end_line) for c in question.sources] == [
        ("acme/app", "billing/retry.py", 1, 4)
    ]
    text = render_conversation(done)
    assert "Answered by model scripted" in text
    assert "sk-scripted" not in text


def test_a_plan_without_deep_search_refuses_new_questions_and_fails_queued_ones(world: World) -> None:
    clock = Clock()
    licensing(world.runtime, clock)
    queued = world.service.deepsearch(world.alice, QUESTION)  # asked during the trial, answered after it
    clock.offset = timedelta(days=TRIAL_DAYS, minutes=1)  # the free plan lacks `deepsearch`
    with pytest.raises(FeatureNotLicensed) as refused:
        world.service.deepsearch(world.alice, "Where is schedule_charge defined?")
    assert refused.value.message.startswith("deep search needs the Team plan; this instance runs the Free plan")
    with pytest.raises(FeatureNotLicensed):
        world.service.follow_up(world.alice, queued.url, "And where is it scheduled?")
    world.jobs.run_pending()
    question = world.service.read(world.alice, queued.url).conversation.questions[0]
    assert (question.status, question.error_code, question.credits) == ("failed", "not_licensed", 0)
    assert world.seen == []  # the agent never ran for the unlicensed question
    # The conversation itself stays readable: the data is intact.
    assert world.service.read(world.alice, queued.url).conversation.title == QUESTION
