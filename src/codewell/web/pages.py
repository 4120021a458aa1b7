"""The pages people read code with: home, search, a repository, a directory, a file (docs/web.md).

Adapters only: parameters in, RepoService, SearchService or NlsService calls (which decide what the actor may
read), rendering out; the file view's identifier links and the definition/references pages are
web/navigation.py. A repository the actor may not read is the service's NotFound, so its pages answer 404
exactly like a missing one. Addresses are those of `codewell.http.urls` (the ones the MCP tools print), built here with
an empty external URL so that links stay on the host the browser used.

The repository routes come last in the app and their `repo` segment never starts with `.` or `-`, so they
shadow neither `/.api/...` nor any other capability's pages, and `/<repo>/-/...` addresses of later pages
(history's compare) stay free.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pygit2
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, InvalidInput, NotFound
from codewell.http import urls
from codewell.http.lines import asked_lines, line_pages, line_window, start_at
from codewell.http.paths import repo_and_revision
from codewell.http.requests import actor_of, runtime_of
from codewell.http.templates import render
from codewell.nls.service import NlsService
from codewell.repos.git import object_at, open_mirror, resolve_commit
from codewell.repos.service import LIST_REPOS_MAX, FileEntry, RepoService
from codewell.runtime import Runtime
from codewell.search.query.parser import DEFAULT_TIMEOUT, And, Node, Not, Or, Pattern, Query, parse_query
from codewell.search.service import LANGUAGES, FileMatch, LineMatch, SearchService
from codewell.web.highlight import MAX_HIGHLIGHT_CHARS, SCOPE, HighlightStore, highlight_lines, plain_lines
from codewell.web.navigation import definition_page, linked_lines, references_page

__all__ = ["routes"]

# Matching lines shown per file on the search page; the rest behind "Show N more matching lines".
LINES_PER_FILE = 10
# Lines of context around each match on the search page (`context=` in the address), and the choices offered.
CONTEXT_DEFAULT = 1
CONTEXT_MAX = 10
CONTEXT_CHOICES = (0, 1, 2, 3, 5, 10)
# Result files shown with their lines per page ("Show more files" adds as many): each is read and highlighted.
FILES_PER_PAGE = 50
# Entries per group of filters from the result set (repositories, languages, paths).
FACET_ENTRIES = 8
# Result files bigger than this show their matching lines only (the index searches files up to 1 MiB by path).
CONTEXT_MAX_BYTES = 1 << 20
# A chunk of a result longer than this (a minified line) is shown escaped but not highlighted.
MAX_CHUNK_CHARS = 20_000
# Lines of a natural-language search chunk shown on the search page (the rest: "N more lines").
NLS_LINES = 15
# Branches and tags offered by the picker of the repository, tree and file pages.
PICKER_REFS = 100
SUGGESTIONS = 8
FILE_EXAMPLES = (("\\.py$", "Python files"), ("\\.go$", "Go files"), ("_test\\.", "tests"), ("^src/", "under src/"))
FILTERS = (("repo:", "a repository name (regex)"), ("file:", "a path (regex)"), ("lang:", "a language"))
README_NAMES = ("readme.md", "readme", "readme.txt", "readme.rst", "readme.markdown")
# The file view shows files up to http/lines.py's PAGE_LINES whole, longer ones a page at a time: the server
# highlights and links the whole file once (cached), so moving between pages costs a cut, not a lex.
# A `patterntype:` or `case:` field in the query itself: it fixes that toggle of the search page.
_SET_BY_QUERY = re.compile(r"(?:^|[\s(])(patterntype|case):(\S*)", re.IGNORECASE)
_WORD_CHAR = re.compile(r"\w", re.ASCII)
_CR = "\r"  # a CRLF line's end, not shown (f-string expressions take no backslash before Python 3.12)


@dataclass(frozen=True)
class Target:
    repo: str
    revision: str | None  # None: the default branch
    path: str


def _target(request: Request, path: str = "") -> Target:
    name, revision = repo_and_revision(request)
    return Target(name, revision, path.strip("/"))


def _crumbs(repo: str, revision: str, path: str) -> list[tuple[str, str]]:
    """(label, tree link) for each directory above `path`, from the repository root."""
    parts = [p for p in path.split("/") if p]
    crumbs = [(repo, urls.tree_url("", repo, revision))]
    for index, part in enumerate(parts[:-1]):
        crumbs.append((part, urls.tree_url("", repo, revision, "/".join(parts[: index + 1]))))
    return crumbs


def _page_context() -> dict[str, Any]:
    return {"scope": SCOPE}


def commits_url(repo: str, revision: str, path: str = "") -> str:
    """history's log page of a revision or of a path (history.pages serves it)."""
    return f"/{repo}@{revision}/-/commits/{path}".rstrip("/")


