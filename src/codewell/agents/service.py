"""The agents' service API: code_finder and deep search conversations (docs/agents.md).

Every call takes the acting `Actor`. Permissions (codewell.authz): asking needs `agents:ask` (signed in);
a conversation's own address is readable by its owner and site admins (`deepsearch:read`), its shared
address by signed-in users while `deepSearch.sharing.enabled` (`deepsearch:read-shared`); cancel, delete and
sharing need `deepsearch:manage` (the owner, site admins; not OAuth or `mcp`-scoped tokens). A conversation
the caller may not read answers `NotFound` exactly like a missing one.

Redaction: every read is for one reader. An answer whose sources include a repository the reader cannot
read, or whose text names one, is withheld with a neutral notice (`render.WITHHELD_NOTICE`), also for the
owner when their access changed since. Questions are shown as their owner wrote them.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from typing import TYPE_CHECKING, Self
from urllib.parse import urlsplit

from sqlalchemy.orm import Session

from codewell.agents import finder
from codewell.agents.answers import AgentAnswer
from codewell.agents.conversations import Conversation, ConversationStore, check_question
from codewell.agents.jobs import FEATURE, DeepSearchJobs, question_resource
from codewell.agents.render import ConversationView
from codewell.authz import Action, UserRef, allowed, ensure
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput, NotFound, PermissionDenied
from codewell.jobs.service import JobService
from codewell.licensing.service import LicensingService
from codewell.repos.service import RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_TOKEN = re.compile(rf"^{_UUID}$")
_PATH = re.compile(rf"^(?:.*/)?deepsearch/(shared/)?({_UUID})/?$")
NOT_FOUND_HINT = "check the link or read token (deepsearch_read takes either); deepsearch starts a new conversation"


def not_found() -> NotFound:
    return NotFound("deep search conversation not found", hint=NOT_FOUND_HINT)


def parse_identifier(identifier: str) -> tuple[str, str]:
    """("own" | "shared" | "any", token) from a full URL (normal or shared form), a path, or a bare token."""
    text = identifier.strip() if isinstance(identifier, str) else ""
    if _TOKEN.match(text):
        return "any", text.lower()
    path = urlsplit(text).path if "://" in text else text.split("?", 1)[0].split("#", 1)[0]
    match = _PATH.match(path)
    if match is None:
        raise InvalidInput(
            "not a deep search identifier",
            hint="pass the conversation's URL (<externalURL>/deepsearch/<token>, or its /deepsearch/shared/ form) "
            "or its read token",
        )
    return ("shared" if match.group(1) else "own"), match.group(2).lower()


# (names of the repositories a reader may read, names of every other repository): one lookup per page.
Visibility = tuple[frozenset[str], tuple[str, ...]]


class AgentService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        # Queueing a question enqueues the job that answers it, in the same transaction (agents/jobs.py).
        self.store = ConversationStore(runtime.db, on_queued=self._queue_answer)
        self._waiting = 0
        self._waiting_lock = threading.Lock()

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    @property
    def jobs(self) -> DeepSearchJobs:
        return self.runtime.get(DeepSearchJobs)

    def _queue_answer(self, session: Session, question_id: int) -> None:
        # Looked up at each call: tests install their own DeepSearchJobs (answerer) in the runtime.
        self.jobs.enqueue(session, question_id)

    # -- code_finder ----------------------------------------------------------------------------------------
    def code_finder(self, actor: Actor, task: str, revision: str | None = None) -> AgentAnswer:
        """Find where something is done in one repository (synchronous, metered: agents/finder.py)."""
        ensure(actor, Action.AGENTS_ASK)
        return finder.find_code(self.runtime, actor, task, revision)

    # -- asking ---------------------------------------------------------------------------------------------
    def deepsearch(self, actor: Actor, question: str) -> ConversationView:
        """Start a conversation with its first question; it is answered in the background."""
        ensure(actor, Action.AGENTS_ASK)
        text = check_question(question)
        owner = self._user_id(actor)
        self.runtime.get(LicensingService).require_feature(FEATURE)
        conversation = self.store.create(owner, text)
        return self._view(actor, conversation)

    def follow_up(self, actor: Actor, identifier: str, question: str) -> ConversationView:
        """Ask a follow-up in the caller's own conversation; Conflict while the previous one is open."""
        ensure(actor, Action.AGENTS_ASK)
        text = check_question(question)
        conversation = self._find(actor, identifier)
        if conversation.owner_id != actor.user_id:
            raise PermissionDenied(
                "only the owner can ask follow-ups in a conversation", hint="start your own deep search"
            )
        self.runtime.get(LicensingService).require_feature(FEATURE)
        updated = self.store.add_question(conversation.id, text, self.runtime.config.deep_search.max_questions)
        return self._view(actor, updated)

    # -- reading --------------------------------------------------------------------------------------------
    def read(self, actor: Actor, identifier: str) -> ConversationView:
        """A conversation by URL (normal or shared form) or token, as this reader may see it."""
        return self._view(actor, self._find(actor, identifier))

    def list(self, actor: Actor, limit: int = 50) -> list[ConversationView]:
        """The caller's own conversations, most recently updated first."""
        owner = self._user_id(actor)
        ensure(actor, Action.DEEPSEARCH_READ, UserRef(owner))
        if not 1 <= limit <= 500:
            raise InvalidInput("limit must be between 1 and 500")
        conversations = self.store.list_for(owner, limit)
        visibility = (
            self._visibility(actor) if any(q.answer or q.sources for c in conversations for q in c.questions) else None
        )
        return [self._view(actor, c, visibility) for c in conversations]

    def wait(self, actor: Actor, view: ConversationView, timeout: float) -> ConversationView:
        """The conversation again once its latest question is no longer open, or when `timeout` passed."""
        deadline = time.monotonic() + max(0.0, timeout)
        conversation = view.conversation
        jobs = self.jobs
        while conversation.is_open:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            with jobs.finished:
                jobs.finished.wait(min(remaining, 0.5))
            found = self.store.get(conversation.id)
            if found is None:
                raise not_found()
            conversation = found
        return self._view(actor, conversation)

    def wait_slot(self) -> bool:
        """Take one of the `deepSearch.maxWaitingCalls` slots of waiting MCP calls; False when none is free."""
        with self._waiting_lock:
            if self._waiting >= self.runtime.config.deep_search.max_waiting_calls:
                return False
            self._waiting += 1
            return True

    def release_slot(self) -> None:
        with self._waiting_lock:
            self._waiting -= 1

    # -- the owner's changes --------------------------------------------------------------------------------
    def cancel(self, actor: Actor, identifier: str) -> ConversationView:
        conversation = self._find(actor, identifier)
        ensure(actor, Action.DEEPSEARCH_MANAGE, UserRef(conversation.owner_id))
        self.store.cancel(conversation.id)
        self._cancel_jobs(conversation)
        return self._view(actor, self._reload(conversation))

    def delete(self, actor: Actor, identifier: str) -> None:
        conversation = self._find(actor, identifier)
        ensure(actor, Action.DEEPSEARCH_MANAGE, UserRef(conversation.owner_id))
        self.store.delete(conversation.id)
        self._cancel_jobs(conversation)

    def _cancel_jobs(self, conversation: Conversation) -> None:
        """The queued jobs of the conversation's open questions end now; a running one stops before it stores."""
        for question in conversation.questions:
            if question.is_open:
                self.runtime.get(JobService).cancel_resource(question_resource(question.id))

    def share(self, actor: Actor, identifier: str) -> ConversationView:
        """Turn on the shared link (kept when it exists); only while `deepSearch.sharing.enabled`."""
        conversation = self._find(actor, identifier)
        ensure(actor, Action.DEEPSEARCH_MANAGE, UserRef(conversation.owner_id))
        self._require_sharing()
        if conversation.share_token is None:
            self.store.set_share_token(conversation.id, str(uuid.uuid4()))
        return self._view(actor, self._reload(conversation))

    def reset_share(self, actor: Actor, identifier: str) -> ConversationView:
        """A new shared link; the old one stops working at once."""
        conversation = self._find(actor, identifier)
        ensure(actor, Action.DEEPSEARCH_MANAGE, UserRef(conversation.owner_id))
        self._require_sharing()
        self.store.set_share_token(conversation.id, str(uuid.uuid4()))
        return self._view(actor, self._reload(conversation))

    # -- helpers --------------------------------------------------------------------------------------------
    def _sharing(self) -> bool:
        return self.runtime.config.deep_search.sharing.enabled

    def _require_sharing(self) -> None:
        if not self._sharing():
            raise PermissionDenied(
                "sharing deep search conversations is turned off on this instance",
                hint="a site admin can turn it on with the site config option deepSearch.sharing.enabled",
            )

    @staticmethod
    def _user_id(actor: Actor) -> int:
        if actor.user_id is None:
            raise InvalidInput("deep search conversations belong to a user", hint="act as a user (--user)")
        return actor.user_id

    def _reload(self, conversation: Conversation) -> Conversation:
        found = self.store.get(conversation.id)
        if found is None:
            raise not_found()
        return found

    def _find(self, actor: Actor, identifier: str) -> Conversation:
        """The conversation the identifier names, when the actor may read it that way; NotFound otherwise."""
        ensure(actor, Action.DEEPSEARCH_READ_SHARED)  # signed in (401 for anonymous callers)
        form, token = parse_identifier(identifier)
        if form in ("own", "any"):
            found = self.store.by_read_token(token)
            if found is not None and allowed(actor, Action.DEEPSEARCH_READ, UserRef(found.owner_id)):
                return found
            if form == "own" or found is not None:
                raise not_found()
        if self._sharing():
            found = self.store.by_share_token(token)
            if found is not None:
                return found
        raise not_found()

    def _view(self, actor: Actor, conversation: Conversation, visibility: Visibility | None = None) -> ConversationView:
        is_owner = allowed(actor, Action.DEEPSEARCH_READ, UserRef(conversation.owner_id))
        return ConversationView(
            conversation,
            self._withheld(actor, conversation, visibility),
            self.runtime.external_url,
            show_share=is_owner and self._sharing(),
            is_owner=is_owner,
        )

    def _visibility(self, actor: Actor) -> Visibility:
        """(names the reader may read, names of every other repository), looked up once per page."""
        repos = self.runtime.get(RepoService)
        # The cheap (id, name, ...) rows rather than full records with sync state: this runs per page view. One
        # listing of every repository split by the reader's ids, rather than a second listing for the reader.
        ids = repos.readable_ids(actor)
        everyone = repos.readable_refs(INTERNAL)
        return frozenset(r.name for r in everyone if r.id in ids), tuple(r.name for r in everyone if r.id not in ids)

    def _withheld(
        self, actor: Actor, conversation: Conversation, visibility: Visibility | None = None
    ) -> frozenset[int]:
        """Positions of answers the reader may not see: a cited or named repository they cannot read."""
        answered = [q for q in conversation.questions if q.answer or q.sources]
        if not answered:
            return frozenset()
        readable, hidden = visibility if visibility is not None else self._visibility(actor)
        withheld = set()
        for q in answered:
            if any(c.repo not in readable for c in q.sources) or any(
                _names(name, q.answer) or _names(name, q.notice) for name in hidden
            ):
                withheld.add(q.position)
        return frozenset(withheld)


def _names(name: str, text: str) -> bool:
    """Whether `text` mentions the repository `name` (alone or followed by a path; not as part of a longer
    name such as `name-old`). Errs on the side of withholding."""
    if name not in text:
        return False
    return re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w-])", text) is not None
