"""code_finder: where something is done in one repository, as a short summary and links to line ranges.

The task must name the repository (its full name, or the last segment of its name when exactly one readable
repository ends that way); broad cross-repository discovery is declined with a pointer to keyword_search and
deepsearch. With a `revision`, the task must identify exactly one repository. A repository the actor may not
read is never matched, so a task naming one reads exactly like a task naming a missing one.

Metering, charged AFTER the answer: the plan's feature gate is asked first (cheap, refuses before any work),
then the answer is produced, then one credit is consumed from the active credit bucket (analytics'
CreditService, all or nothing) and only then is the answer returned. So a call that fails (bad input,
unknown repository, a search fault, a deadline) never costs anything, and a call that cannot be paid for
returns the quota error instead of its answer: nothing is ever half-charged and no credit is ever taken
for an answer that was not delivered. Charging before would need a refund for every later failure, which
the credit buckets do not have. The price: concurrent calls racing for the last credits may each do the
work before all but the paying ones are refused (32 concurrent calls on 10 credits: 10 answers, 22 quota
errors, 10 credits consumed).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from codewell.agents import answering
from codewell.agents.answers import AgentAnswer
from codewell.agents.naming import REPO_LIKE, named_repositories
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound, QuotaExceeded
from codewell.http.urls import blob_url
from codewell.licensing.service import LicensingService
from codewell.repos.service import RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = ["CREDITS_PER_CALL", "FEATURE", "find_code", "named_repositories", "render_finder"]

FEATURE = "code_finder"
CREDITS_PER_CALL = 1
MAX_TASK_CHARS = 4000
_BROAD = (
    "code_finder looks in one repository, and the task must name it (e.g. 'where is retrying done in acme/billing')"
)
_BROAD_HINT = (
    "name the repository in the task (list_repos shows the ones you can read); for discovery across "
    "repositories use keyword_search (e.g. `retry OR backoff`) or deepsearch"
)


def find_code(runtime: Runtime, actor: Actor, task: str, revision: str | None) -> AgentAnswer:
    """Answer `task` within the one repository it names (at `revision`, default branch when None), metered."""
    started = time.monotonic()
    task = (task or "").strip()
    if not task:
        raise InvalidInput("task is empty", hint=_BROAD_HINT)
    if len(task) > MAX_TASK_CHARS:
        raise InvalidInput(f"task is too long ({len(task)} characters, at most {MAX_TASK_CHARS})")
    revision = (revision or "").strip() or None
    repos = runtime.get(RepoService)
    named = named_repositories(task, repos.readable_refs(actor))  # names only: no full records
    if not named:
        typed = [m.group(1) for m in REPO_LIKE.finditer(task) if not re.search(r"\.\w{1,5}$", m.group(1))]
        if typed:
            # Missing or not readable: the same words either way.
            raise NotFound(
                f"repository {typed[0]!r} not found",
                hint="list_repos shows the repositories you can read; " + _BROAD_HINT.split("; ", 1)[1],
            )
        if revision is not None:
            raise InvalidInput(
                f"a revision ({revision}) was given but the task names no repository",
                hint="with a revision, name exactly one repository in the task",
            )
        raise InvalidInput(_BROAD, hint=_BROAD_HINT)
    if len(named) > 1:
        names = ", ".join(sorted(r.name for r in named)[:5])
        if revision is not None:
            raise InvalidInput(
                f"with a revision the task must identify exactly one repository; it names {len(named)}: {names}",
                hint="name only the repository the revision belongs to",
            )
        raise InvalidInput(
            f"code_finder looks in one repository; the task names {len(named)}: {names}", hint=_BROAD_HINT
        )
    licensing = runtime.get(LicensingService)
    licensing.require_feature(FEATURE)  # refuse before any work when the plan lacks the feature
    scope = repos.resolve(actor, named[0].name, revision)
    # Without a model, retrieval answers within its own budget; with one, the model's configured budget
    # (steps, seconds, tokens) bounds the loop, and retrieval answers if the model fails.
    answer = answering.answer(runtime, actor, task, purpose="code_finder", scope=scope)
    try:
        licensing.consume(actor, FEATURE, CREDITS_PER_CALL)
    except QuotaExceeded as exc:
        raise QuotaExceeded(
            "code_finder credits are used up for this period, so the answer is withheld (nothing was charged)",
            hint="ask a site admin to allocate more credits (codewell credits allocate), or use keyword_search "
            "and nls_search, which are not metered",
        ) from exc
    answer.stats.credits += CREDITS_PER_CALL
    answer.stats.seconds = time.monotonic() - started
    return answer


def render_finder(answer: AgentAnswer, external_url: str) -> str:
    """The short summary, the notice (who wrote it), then one link per cited range (pinned to its commit)."""
    parts = [answer.text.strip()]
    if answer.notice:
        parts.append(f"({answer.notice})")
    if answer.sources:
        links = [
            f"- {blob_url(external_url, c.repo, c.commit, c.path, (c.start_line, c.end_line))}"
            + (f" ({c.note})" if c.note else "")
            for c in answer.sources
        ]
        parts.append("Links:\n" + "\n".join(links))
    return "\n\n".join(parts) + "\n"