def _picker(service: RepoService, actor: Actor, repo: str, current: str, link: Any) -> dict[str, Any]:
    """The branch/tag picker: each ref links to `link(ref short name)`; plain links, so it works without JS."""
    refs = service.list_refs(actor, repo, limit=PICKER_REFS)
    return {
        "current": current,
        "branches": [(r.short_name, link(r.short_name), r.default) for r in refs.refs if r.kind == "branch"],
        "tags": [(r.short_name, link(r.short_name), False) for r in refs.refs if r.kind == "tag"],
    }


# -- home and search ----------------------------------------------------------------------------------------
async def home(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    page = await run_in_threadpool(runtime.get(RepoService).list_repos, actor, "", LIST_REPOS_MAX)
    repos = [(r, urls.repo_url("", r.name)) for r in page.repos]
    return render(request, "web/home.html", repos=repos, has_more=page.has_more, query="", **_page_context())


def _repositories(runtime: Runtime, actor: Actor, query: str) -> dict[str, Any]:
    service = runtime.get(RepoService)
    page = service.list_repos(actor, query, LIST_REPOS_MAX)
    # Per-repository state other capabilities add (search's index state): one call for all repositories.
    columns = service.status_columns()
    repos = [
        {"repo": r, "url": urls.repo_url("", r.name), "status": [(c, v.get(r.name, "")) for c, v in columns.items()]}
        for r in page.repos
    ]
    return {"repos": repos, "columns": list(columns), "has_more": page.has_more, "filter": query}


async def repositories(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    query = request.query_params.get("q", "").strip()
    context = await run_in_threadpool(_repositories, runtime, actor, query)
    return render(request, "web/repositories.html", **context)


def _suggestions(runtime: Runtime, actor: Actor, query: str) -> list[dict[str, str]]:
    """Completions of the query's last word: the filters themselves, then repository names or languages."""
    head, _, last = query.rpartition(" ")
    prefix = f"{head} " if head else ""
    negated = last.startswith("-")
    word = last.removeprefix("-")
    found: list[dict[str, str]] = []
    if ":" not in word:
        for name, what in FILTERS:
            if name.startswith(word.lower()) or not word:
                found.append({"text": prefix + name, "label": name, "what": what})
        return found
    key, _, value = word.partition(":")
    sign = "-" if negated else ""
    if key in ("repo", "r"):
        page = runtime.get(RepoService).list_repos(actor, value, SUGGESTIONS)
        for r in page.repos:
            completed = f"{sign}repo:^{re.escape(r.name)}$"
            found.append({"text": f"{prefix}{completed} ", "label": completed, "what": r.description})
    elif key in ("lang", "l", "language"):
        for lang in LANGUAGES:
            if " " not in lang and lang.lower().startswith(value.lower()) and len(found) < SUGGESTIONS:
                completed = f"{sign}lang:{lang.lower()}"
                found.append({"text": f"{prefix}{completed} ", "label": completed, "what": lang})
    elif key in ("file", "f"):
        for ext, what in (
            ("\\.py$", "Python files"),
            ("\\.go$", "Go files"),
            ("_test\\.", "tests"),
            ("^src/", "under src/"),
        ):
            if ext.startswith(value) or not value:
                completed = f"{sign}file:{ext}"
                found.append({"text": f"{prefix}{completed} ", "label": completed, "what": what})
    return found


async def suggest(request: Request) -> Response:
    """An HTML fragment of query completions (htmx swaps it under the search box; each is also a plain link)."""
    actor, runtime = actor_of(request), runtime_of(request)
    query = request.query_params.get("q", "")[:500]
    found = await run_in_threadpool(_suggestions, runtime, actor, query)
    return render(request, "web/suggestions.html", suggestions=found)


def _escaped(text: str) -> str:
    """`text` escaped exactly as markupsafe's `escape` does (the same five entities), as a plain string: the search
    page escapes thousands of pieces, and `escape` builds a Markup object for each (half the page's own time)."""
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;").replace("'", "&#39;")
    )


def _marked(line: str, ranges: list[tuple[int, int]]) -> str:
    """The line escaped, with `<mark>` around the match ranges (byte offsets into its UTF-8 form)."""
    if line.isascii():  # byte offsets are character offsets: no UTF-8 round trip
        text: str | None = line
        data = b""
        size = len(line)
    else:
        text = None
        data = line.encode("utf-8", "surrogatepass")
        size = len(data)

    def piece(start: int, end: int) -> str:
        return _escaped(text[start:end] if text is not None else data[start:end].decode("utf-8", "replace"))

    out: list[str] = []
    at = 0
    for start, end in sorted(ranges):
        if start < at or end > size or start >= end:
            continue
        out.append(piece(at, start))
        out.append(f"<mark>{piece(start, end)}</mark>")
        at = end
    out.append(piece(at, size))
    return "".join(out)


def _result_block(found: FileMatch, lines: list[str] | None = None, context: int = 0) -> Markup:
    """One file's section of the search page as one HTML string: built here rather than in Jinja loops, which
    cost ~60 us a row on a busy machine (a full page holds hundreds of rows). Every text and address from the
    repository is escaped (highlighting escapes each token); numbers are ints.

    `lines` is the file's text when it could be read: the matching lines are then shown with `context` lines
    around them and syntax-highlighted; without it, the matching lines alone. The first LINES_PER_FILE
    matching lines are shown, the others behind a "show more" `<details>` (no JavaScript needed)."""
    repo, path, line_matches = found.repo, found.path, found.line_matches
    file_url = _escaped(urls.blob_url("", repo, found.commit, path))
    head = (
        f'<section class="result">\n<h3><a href="{_escaped(urls.repo_url("", repo))}">{_escaped(repo)}</a> › '
        f'<a href="{file_url}">{_escaped(path)}</a></h3>\n'
    )
    if not line_matches:
        return Markup(head + "</section>")
    if lines is not None and any(_line_at(lines, m.line_number) != m.line.rstrip(_CR) for m in line_matches):
        lines = None  # the file's text is not the searched one (another decoding): matching lines only
    shown, rest = line_matches[:LINES_PER_FILE], line_matches[LINES_PER_FILE:]
    body = _chunks_table(path, file_url, shown, lines, context, 0)
    more = ""
    if rest:
        count = len(rest)
        more = (
            f'<details class="more-matches"><summary>Show {count} more matching line{"s" if count != 1 else ""}'
            f"</summary>\n{_chunks_table(path, file_url, rest, lines, context, shown[-1].line_number)}</details>\n"
        )
    return Markup(head + body + more + "</section>")


def _line_at(lines: list[str], number: int) -> str | None:
    return lines[number - 1].rstrip(_CR) if 0 < number <= len(lines) else None


def _chunks_table(
    path: str, file_url: str, matches: list[LineMatch], lines: list[str] | None, context: int, floor: int
) -> str:
    """The matching lines with `context` lines around them (none above line `floor`, already shown), merged
    into chunks (`<tbody>`s) where they touch, each chunk highlighted as one piece of code."""
    by_number = {m.line_number: m for m in matches}
    last = len(lines) if lines is not None else 0
    around = context if lines is not None else 0
    spans: list[list[int]] = []
    for m in matches:
        start = max(floor + 1, m.line_number - around, 1)
        end = min(last, m.line_number + around) if lines is not None else m.line_number
        if spans and start <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    bodies = []
    for start, end in spans:
        numbers = range(start, end + 1)
        texts = [(lines[n - 1] if lines is not None else by_number[n].line).rstrip(_CR) for n in numbers]
        fragments = _highlighted_chunk(path, texts)
        rows = []
        for n, text, fragment in zip(numbers, texts, fragments, strict=True):
            found = by_number.get(n)
            if found is None:
                html, mark = fragment, ""
            else:
                marked = _mark_html(fragment, _char_ranges(text, found.ranges), len(text))
                html = marked if marked is not None else _marked(text, found.ranges)
                mark = ' class="match"'
            rows.append(f'<tr{mark}><td class="num"><a href="{file_url}?L{n}#L{n}">{n}</a></td><td>{html}</td></tr>')
        bodies.append("<tbody>" + "".join(rows) + "</tbody>")
    return f'<table class="code {SCOPE}">\n' + "\n".join(bodies) + "\n</table>\n"


def _highlighted_chunk(path: str, texts: list[str]) -> list[str]:
    """One highlighted fragment per line of a chunk (its lines highlighted together, so a string or comment over
    several lines keeps its colour); a chunk past MAX_CHUNK_CHARS (a minified line) as plain escaped text."""
    if sum(len(t) for t in texts) > MAX_CHUNK_CHARS:
        return [_escaped(t) for t in texts]
    return [str(f) for f in highlight_lines(path, texts)]


def _char_ranges(line: str, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Match ranges (byte offsets into the line's UTF-8 form) as character offsets, sorted, overlaps merged."""
    if line.isascii():
        converted = sorted(ranges)
    else:
        data = line.encode("utf-8", "surrogatepass")

        def char(offset: int) -> int:
            return len(data[:offset].decode("utf-8", "ignore"))

        converted = sorted((char(s), char(e)) for s, e in ranges)
    merged: list[tuple[int, int]] = []
    for start, end in converted:
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _mark_html(fragment: str, ranges: list[tuple[int, int]], length: int) -> str | None:
    """`<mark>` around character ranges of a highlighted line's text (tags skipped, an entity one character).

    A mark never straddles a tag: it is closed before the tag and opened again after it, so the line stays
    balanced HTML. None when the fragment's text is not `length` characters long (the highlighter changed
    the text): the caller then marks the plain line instead of marking the wrong characters."""
    out: list[str] = []
    at = 0  # characters of text seen
    i = 0
    inside = False
    index = 0
    size = len(fragment)
    while i < size:
        ch = fragment[i]
        if ch == "<":
            close = fragment.find(">", i)
            if close < 0:
                return None
            if inside:
                out.append("</mark>")
                inside = False
            out.append(fragment[i : close + 1])
            i = close + 1
            continue
        end = fragment.find(";", i) + 1 if ch == "&" else i + 1
        if end <= i:
            return None
        while index < len(ranges) and ranges[index][1] <= at:
            index += 1
        wanted = index < len(ranges) and ranges[index][0] <= at
        if wanted != inside:
            out.append("<mark>" if wanted else "</mark>")
            inside = wanted
        out.append(fragment[i:end])
        at += 1
        i = end
    if inside:
        out.append("</mark>")
    return "".join(out) if at == length else None


# -- search steering: toggles kept in the URL, mapped onto the query language -------------------------------
@dataclass(frozen=True)
class Steering:
    """The search page's toggles, from the URL (Sourcegraph's `patternType=regexp` and `case=yes`, and
    `word=yes`), or fixed by a `patterntype:`/`case:` field the query itself holds (the query wins)."""

    regexp: bool = False
    case: bool = False
    word: bool = False
    context: int = CONTEXT_DEFAULT
    files: int = FILES_PER_PAGE
    regexp_in_query: bool = False
    case_in_query: bool = False

    def params(self) -> dict[str, str]:
        """The toggles as URL parameters (defaults left out): what a link to another query keeps."""
        found: dict[str, str] = {}
        if self.regexp and not self.regexp_in_query:
            found["patternType"] = "regexp"
        if self.case and not self.case_in_query:
            found["case"] = "yes"
        if self.word:
            found["word"] = "yes"
        if self.context != CONTEXT_DEFAULT:
            found["context"] = str(self.context)
        return found


def steering(params: Mapping[str, str], query: str) -> Steering:
    """The toggles of a search page address (see Steering)."""
    fixed = {m.group(1).lower(): m.group(2).lower() for m in _SET_BY_QUERY.finditer(query)}
    pattern_type = fixed.get("patterntype", params.get("patternType", "").lower())
    case = fixed.get("case", params.get("case", "").lower())
    return Steering(
        regexp=pattern_type in ("regexp", "regex"),
        case=case == "yes",
        word=params.get("word", "").lower() == "yes",
        context=_bounded_int(params.get("context", ""), CONTEXT_DEFAULT, 0, CONTEXT_MAX),
        files=_bounded_int(params.get("files", ""), FILES_PER_PAGE, 1, 1_000_000),
        regexp_in_query="patterntype" in fixed,
        case_in_query="case" in fixed,
    )


def _bounded_int(text: str, default: int, low: int, high: int) -> int:
    return min(max(int(text), low), high) if text.isdigit() else default


def effective_query(query: str, steer: Steering) -> str:
    """The query the search service runs: the toggles written as the query language's own fields (regex:
    `patterntype:regexp`, case: `case:yes`), and whole word as each term made a regex bounded by `\\b`."""
    text = query
    if steer.regexp and not steer.regexp_in_query:
        text += " patterntype:regexp"
    if steer.case and not steer.case_in_query:
        text += " case:yes"
    return whole_words(text) if steer.word else text


def whole_words(text: str) -> str:
    """`text` with every search term matching whole words only: each becomes `/\\b(?:term)\\b/` (a `\\b` only on
    a side where the term starts or ends with a letter, digit or `_`: `foo(` still matches `foo(x)`); the
    filters are written back as the parser read them. InvalidInput for a query the parser refuses."""
    parsed = parse_query(text)
    if parsed.expr is None:
        return text
    return " ".join([_term_text(parsed.expr, top=True), *_filter_texts(parsed)])


def _term_text(node: Node, *, top: bool = False) -> str:
    if isinstance(node, Pattern):
        return "/" + _word_bounded(node).replace("/", "\\/") + "/"
    if isinstance(node, Not):
        return "not " + _term_text(node.child)
    joined = (" or " if isinstance(node, Or) else " ").join(_term_text(c) for c in node.children)
    return joined if top and isinstance(node, And) else f"({joined})"


def _word_bounded(pattern: Pattern) -> str:
    body = f"(?:{pattern.value})" if pattern.regex else pattern.value
    typed = pattern.value if pattern.regex else pattern.text
    before = "\\b" if _WORD_CHAR.match(typed[:1]) else ""
    after = "\\b" if _WORD_CHAR.match(typed[-1:]) else ""
    return f"{before}{body}{after}"


def _filter_texts(parsed: Query) -> list[str]:
    out = [_field("repo", r.pattern + ("@" + ":".join(r.revisions) if r.revisions else "")) for r in parsed.repos]
    out += [_field("-repo", v) for v in parsed.exclude_repos]
    out += [_field("file", v) for v in parsed.files] + [_field("-file", v) for v in parsed.exclude_files]
    out += [_field("lang", v) for v in parsed.languages] + [_field("-lang", v) for v in parsed.exclude_languages]
    if parsed.count_all:
        out.append("count:all")
    elif parsed.count is not None:
        out.append(f"count:{parsed.count}")
    if parsed.case_sensitive:
        out.append("case:yes")
    if parsed.type != "file":
        out.append(f"type:{parsed.type}")
    if parsed.timeout != DEFAULT_TIMEOUT:
        out.append(f"timeout:{parsed.timeout:g}s")
    return out


def _field(name: str, value: str) -> str:
    """`name:value`, the value quoted (backslashes and quotes escaped) when it holds a space or starts with a quote."""
    if value and not any(c.isspace() for c in value) and value[0] not in "\"'":
        return f"{name}:{value}"
    return f'{name}:"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _search_url(query: str, steer: Steering, **extra: str) -> str:
    return "/search?" + urlencode({"q": query, **steer.params(), **extra})


def _facets(files: list[FileMatch], query: str, steer: Steering) -> list[dict[str, Any]]:
    """Filters from the result set: its repositories, languages and directories with their file counts, each a
    link to the same search with `repo:`/`lang:`/`file:` added (those the query already holds left out)."""
    groups: list[dict[str, Any]] = []
    kinds: list[tuple[str, Counter[str], Callable[[str], str]]] = [
        ("Repositories", Counter(f.repo for f in files), lambda r: f"repo:^{re.escape(r)}$"),
        ("Languages", Counter(f.language for f in files if f.language), lambda lang: _field("lang", lang.lower())),
        ("Paths", _directories(files), lambda d: f"file:^{re.escape(d)}"),
    ]
    for title, counts, make in kinds:
        entries = []
        for value, count in counts.most_common(FACET_ENTRIES):
            added = make(value)
            if added in query.split():
                continue
            entries.append(
                {"label": value, "count": count, "filter": added, "url": _search_url(f"{query} {added}", steer)}
            )
        if entries:
            groups.append({"title": title, "entries": entries})
    return groups


def _directories(files: list[FileMatch]) -> Counter[str]:
    """Files per directory prefix: the shallowest depth (up to 3) at which the results are in two or more."""
    found: Counter[str] = Counter()
    for depth in range(1, 4):
        counts = Counter("/".join(parts[:depth]) + "/" for f in files if len(parts := f.path.split("/")) > depth)
        if not counts:
            break
        found = counts
        if len(counts) > 1:
            break
    return found


def _file_texts(runtime: Runtime, actor: Actor, files: list[FileMatch]) -> dict[int, list[str]]:
    """The text of each shown file with matching lines (by position in `files`), read from its mirror at the
    searched commit, for the context lines. One query for the mirrors of every readable repository (not one per
    file); a file that cannot be read (mirror gone, too big, binary) is simply left out."""
    wanted = [(i, f) for i, f in enumerate(files) if f.line_count]
    if not wanted:
        return {}
    refs = {ref.name: ref for ref in runtime.get(RepoService).readable_refs(actor)}
    texts: dict[int, list[str]] = {}
    for i, f in wanted:
        ref = refs.get(f.repo)
        text = _blob_text(ref.mirror_path, f.commit, f.path) if ref is not None else None
        if text is not None:
            lines = text.split("\n")
            texts[i] = lines[:-1] if text.endswith("\n") else lines  # a final newline ends a line, starts none
    return texts


def _blob_text(mirror_path: Path, commit_id: str, path: str) -> str | None:
    try:
        commit = resolve_commit(open_mirror(mirror_path), commit_id)
    except (OSError, pygit2.GitError):
        return None  # the mirror was removed or is being cloned again
    if commit is None:
        return None
    blob = object_at(commit, path)
    if not isinstance(blob, pygit2.Blob) or blob.size > CONTEXT_MAX_BYTES:
        return None
    data: bytes = blob.data
    return None if b"\0" in data else data.decode("utf-8", "replace")


def _search(runtime: Runtime, actor: Actor, query: str, steer: Steering) -> dict[str, Any]:
    results = runtime.get(SearchService).search(actor, effective_query(query, steer))
    shown = results.files[: steer.files]
    texts = _file_texts(runtime, actor, shown) if steer.context else {}
    files = [_result_block(f, texts.get(i), steer.context) for i, f in enumerate(shown)]
    hidden = len(results.files) - len(shown)
    more_url = _search_url(query, steer, files=str(steer.files + FILES_PER_PAGE)) if hidden else None
    return {
        "results": results,
        "files": files,
        "file_count": len(results.files),
        "hidden_files": hidden,
        "more_files_url": more_url,
        "facets": _facets(results.files, query, steer),
    }


def _nls_search(runtime: Runtime, actor: Actor, question: str) -> dict[str, Any]:
    """nls_search's answer for the page: ranked chunks (file, line range, lines linking to the file view)."""
    results = runtime.get(NlsService).search(actor, question)
    chunks = []
    for hit in results.hits[: results.limit]:
        base = urls.blob_url("", hit.repo, hit.commit, hit.path)
        chunks.append(
            {
                "hit": hit,
                "url": f"{base}?L{hit.start}-{hit.end}#L{hit.start}",
                "repo_url": urls.repo_url("", hit.repo),
                "lines": [
                    (n, text[:300], f"{base}?L{n}#L{n}") for n, text in enumerate(hit.lines[:NLS_LINES], hit.start)
                ],
                "more": max(0, len(hit.lines) - NLS_LINES),
            }
        )
    return {"nls": results, "chunks": chunks}


async def search(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    params = request.query_params
    query = params.get("q", "").strip()
    nls = (params.get("mode", "") or params.get("patternType", "")) == "nls"
    steer = steering(params, query)
    context: dict[str, Any] = {
        "query": query,
        "mode": "nls" if nls else "keyword",
        "steer": steer,
        "context_choices": CONTEXT_CHOICES,
        "results": None,
        "nls": None,
        "chunks": [],
        "files": [],
        "facets": [],
        "error": None,
        "hint": None,
    }
    status = 200
    if query:
        try:
            if nls:
                context.update(await run_in_threadpool(_nls_search, runtime, actor, query))
            else:
                context.update(await run_in_threadpool(_search, runtime, actor, query, steer))
        except CodewellError as exc:
            # Service errors carry messages safe to show (a bad regex, an unknown filter); shown on the page.
            context.update(error=exc.message, hint=exc.hint)
            status = exc.http_status
    return render(request, "web/search.html", status_code=status, **context, **_page_context())


# -- repositories, directories, files -----------------------------------------------------------------------
def _readme(service: RepoService, actor: Actor, target: Target, entries: list[FileEntry]) -> dict[str, Any] | None:
    by_name = {e.path.lower(): e.path for e in entries if e.kind == "file"}
    for name in README_NAMES:
        if name in by_name:
            content = service.read_file(actor, target.repo, by_name[name], revision=target.revision)
            if content.binary:
                return None
            return {"path": content.path, "text": "\n".join(content.lines), "truncated": content.truncated}
    return None


def _tree_context(runtime: Runtime, actor: Actor, target: Target, with_readme: bool) -> dict[str, Any]:
    service = runtime.get(RepoService)
    listing = service.list_files(actor, target.repo, target.path, target.revision)
    shown = listing.revision
    entries = []
    for e in listing.entries:
        clean = e.path.rstrip("/")
        label = clean.rsplit("/", 1)[-1] + ("/" if e.kind == "dir" else "")
        if e.kind == "dir":
            link = urls.tree_url("", listing.repo, shown, clean)
        elif e.kind in {"file", "symlink"}:
            link = urls.blob_url("", listing.repo, shown, clean)
        else:
            link = ""  # a submodule: its contents live in another repository
        entries.append({"label": label, "kind": e.kind, "url": link})
    repo = service.get(actor, target.repo)
    path = target.path
    return {
        "picker": _picker(service, actor, repo.name, shown, lambda ref: urls.tree_url("", repo.name, ref, path)),
        "history_url": commits_url(repo.name, shown, path),
        "listing": listing,
        "entries": entries,
        "repo": repo,
        "repo_url": urls.repo_url("", repo.name),
        "crumbs": _crumbs(listing.repo, shown, target.path),
        "current": target.path.rsplit("/", 1)[-1],
        "permalink": urls.tree_url("", listing.repo, listing.commit, target.path),
        "readme": _readme(service, actor, target, listing.entries) if with_readme else None,
        "finder": _finder(listing.repo, listing.commit),
    }


async def repo_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    target = _target(request)
    context = await run_in_threadpool(_tree_context, runtime, actor, target, True)
    return render(request, "web/tree.html", title=target.repo, **context, **_page_context())


async def tree_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    target = _target(request, str(request.path_params["path"]))
    context = await run_in_threadpool(_tree_context, runtime, actor, target, not target.path)
    title = f"{target.path or '/'} · {target.repo}"
    return render(request, "web/tree.html", title=title, **context, **_page_context())


def code_rows(start: int, highlighted: list[Markup], hit: tuple[int, int] | None) -> Markup:
    """The file view's table rows as one HTML string: built here rather than in a Jinja loop, which costs
    ~60 us a row on a busy machine (300 ms for a 5,000-line file). Numbers are ints, fragments are escaped."""
    out = []
    for number, html in enumerate(highlighted, start):
        mark = ' class="hit"' if hit is not None and hit[0] <= number <= hit[1] else ""
        out.append(
            f'<tr id="L{number}"{mark}><td class="num"><a href="#L{number}">{number}</a></td><td>{html}</td></tr>'
        )
    return Markup("\n".join(out))


def file_tree(service: RepoService, actor: Actor, repo: str, revision: str, commit: str, path: str) -> Markup:
    """The tree beside the file view: the repository's root, with each directory on the way to `path` opened
    (its entries listed, one `list_files` per level, at the file's commit) and the file marked; other directories
    link to their tree page. Plain links, no JavaScript. Names are escaped; each listing is at most 1000 entries."""
    parts = path.split("/")
    opened = ["/".join(parts[:depth]) for depth in range(len(parts))]  # "", "a", "a/b" for a/b/c.py

    def level(directory: str) -> str:
        listing = service.list_files(actor, repo, directory, commit)
        items = []
        for entry in listing.entries:
            clean = entry.path.rstrip("/")
            label = escape(clean.rsplit("/", 1)[-1])
            if entry.kind == "dir":
                link = escape(urls.tree_url("", repo, revision, clean))
                inner = f"<ul>{level(clean)}</ul>" if clean in opened else ""
                state = ' class="open"' if inner else ""
                items.append(f'<li class="dir"><a href="{link}"{state}>{label}/</a>{inner}</li>')
            elif entry.kind == "submodule":
                items.append(f'<li class="muted">{label}</li>')
            else:
                link = escape(urls.blob_url("", repo, revision, clean))
                here = ' aria-current="page"' if clean == path else ""
                items.append(f'<li><a href="{link}"{here}>{label}</a></li>')
        if listing.truncated:
            items.append(f'<li class="muted">… {listing.total - len(listing.entries)} more</li>')
        return "".join(items)

    return Markup(f"<ul>{level('')}</ul>")


def _blob_context(
    runtime: Runtime, actor: Actor, target: Target, lines: tuple[int, int] | None, asked_start: int | None
) -> dict[str, Any]:
    service = runtime.get(RepoService)
    # The whole file (people read past line 200; the cut is read_file's rule for agents), up to 5 MB.
    content = service.read_file(actor, target.repo, target.path, revision=target.revision, whole=True)
    window = line_window(len(content.lines), lines, asked_start)
    rows = Markup("")
    if content.lines:  # neither binary nor too big to show
        shown = content.lines[window[0] - 1 : window[1]]
        if sum(map(len, content.lines)) + len(content.lines) > MAX_HIGHLIGHT_CHARS:
            # Too big to highlight (lexing is the slow part): only the shown page is escaped, nothing cached.
            highlighted = plain_lines(shown)
        else:
            # Highlighted and linked as a whole (a page of a file may start inside a docstring), then cut.
            whole = highlight_lines(content.path, content.lines, runtime.get(HighlightStore))
            repo = service.get(actor, content.repo)
            whole = linked_lines(runtime, repo, content.commit, content.path, content.lines, whole)
            highlighted = whole[window[0] - 1 : window[1]]
        rows = code_rows(window[0], highlighted, lines)
    name, revision = content.repo, content.revision
    blob_base = urls.blob_url("", name, revision, content.path)
    return {
        "picker": _picker(service, actor, name, revision, lambda ref: urls.blob_url("", name, ref, content.path)),
        "history_url": commits_url(name, revision, content.path),
        "blame_url": f"/{name}@{revision}/-/blame/{content.path}",
        "content": content,
        "rows": rows,
        "window": window,
        "pages": line_pages(blob_base, len(content.lines), window),
        "too_big": content.truncated and not content.lines,
        "finder": _finder(name, content.commit),
        "tree": file_tree(service, actor, name, revision, content.commit, content.path),
        "crumbs": _crumbs(name, revision, content.path),
        "filename": content.path.rsplit("/", 1)[-1],
        "repo_url": urls.repo_url("", name),
        "raw_url": urls.raw_url("", name, content.commit, content.path),
        "permalink": urls.blob_url("", name, content.commit, content.path)
        + (f"?L{lines[0]}-{lines[1]}" if lines else ""),
    }


async def blob_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    path, lines = asked_lines(request, str(request.path_params["path"]))
    target = _target(request, path)
    if not target.path:
        raise NotFound("no file named in the address", hint="open the repository page and pick a file")
    context = await run_in_threadpool(_blob_context, runtime, actor, target, lines, start_at(request))
    title = f"{target.path} · {target.repo}"
    return render(request, "web/blob.html", title=title, **context, **_page_context())


async def raw_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    target = _target(request, str(request.path_params["path"]))
    service = runtime.get(RepoService)
    # The blob's bytes as stored (the whole file, its line ends and encoding untouched), up to 64 MB.
    content, data = await run_in_threadpool(service.read_raw, actor, target.repo, target.path, target.revision)
    if content.binary:
        raise InvalidInput("binary files have no raw text view", hint="clone the repository to get this file")
    response = Response(data, media_type="text/plain; charset=utf-8")
    # Repository bytes served from our origin: never sniffed as HTML, never run as a page even if they are one.
    response.headers["x-content-type-options"] = "nosniff"
    response.headers["content-security-policy"] = "default-src 'none'; sandbox"
    response.headers["cache-control"] = "no-store"
    return response


def _finder(repo: str, commit: str) -> dict[str, str]:
    """What the file finder (`t`, codewell.js) needs: the path list's address and the file view's, both pinned to
    the commit shown."""
    return {"files": f"/{repo}@{commit}/-/files", "blob": urls.blob_url("", repo, commit, "")}


async def files_page(request: Request) -> Response:
    """Every file path of a revision, one a line (text/plain), for the file finder: a commit's list never
    changes, so a pinned address is cached by the browser."""
    actor, runtime = actor_of(request), runtime_of(request)
    name, revision = repo_and_revision(request)
    commit, paths, _cut = await run_in_threadpool(runtime.get(RepoService).list_paths, actor, name, revision)
    response = PlainTextResponse("\n".join(paths) + ("\n" if paths else ""))
    response.headers["x-content-type-options"] = "nosniff"
    pinned = revision is not None and revision == commit
    response.headers["cache-control"] = "private, max-age=86400, immutable" if pinned else "private, no-cache"
    return response


def routes(runtime: Runtime) -> list[BaseRoute]:
    # Most specific first: `/{repo}` alone would also match `name@rev/-/blob/...` through the revision.
    return [
        Route("/", home, methods=["GET"]),
        Route("/search", search, methods=["GET"]),
        Route("/search/suggest", suggest, methods=["GET"]),
        Route("/repositories", repositories, methods=["GET"]),
        Route("/{repo:repo}/-/blob/{path:path}", blob_page, methods=["GET"]),
        Route("/{repo:repo}/-/raw/{path:path}", raw_page, methods=["GET"]),
        Route("/{repo:repo}/-/files", files_page, methods=["GET"]),
        Route("/{repo:repo}/-/definition", definition_page, methods=["GET"]),
        Route("/{repo:repo}/-/references", references_page, methods=["GET"]),
        Route("/{repo:repo}/-/tree{path:subpath}", tree_page, methods=["GET"]),
        Route("/{repo:repo}", repo_page, methods=["GET"]),
    ]
