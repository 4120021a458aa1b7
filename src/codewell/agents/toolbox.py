"""The agent's tools: codewell's own service API, called as the person who asked (their permissions, no more).

Each tool has a JSON Schema for the model, calls one service method with the caller's `Actor`, and answers
compact text: `# <repo>@<sha> – <path>` blocks of `<line>: <text>` (the commit is in every header so the model
can pin its citations), plus the `Location`s it showed, so the loop can tell a cited location the model saw
from one it made up. A repository the caller may not read answers exactly like a missing one (the services'
NotFound). A tool whose capability is not in the house (no nls, no codenav, no history) is simply not offered.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema

from codewell.agents.llm import ToolSchema
from codewell.codenav.service import CodeNavService
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, InvalidInput
from codewell.history.service import HistoryService
from codewell.history.wire import commit_search as wire_commit_search
from codewell.history.wire import diff_search as wire_diff_search
from codewell.nls.service import NlsService
from codewell.repos.service import RepoService
from codewell.search.service import SearchService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = ["Location", "Tool", "ToolOutput", "Toolbox"]

log = logging.getLogger(__name__)

MAX_OUTPUT_CHARS = 8_000
MAX_LINE_CHARS = 200
SEARCH_FILES = 8
LINES_PER_FILE = 5
READ_MAX_LINES = 200
TOOL_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Location:
    """A range of lines a tool showed (1-based, inclusive), at a full commit SHA."""

    repo: str
    commit: str
    path: str
    start_line: int
    end_line: int


@dataclass(slots=True)
class ToolOutput:
    """What one call answered the model: text, whether it failed, and the locations it showed."""

    text: str
    is_error: bool = False
    locations: list[Location] = field(default_factory=list)
    malformed: bool = False  # the call itself was wrong (unknown tool, bad arguments): a repair for the loop


Handler = Callable[["Toolbox", dict[str, Any]], ToolOutput]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    needs: str  # the capability whose service the tool calls

    @property
    def schema(self) -> ToolSchema:
        return ToolSchema(self.name, self.description, self.parameters)


def _schema(properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_REPO = {"type": "string", "description": "Repository name, e.g. github.com/acme/app"}
_PATH = {"type": "string", "description": "File path inside the repository"}
_REV = {"type": "string", "description": "Branch, tag or commit SHA (default: the default branch)"}
_SYMBOL = {"type": "string", "description": "The symbol's name as written in the file"}
_REPOS = {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Repository names"}
_TERMS = {"type": "array", "items": {"type": "string"}}


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " ... [line truncated]"


def _limit(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    return text[:MAX_OUTPUT_CHARS].rsplit("\n", 1)[0] + "\n... [output truncated: narrow the query]"


def _header(repo: str, commit: str, path: str) -> str:
    return f"# {repo}@{commit} \u2013 {path}"


# --- handlers ------------------------------------------------------------------------------------------------


def _keyword_search(box: Toolbox, args: dict[str, Any]) -> ToolOutput:
    found = box.runtime.get(SearchService).search(box.actor, args["query"], timeout=TOOL_TIMEOUT_SECONDS)
    blocks: list[str] = []
    locations: list[Location] = []
    for f in found.files[:SEARCH_FILES]:
        lines = [f"{m.line_number}: {_cut(m.line)}" for m in f.line_matches[:LINES_PER_FILE]]
        blocks.append("\n".join([_header(f.repo, f.commit, f.path), *lines]))
        numbers = [m.line_number for m in f.line_matches[:LINES_PER_FILE]]
        locations.extend(Location(f.repo, f.commit, f.path, n, n) for n in numbers)
        if not numbers:
            locations.append(Location(f.repo, f.commit, f.path, 0, 0))  # a path match: the file, no lines
    if not blocks:
        return ToolOutput("No results.")
    more = f"\n\n({len(found.files)} files matched; showing {SEARCH_FILES})" if len(found.files) > SEARCH_FILES else ""
    return ToolOutput("\n\n".join(blocks) + more, locations=locations)


def _nls_search(box: Toolbox, args: dict[str, Any]) -> ToolOutput:
    found = box.runtime.get(NlsService).search(box.actor, args["question"])
    blocks: list[str] = []
    locations: list[Location] = []
    per_file: dict[tuple[str, str], int] = {}
    for hit in found.hits:
        key = (hit.repo, hit.path)
        if key not in per_file and len(per_file) >= SEARCH_FILES:
            continue
        if per_file.get(key, 0) >= 2:
            continue
        per_file[key] = per_file.get(key, 0) + 1
        shown = hit.lines[:30]
        body = [f"{hit.start + i}: {_cut(line)}" for i, line in enumerate(shown)]
        blocks.append("\n".join([_header(hit.repo, hit.commit, hit.path), *body]))
        locations.append(Location(hit.repo, hit.commit, hit.path, hit.start, hit.start + max(0, len(shown) - 1)))
    notes = "\n".join(found.notes)
    text = "\n\n".join(blocks) if blocks else "No results."
    return ToolOutput(f"{notes}\n\n{text}".strip(), locations=locations)


def _read_file(box: Toolbox, args: dict[str, Any]) -> ToolOutput:
    start = args.get("start_line")
    end = args.get("end_line")
    if start is not None and end is None:
        end = start + READ_MAX_LINES - 1
    if start is not None and end is not None and end - start + 1 > READ_MAX_LINES:
        end = start + READ_MAX_LINES - 1
    content = box.runtime.get(RepoService).read_file(
        box.actor, args["repo"], args["path"], start, end, args.get("revision")
    )
    head = _header(content.repo, content.commit, content.path)
    if content.binary:
        return ToolOutput(f"{head}\n{content.notice or 'Binary file.'}")
    lines = content.lines[:READ_MAX_LINES]
    body = [f"{content.start_line + i}: {_cut(line)}" for i, line in enumerate(lines)]
    last = content.start_line + len(lines) - 1
    tail = []
    if last < content.total_lines:
        tail = [f"(lines {content.start_line}-{last} of {content.total_lines}; pass start_line to read on)"]
    text = "\n".join([head, *body, *tail])
    location = Location(content.repo, content.commit, content.path, content.start_line, max(content.start_line, last))
    return ToolOutput(text, locations=[location])


def _list_files(box: Toolbox, args: dict[str, Any]) -> ToolOutput:
    listing = box.runtime.get(RepoService).list_files(
        box.actor, args["repo"], args.get("path", ""), args.get("revision")
    )
    lines = [e.path for e in listing.entries[:300]]
    more = [f"({listing.total} entries; showing {len(lines)})"] if listing.total > len(lines) else []
    return ToolOutput("\n".join([f"# {listing.repo}@{listing.commit} \u2013 {listing.path or '/'}", *lines, *more]))


def _go_to_definition(box: Toolbox, args: dict[str, Any]) -> ToolOutput:
    found = box.runtime.get(CodeNavService).go_to_definition(
        box.actor, args["repo"], args["path"], args["symbol"], args.get("revision")
    )
    blocks: list[str] = []
    locations: list[Location] = []
    for d in found.candidates[:5]:
        snippet = [f"{n}: {_cut(t)}" for n, t in d.snippet[:20]]
        blocks.append("\n".join([f"{_header(d.repo, d.commit, d.path)} ({d.kind} {d.name}, {d.reason})", *snippet]))
        locations.append(Location(d.repo, d.commit, d.path, d.def_line, d.def_end_line))
    text = "\n\n".join([*found.notes, *blocks]) if blocks else "No definition found."
    return ToolOutput(text, locations=locations)


def _find_references(box: Toolbox, args: dict[str, Any]) -> ToolOutput:
    found = box.runtime.get(CodeNavService).find_references(
        box.actor, args["repo"], args["path"], args["symbol"], args.get("revision"), limit=20
    )
    blocks: list[str] = []
    locations: list[Location] = []
    for f in found.files:
        lines = [f"{n}: {_cut(t)}" for n, _col, t in f.lines[:LINES_PER_FILE]]
        blocks.append("\n".join([f"{_header(f.repo, f.commit, f.path)} ({f.scope})", *lines]))
        locations.extend(Location(f.repo, f.commit, f.path, n, n) for n, _col, _t in f.lines[:LINES_PER_FILE])
    head = f"{found.shown} of {found.total} references to {found.symbol}"
    return ToolOutput("\n\n".join([head, *found.notes, *blocks]), locations=locations)


def _commit_search(box: Toolbox, args: dict[str, Any]) -> ToolOutput:
    # The MCP tool's argument names and wire mapping; only the count cap and the deadline are the agent's own.
    asked = {**args, "count": min(int(args.get("count", 10)), 20)}
    found = wire_commit_search(box.runtime.get(HistoryService), box.actor, asked, timeout=TOOL_TIMEOUT_SECONDS)
    lines = []
    for c in found.commits:
        paths = ", ".join(c.paths[:5]) + (" ..." if len(c.paths) > 5 else "")
        lines.append(f"{c.repo}@{c.sha} {c.committed_at:%Y-%m-%d} {c.author_name}: {_cut(c.subject)}\n  files: {paths}")
    notes = [f"(unknown repository: {name})" for name in found.unknown_repos]
    return ToolOutput("\n".join([*notes, *lines]) or "No commits found.")


def _diff_search(box: Toolbox, args: dict[str, Any]) -> ToolOutput:
    asked = {**args, "count": min(int(args.get("count", 5)), 10)}
    found = wire_diff_search(box.runtime.get(HistoryService), box.actor, asked, timeout=TOOL_TIMEOUT_SECONDS)
    blocks = []
    for m in found.matches:
        c = m.commit
        hunks = [f"--- {path}\n{h.header}\n{h.body()}" for path, h in m.hunks[:3]]
        blocks.append(
            "\n".join([f"{c.repo}@{c.sha} {c.committed_at:%Y-%m-%d} {c.author_name}: {_cut(c.subject)}", *hunks])
        )
    notes = [f"(unknown repository: {name})" for name in found.unknown_repos]
    return ToolOutput("\n\n".join([*notes, *blocks]) or "No matching diffs.")


TOOLS: tuple[Tool, ...] = (
    Tool(
        "keyword_search",
        "Search code by keywords or regular expressions (codewell query language: terms are ANDed, "
        "repo:<regex>, file:<regex>, lang:<name>, rev:<revision> with repo:, type:symbol for definitions, "
        '"quoted phrase", /regex/). Answers the best files with their matching lines.',
        _schema({"query": {"type": "string", "description": "e.g. repo:^acme/app$ parseConfig"}}, ["query"]),
        _keyword_search,
        "search",
    ),
    Tool(
        "nls_search",
        "Search code with a question in natural language (broader than keyword_search: words are stemmed, "
        "identifiers split). Filters inside the question: repo:<name>, file:<regex>, rev:<revision>.",
        _schema({"question": {"type": "string"}}, ["question"]),
        _nls_search,
        "nls",
    ),
    Tool(
        "read_file",
        f"Read a file's numbered lines (at most {READ_MAX_LINES} per call; pass start_line/end_line for a range).",
        _schema(
            {
                "repo": _REPO,
                "path": _PATH,
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
                "revision": _REV,
            },
            ["repo", "path"],
        ),
        _read_file,
        "repos",
    ),
    Tool(
        "list_files",
        "List a directory of a repository (directories first, ending with /).",
        _schema(
            {"repo": _REPO, "path": {"type": "string", "description": "Directory ('' = root)"}, "revision": _REV},
            ["repo"],
        ),
        _list_files,
        "repos",
    ),
    Tool(
        "go_to_definition",
        "Where a symbol used in a file is defined (follows the file's imports, then the repository).",
        _schema({"repo": _REPO, "path": _PATH, "symbol": _SYMBOL, "revision": _REV}, ["repo", "path", "symbol"]),
        _go_to_definition,
        "codenav",
    ),
    Tool(
        "find_references",
        "Where a symbol defined in a file is used.",
        _schema({"repo": _REPO, "path": _PATH, "symbol": _SYMBOL, "revision": _REV}, ["repo", "path", "symbol"]),
        _find_references,
        "codenav",
    ),
    Tool(
        "commit_search",
        "Search commits (newest first) by message terms, authors, content terms (added or removed text), "
        "files, dates (YYYY-MM-DD or '1 month ago'). Kinds are ANDed, values of one kind ORed.",
        _schema(
            {
                "repos": _REPOS,
                "messageTerms": _TERMS,
                "authors": _TERMS,
                "contentTerms": _TERMS,
                "files": _TERMS,
                "after": {"type": "string"},
                "before": {"type": "string"},
                "count": {"type": "integer", "minimum": 1, "maximum": 20},
            },
            ["repos"],
        ),
        _commit_search,
        "history",
    ),
    Tool(
        "diff_search",
        "Search the added/removed lines of commits with a regular expression (RE2, case-sensitive).",
        _schema(
            {
                "pattern": {"type": "string", "minLength": 1},
                "repos": _REPOS,
                "added": {"type": "boolean"},
                "removed": {"type": "boolean"},
                "after": {"type": "string"},
                "before": {"type": "string"},
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            ["pattern", "repos"],
        ),
        _diff_search,
        "history",
    ),
)


class Toolbox:
    """The tools offered to one answer, bound to the runtime and the acting `Actor`."""

    def __init__(self, runtime: Runtime, actor: Actor, *, capabilities: Sequence[str] | None = None) -> None:
        self.runtime = runtime
        self.actor = actor
        present = set(capabilities) if capabilities is not None else {c.name for c in runtime.capabilities}
        # A runtime without a declared capability list (a bare script) offers every tool.
        self.tools = {t.name: t for t in TOOLS if not present or t.needs in present}

    @property
    def schemas(self) -> list[ToolSchema]:
        return [t.schema for t in self.tools.values()]

    def run(self, name: str, arguments: str) -> ToolOutput:
        """Run one call as the model wrote it; every problem becomes an error answer the model can act on."""
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools))
            return ToolOutput(f"error: unknown tool {name!r}; the tools are: {known}", is_error=True, malformed=True)
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return ToolOutput(
                f"error: the arguments of {name} are not valid JSON ({exc.msg})", is_error=True, malformed=True
            )
        if not isinstance(args, dict):
            return ToolOutput(f"error: the arguments of {name} must be a JSON object", is_error=True, malformed=True)
        try:
            jsonschema.validate(args, tool.parameters)
        except jsonschema.ValidationError as exc:
            where = ".".join(str(p) for p in exc.absolute_path) or "arguments"
            return ToolOutput(f"error: bad arguments for {name}: {where}: {exc.message}", is_error=True, malformed=True)
        try:
            out = tool.handler(self, args)
        except CodewellError as exc:
            return ToolOutput(f"error: {exc}", is_error=True)
        except (ValueError, TypeError) as exc:
            return ToolOutput(f"error: {InvalidInput(str(exc)).message}", is_error=True)
        except Exception:
            log.exception("agent tool %s failed", name)
            return ToolOutput(f"error: {name} failed unexpectedly; try another tool", is_error=True)
        out.text = _limit(out.text)
        return out
