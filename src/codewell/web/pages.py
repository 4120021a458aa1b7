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
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, InvalidInput, NotFound
from codewell.http import urls
from codewell.http.paths import repo_and_revision
from codewell.http.requests import actor_of, runtime_of
from codewell.http.templates import render
from codewell.nls.service import NlsService
from codewell.repos.service import LIST_REPOS_MAX, FileEntry, RepoService
from codewell.runtime import Runtime
from codewell.search.service import LANGUAGES, FileMatch, SearchService
from codewell.web.highlight import SCOPE, HighlightStore, highlight_lines
from codewell.web.navigation import definition_page, linked_lines, references_page

__all__ = ["routes"]

# Matching lines shown per file on the search page; the rest are counted ("N more matches").
LINES_PER_FILE = 10
# Lines of a natural-language search chunk shown on the search page (the rest: "N more lines").
NLS_LINES = 15
# Branches and tags offered by the picker of the repository, tree and file pages.
PICKER_REFS = 100
SUGGESTIONS = 8
FILE_EXAMPLES = (("\\.py$", "Python files"), ("\\.go$", "Go files"), ("_test\\.", "tests"), ("^src/", "under src/"))
FILTERS = (("repo:", "a repository name (regex)"), ("file:", "a path (regex)"), ("lang:", "a language"))
README_NAMES = ("readme.md", "readme", "readme.txt", "readme.rst", "readme.markdown")


_LINES_SUFFIX = re.compile(r"\?L(\d+)(?:-(\d+))?$")
_LINES_QUERY = re.compile(r"^L(\d+)(?:-(\d+))?$")
_CR = "\r"  # a CRLF line's end, not shown (f-string expressions take no backslash before Python 3.12)


@dataclass(frozen=True)
class Target:
    repo: str
    revision: str | None  # None: the default branch
    path: str


def _target(request: Request, path: str = "") -> Target:
    name, revision = repo_and_revision(request)
    return Target(name, revision, path.strip("/"))


def _lines(request: Request, path: str) -> tuple[str, tuple[int, int] | None]:
    """The file path and the highlighted range: `?L<a>-<b>` as a query, or encoded in the path (`%3FL<a>-<b>`,
    as the tools print it, which arrives decoded at the end of the path)."""
    found = _LINES_SUFFIX.search(path)
    if found is not None:
        path = path[: found.start()]
    else:
        found = _LINES_QUERY.match(request.url.query)
    if found is None:
        return path, None
    start = int(found.group(1))
    end = int(found.group(2) or start)
    return path, (min(start, end), max(start, end))


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


def _result_block(found: FileMatch) -> Markup:
    """One file's section of the search page as one HTML string: built here rather than in Jinja loops, which
    cost ~60 us a row on a busy machine (a full page holds hundreds of rows). Every text and address from the
    repository is escaped; numbers are ints."""
    repo, path, line_matches = found.repo, found.path, found.line_matches
    file_url = _escaped(urls.blob_url("", repo, found.commit, path))
    rows = "".join(
        f'<tr><td class="num"><a href="{file_url}?L{m.line_number}#L{m.line_number}">{m.line_number}</a></td>'
        f"<td>{_marked(m.line.rstrip(_CR), m.ranges)}</td></tr>"
        for m in line_matches[:LINES_PER_FILE]
    )
    more = len(line_matches) - LINES_PER_FILE
    return Markup(
        f'<section class="result">\n<h3><a href="{_escaped(urls.repo_url("", repo))}">{_escaped(repo)}</a> › '
        f'<a href="{file_url}">{_escaped(path)}</a></h3>\n'
        + (f'<table class="code">\n{rows}\n</table>\n' if rows else "")
        + (
            f'<p class="muted">{more} more matching line{"s" if more != 1 else ""} in this file.</p>\n'
            if more > 0
            else ""
        )
        + "</section>"
    )


def _search(runtime: Runtime, actor: Actor, query: str) -> dict[str, Any]:
    results = runtime.get(SearchService).search(actor, query)
    files = [_result_block(f) for f in results.files]
    return {"results": results, "files": files}


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
    query = request.query_params.get("q", "").strip()
    mode = request.query_params.get("mode", "") or request.query_params.get("patternType", "")
    nls = mode == "nls"
    context: dict[str, Any] = {
        "query": query,
        "mode": "nls" if nls else "keyword",
        "results": None,
        "nls": None,
        "chunks": [],
        "files": [],
        "error": None,
        "hint": None,
    }
    status = 200
    if query:
        try:
            if nls:
                context.update(await run_in_threadpool(_nls_search, runtime, actor, query))
            else:
                context.update(await run_in_threadpool(_search, runtime, actor, query))
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


def _blob_context(runtime: Runtime, actor: Actor, target: Target, lines: tuple[int, int] | None) -> dict[str, Any]:
    service = runtime.get(RepoService)
    content = service.read_file(actor, target.repo, target.path, revision=target.revision)
    rows = Markup("")
    if not content.binary:
        highlighted = highlight_lines(content.path, content.lines, runtime.get(HighlightStore))
        if content.start_line == 1:  # a whole file (not the first lines of a cut one): identifiers as links
            repo = service.get(actor, content.repo)
            highlighted = linked_lines(runtime, repo, content.commit, content.path, content.lines, highlighted)
        rows = code_rows(content.start_line, highlighted, lines)
    name, revision = content.repo, content.revision
    return {
        "picker": _picker(service, actor, name, revision, lambda ref: urls.blob_url("", name, ref, content.path)),
        "history_url": commits_url(name, revision, content.path),
        "blame_url": f"/{name}@{revision}/-/blame/{content.path}",
        "content": content,
        "rows": rows,
        "crumbs": _crumbs(name, revision, content.path),
        "filename": content.path.rsplit("/", 1)[-1],
        "repo_url": urls.repo_url("", name),
        "raw_url": urls.raw_url("", name, content.commit, content.path),
        "permalink": urls.blob_url("", name, content.commit, content.path)
        + (f"?L{lines[0]}-{lines[1]}" if lines else ""),
    }


async def blob_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    path, lines = _lines(request, str(request.path_params["path"]))
    target = _target(request, path)
    if not target.path:
        raise NotFound("no file named in the address", hint="open the repository page and pick a file")
    context = await run_in_threadpool(_blob_context, runtime, actor, target, lines)
    title = f"{target.path} · {target.repo}"
    return render(request, "web/blob.html", title=title, **context, **_page_context())


async def raw_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    target = _target(request, str(request.path_params["path"]))
    service = runtime.get(RepoService)
    content = await run_in_threadpool(service.read_file, actor, target.repo, target.path, None, None, target.revision)
    if content.binary:
        raise InvalidInput("binary files have no raw text view", hint="clone the repository to get this file")
    text = "\n".join(content.lines) + ("\n" if content.lines else "")
    response = PlainTextResponse(text)
    # Repository bytes served from our origin: never sniffed as HTML, never run as a page even if they are one.
    response.headers["x-content-type-options"] = "nosniff"
    response.headers["content-security-policy"] = "default-src 'none'; sandbox"
    response.headers["cache-control"] = "no-store"
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
        Route("/{repo:repo}/-/definition", definition_page, methods=["GET"]),
        Route("/{repo:repo}/-/references", references_page, methods=["GET"]),
        Route("/{repo:repo}/-/tree{path:subpath}", tree_page, methods=["GET"]),
        Route("/{repo:repo}", repo_page, methods=["GET"]),
    ]
