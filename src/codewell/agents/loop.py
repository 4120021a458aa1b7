"""The agent loop: a model answers a question by calling codewell's tools as the person who asked.

One loop for code_finder and deep search. Each step is one model turn; the tool calls of a turn run in
parallel (a thread pool). Budgets: steps, wall time and tokens (input + output over all turns); when one is
nearly spent the model gets one last turn without tools to write its answer. Unknown tool names and bad
arguments are answered to the model as tool errors (a bounded number of repairs, then the model is given up
on). When the prompt outgrows the model's context window, older tool outputs are shortened first.

The final answer is Markdown citing `repo@sha:path#Lstart-end`. Every citation is parsed and re-checked: the
file exists at that commit, the lines are in range, the caller may read it, and a tool showed that file at
that commit during this answer. Unverifiable citations are removed from the text and never become sources.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codewell.agents.answers import AgentAnswer, AgentStats, Citation
from codewell.agents.llm import ChatModel, ContextOverflow, Message, ModelReply, ToolCall, ToolSchema
from codewell.agents.toolbox import Location, Toolbox, ToolOutput
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError
from codewell.repos.service import RepoService, ResolvedRevision

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = ["Budget", "LoopFailed", "parse_citations", "run_loop", "verify_citations"]

log = logging.getLogger(__name__)

MAX_REPAIRS = 4  # unknown tools, bad arguments and empty replies, per answer
MAX_PARALLEL_TOOLS = 4
# Rough size of a token in characters, to keep the prompt within the context window.
CHARS_PER_TOKEN = 4
SHORTENED_CHARS = 300
MAX_SOURCES = 30

CITATION = re.compile(
    r"(?P<repo>[A-Za-z0-9][\w.\-/]*)@(?P<rev>[0-9a-fA-F]{7,40}):(?P<path>[^\s#`()\[\]<>]+)"
    r"#L(?P<start>\d+)(?:-L?(?P<end>\d+))?"
)
_SOURCES_HEADING = re.compile(r"^#{1,6}\s*sources\s*$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Budget:
    max_steps: int = 12
    max_seconds: float = 120.0
    max_tokens: int = 200_000
    context_tokens: int = 32_000
    max_output_tokens: int = 4096


class LoopFailed(CodewellError):
    """The model could not produce an answer (budget spent, replies beyond repair); the message says why."""

    code = "unavailable"
    http_status = 503

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class _State:
    messages: list[Message]
    stats: AgentStats
    schemas: list[ToolSchema]
    seen: list[Location] = field(default_factory=list)
    repairs: int = 0


SYSTEM_PROMPT = """You answer questions about source code hosted on this codewell instance, using its tools.
Search first (keyword_search for identifiers and exact strings{nls}), then read the relevant files
(read_file) before you answer. Call several tools in one turn when they are independent.
Every tool result names the exact commit: `# <repo>@<commit sha> – <path>` with numbered lines.

