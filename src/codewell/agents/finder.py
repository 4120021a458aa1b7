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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from codewell.agents import answering
from codewell.agents.answers import AgentAnswer
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
# A token that looks like a repository name someone typed: `org/name`, `host/org/name`.
_REPO_LIKE = re.compile(r"(?<![\w./-])([A-Za-z0-9][\w.-]*(?:/[\w.-]+)+)(?![\w/-])")
# Words right before a repository's short name that say "this is the repository".
_LEAD = re.compile(r"(?:\bin|\bof|\bfrom|\brepo|\brepository|\bproject|\bcodebase)\s+(?:the\s+)?$", re.IGNORECASE)
# The only characters re.IGNORECASE matches with an ASCII letter that str.lower() maps elsewhere. Folding
# them first makes "the lowered name is in the folded task" a necessary condition of `_mentions` (names are
# ASCII: sources.check_name), checked before compiling one regex per readable repository (~30 µs each).
_ASCII_FOLDS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_R = TypeVar("_R", bound=_Named)


def _mentions(task: str, name: str) -> list[int]:
    """Where `name` occurs in `task` as a whole name (case-insensitive; not inside a longer name or path)."""
    pattern = re.compile(r"(?<![\w./-])" + re.escape(name) + r"(?![\w/-]|\.\w)", re.IGNORECASE)
    return [m.start() for m in pattern.finditer(task)]


def named_repositories(task: str, readable: Sequence[_R]) -> list[_R]:
    """The readable repositories `task` names: full names first; else short names (the last segment of the
    name) that only one readable repository has; among several short names, the ones introduced as the
    repository ("in X", "repo X")."""
    folded = task.translate(_ASCII_FOLDS).lower()
    full = [r for r in readable if r.name.lower() in folded and _mentions(task, r.name)]
    # A full name inside another full name (`acme/app` in `github.com/acme/app`): keep the longest.
    full = [r for r in full if not any(o is not r and r.name in o.name and _mentions(task, o.name) for o in full)]
    if full:
        return full
    by_short: dict[str, list[_R]] = {}
    for r in readable:
        by_short.setdefault(r.name.rsplit("/", 1)[-1].lower(), []).append(r)
    short: list[tuple[_R, list[int]]] = []
    for key, repos in by_short.items():
        if len(repos) != 1 or "/" not in repos[0].name or key not in folded:
            continue
        at = _mentions(task, key)
        if at:
            short.append((repos[0], at))
    if len(short) > 1:
        introduced = [r for r, at in short if any(_LEAD.search(task[:i]) for i in at)]
        if introduced:
            return introduced
    return [r for r, _ in short]


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
        typed = [m.group(1) for m in _REPO_LIKE.finditer(task) if not re.search(r"\.\w{1,5}$", m.group(1))]
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