Answer in Markdown, concise and specific. Support every claim with a citation of the exact form
`<repo>@<full commit sha>:<path>#L<start>-<end>` (e.g. `github.com/acme/app@{example_sha}:src/app.py#L10-24`),
using only commits, files and lines that tools showed you. Do not add a Sources section; it is built from your
citations. If the tools do not show the answer, say so plainly instead of guessing.{scope}"""


def _system_prompt(toolbox: Toolbox, scope: ResolvedRevision | None) -> str:
    nls = ", nls_search for questions in words" if "nls_search" in toolbox.tools else ""
    where = ""
    if scope is not None:
        where = (
            f"\n\nThe question is about repository {scope.repo.name} at commit {scope.commit} "
            f"({scope.revision}): search with repo:^{re.escape(scope.repo.name)}$ rev:{scope.commit}, "
            f"and read files with revision {scope.commit}."
        )
    return SYSTEM_PROMPT.format(nls=nls, example_sha="0" * 40, scope=where)


def run_loop(
    runtime: Runtime,
    actor: Actor,
    model: ChatModel,
    question: str,
    *,
    scope: ResolvedRevision | None = None,
    history: Sequence[tuple[str, str]] = (),
    budget: Budget = Budget(),
    deadline: float | None = None,
    toolbox: Toolbox | None = None,
) -> AgentAnswer:
    """Answer `question` with `model` and the caller's tools; raise ModelUnavailable or LoopFailed when it can't.

    `deadline` is a `time.monotonic()` value; the loop also stops at `budget.max_seconds`.
    """
    started = time.monotonic()
    end = started + budget.max_seconds
    if deadline is not None:
        end = min(end, deadline)
    box = toolbox or Toolbox(runtime, actor)
    messages = [Message("system", _system_prompt(box, scope))]
    for earlier_question, earlier_answer in history:
        messages.append(Message("user", earlier_question))
        messages.append(Message("assistant", earlier_answer))
    messages.append(Message("user", question))
    state = _State(messages, AgentStats(model=model.name), box.schemas)
    with ThreadPoolExecutor(MAX_PARALLEL_TOOLS, thread_name_prefix="agent-tool") as pool:
        text = _steps(box, model, state, budget, (started, end), pool)
    state.stats.seconds = round(time.monotonic() - started, 3)
    verified, cleaned = verify_citations(runtime, actor, text, state.seen)
    return AgentAnswer(cleaned, verified, state.stats, author="model")


def _steps(
    box: Toolbox, model: ChatModel, state: _State, budget: Budget, window: tuple[float, float], pool: ThreadPoolExecutor
) -> str:
    started, end = window
    stats = state.stats
    while True:
        spent_tokens = stats.input_tokens + stats.output_tokens
        # The last turn: no tools, "answer now", when the next turn is the last the budgets allow.
        last = (
            stats.steps + 1 >= budget.max_steps
            or spent_tokens >= 0.85 * budget.max_tokens
            or end - time.monotonic() < 0.2 * (end - started)
        )
        if stats.steps >= budget.max_steps or spent_tokens >= budget.max_tokens:
            raise LoopFailed(
                f"the model used its budget ({stats.steps} steps, {spent_tokens} tokens) without answering",
                reason="budget",
            )
        if last:
            state.messages.append(
                Message("user", "Your budget is spent: write your final answer now from what the tools showed.")
            )
        reply = _complete(model, state, budget, end, offer_tools=not last)
        stats.steps += 1
        stats.input_tokens += reply.usage.input_tokens
        stats.output_tokens += reply.usage.output_tokens
        if reply.tool_calls and not last:
            state.messages.append(Message("assistant", reply.text, tuple(reply.tool_calls)))
            _run_tools(box, state, reply.tool_calls, pool)
            continue
        if reply.text.strip():
            return reply.text
        if last:
            raise LoopFailed(f"the model used its budget ({stats.steps} steps) without answering", reason="budget")
        state.repairs += 1
        if state.repairs > MAX_REPAIRS:
            raise LoopFailed("the model returned no answer", reason="malformed")
        state.messages.append(Message("assistant", reply.text or "(empty)"))
        state.messages.append(Message("user", "Your reply was empty. Call a tool or write your answer."))


def _complete(model: ChatModel, state: _State, budget: Budget, end: float, *, offer_tools: bool) -> ModelReply:
    """One model turn, shortening older tool outputs when the prompt is (or is said to be) too long."""
    room = (budget.context_tokens - budget.max_output_tokens) * CHARS_PER_TOKEN
    if _size(state.messages) > room:
        _shorten(state.messages, room, keep_last=True) or _shorten(state.messages, room, keep_last=False)
    schemas = state.schemas if offer_tools else []
    for attempt in range(4):
        try:
            return model.complete(state.messages, schemas, deadline=end)
        except ContextOverflow:
            log.info("model context overflow (attempt %d): shortening tool outputs", attempt + 1)
            # The provider counts differently from our estimate: aim at half the present size, older outputs
            # first, then the latest ones too.
            target = _size(state.messages) // 2
            if not (
                _shorten(state.messages, target, keep_last=True) or _shorten(state.messages, target, keep_last=False)
            ):
                break
    raise LoopFailed("the question and the tool outputs do not fit the model's context window", reason="context")


def _size(messages: Sequence[Message]) -> int:
    return sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls) for m in messages)


def _shorten(messages: list[Message], max_chars: int, *, keep_last: bool) -> bool:
    """Shorten tool outputs, oldest first, until the prompt fits `max_chars`; whether anything was shortened.

    With `keep_last` the outputs of the latest tool turn stay whole.
    """
    total = _size(messages)
    last_turn = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=len(messages))
    changed = False
    for i, m in enumerate(messages):
        if total <= max_chars:
            break
        if m.role != "tool" or len(m.content) <= SHORTENED_CHARS or (keep_last and i > last_turn):
            continue
        short = m.content[:SHORTENED_CHARS] + "\n... [older output shortened to fit the context window]"
        total -= len(m.content) - len(short)
        messages[i] = Message("tool", short, tool_call_id=m.tool_call_id, is_error=m.is_error)
        changed = True
    return changed


def _run_tools(box: Toolbox, state: _State, calls: Sequence[ToolCall], pool: ThreadPoolExecutor) -> None:
    outputs: list[ToolOutput] = list(pool.map(lambda c: box.run(c.name, c.arguments), calls))
    state.stats.tool_calls += len(calls)
    for call, out in zip(calls, outputs, strict=True):
        if out.malformed:
            state.repairs += 1
        state.seen.extend(out.locations)
        state.messages.append(Message("tool", out.text, tool_call_id=call.id, is_error=out.is_error))
    if state.repairs > MAX_REPAIRS:
        raise LoopFailed(
            f"the model kept calling tools wrongly ({state.repairs} unknown tools or bad arguments)",
            reason="malformed",
        )


# --- citations -----------------------------------------------------------------------------------------------


def parse_citations(text: str) -> list[tuple[str, str, str, int, int, str]]:
    """(repo, revision, path, start, end, the matched text) of every pin in `text`, in order."""
    out = []
    for m in CITATION.finditer(text):
        start = int(m["start"])
        end = int(m["end"]) if m["end"] else start
        out.append((m["repo"], m["rev"], m["path"].rstrip(".,;:"), start, end, m.group(0)))
    return out


def verify_citations(runtime: Runtime, actor: Actor, text: str, seen: Sequence[Location]) -> tuple[list[Citation], str]:
    """The citations of `text` that check out, and the text with the others replaced by a plain note.

    A citation checks out when the caller may read the file at that commit, its lines exist, and a tool showed
    that file at that commit in this answer (`seen`). Abbreviated SHAs are expanded from what was seen.
    """
    repos = runtime.get(RepoService)
    shown = {(loc.repo, loc.commit, loc.path) for loc in seen}
    commits = {(loc.repo, loc.commit) for loc in seen}
    body = _SOURCES_HEADING.split(text, maxsplit=1)[0].rstrip()
    citations: list[Citation] = []
    rejected: list[str] = []
    for repo, rev, path, start, end, raw in parse_citations(body):
        full = next((c for r, c in commits if r == repo and c.startswith(rev.lower())), None)
        ok = full is not None and (repo, full, path) in shown and 1 <= start <= end
        if ok and full is not None:
            try:
                content = repos.read_file(actor, repo, path, start, end, full)
                ok = not content.binary and end <= content.total_lines and content.commit == full
            except CodewellError:
                ok = False
        if not ok or full is None:
            rejected.append(raw)
            continue
        citation = Citation(repo, full, path, start, end)
        if citation not in citations and len(citations) < MAX_SOURCES:
            citations.append(citation)
        if raw != citation.pin:
            body = body.replace(raw, citation.pin)
    for raw in rejected:
        body = body.replace(raw, "(unverified reference removed)")
    if rejected:
        log.info("dropped %d unverifiable citations", len(rejected))
    return citations, body
