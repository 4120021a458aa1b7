"""Code navigation in the file view: identifiers as links, the definition and references pages (docs/web.md).

The file view turns each identifier codenav knows at the file's commit into a plain link (works without
JavaScript): a use links to `/<repo>@<commit>/-/definition?path=&line=&symbol=`, a name defined right there to
`/<repo>@<commit>/-/references?...`. What is known comes from two CodeNavService calls per file (the names the
revision defines, the definition spans of this file), never one per identifier; both only read an index that
already exists, so a page never waits for an extraction (without an index the view simply has no links).
The answers are cached per (repository, commit, path): a commit never changes, and the caller has read the file.

The pages call go_to_definition and find_references with the acting user: an unreadable repository is their
NotFound (404), and candidates in other repositories are only those the user may read.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any
from urllib.parse import quote, urlencode

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from codewell.codenav.service import CodeNavService
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.http import urls
from codewell.http.paths import repo_and_revision
from codewell.http.requests import actor_of, runtime_of
from codewell.http.templates import render
from codewell.repos.service import Repo
from codewell.runtime import Runtime
from codewell.web.highlight import SCOPE

__all__ = ["Navigation", "definition_page", "file_navigation", "link_identifiers", "linked_lines", "references_page"]

# References listed on the references page (find_references' limit).
REFERENCES_LIMIT = 200
# Receivers that say nothing about where a member is defined: `self.load` is looked up as `load`.
_RECEIVERS = frozenset({"self", "this", "cls", "super"})
# An identifier token of highlight.py's output: Pygments' Name classes (not builtins: `nb`, `bp`).
_NAME = re.compile(r'<span class="(n[acdefilnotvx]?)">([A-Za-z_$][\w$]*)</span>')
_OWNER = re.compile(r'<span class="n[acdefilnotvx]?">([A-Za-z_$][\w$]*)</span>$')
_DOT = re.compile(r'<span class="[op]">(?:\.|::|-&gt;)</span>$')
_MAX_QUERY = 1000


class Navigation:
    """What the file view links: names codenav knows at the commit, and (line, name) pairs defined in the file."""

    __slots__ = ("base", "defined", "known", "path", "spans")

    def __init__(
        self,
        base: str,
        path: str,
        known: frozenset[str],
        defined: frozenset[tuple[int, str]],
        spans: frozenset[tuple[int, int, int]],
    ) -> None:
        self.base = base  # `/<repo>@<commit>/-/`
        self.path = path
        self.known = known
        self.defined = defined  # (line, name) of the names defined in the file
        self.spans = spans  # the service's definition spans: (line, start byte, end byte)


def _page_url(base: str, page: str, path: str, line: int, symbol: str) -> str:
    return f"{base}{page}?" + urlencode({"path": path, "line": line, "symbol": symbol})


def _link(base: str, page: str, quoted_path: str, line: int, symbol: str) -> str:
    """The same address as `_page_url`, HTML-escaped, built fast (symbols are identifiers and dots)."""
    return f"{base}{page}?path={quoted_path}&amp;line={line}&amp;symbol={symbol}"


_CACHE: OrderedDict[tuple[str, str, str], Navigation] = OrderedDict()
_CACHE_SIZE = 64
_CACHE_LOCK = threading.Lock()


def _known(nav: CodeNavService, repo: Repo, commit: str, path: str, wanted: frozenset[str]) -> Navigation | None:
    """The known names among `wanted` and the definition spans of `path`, from two index reads."""
    key = (str(repo.mirror_path), commit, path)  # the mirror (not the id) tells apart same-SHA fixture repos
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            _CACHE.move_to_end(key)
            return cached
    known = nav.known_names(repo, commit, wanted)
    if known is None:
        return None  # no index for this commit (yet): no links rather than a wait
    spans = (nav.definitions(repo, commit, [path]) or {}).get(path, [])
    found = Navigation(f"/{repo.name}@{commit}/-/", path, frozenset(known), frozenset(), frozenset(spans))
    with _CACHE_LOCK:
        _CACHE[key] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return found


def file_navigation(
    runtime: Runtime, repo: Repo, commit: str, path: str, lines: list[str], highlighted: list[Markup]
) -> Navigation | None:
    """The links of one file's view (None when codenav has no index of the commit)."""
    wanted = frozenset(m.group(2) for html in highlighted for m in _NAME.finditer(html))
    if not wanted:
        return None
    found = _known(runtime.get(CodeNavService), repo, commit, path, wanted)
    if found is None:
        return None
    # Definition spans are byte columns (0-based, end exclusive) of the line's UTF-8 form: the names they cut.
    defined: set[tuple[int, str]] = set()
    for line, start, end in found.spans:
        if 0 < line <= len(lines):
            data = lines[line - 1].encode("utf-8", "surrogatepass")
            defined.add((line, data[start:end].decode("utf-8", "replace")))
    return Navigation(found.base, path, found.known, frozenset(defined), found.spans)


_LINKED: OrderedDict[tuple[str, str, str, int], tuple[Markup, ...]] = OrderedDict()
_LINKED_SIZE = 16


def linked_lines(
    runtime: Runtime, repo: Repo, commit: str, path: str, lines: list[str], highlighted: list[Markup]
) -> list[Markup]:
    """`highlighted` (a whole file's lines) with the identifiers codenav knows as links; unchanged without an
    index. Cached per (mirror, commit, path): the same file is opened again and again (each line link)."""
    key = (str(repo.mirror_path), commit, path, len(lines))
    with _CACHE_LOCK:
        cached = _LINKED.get(key)
        if cached is not None:
            _LINKED.move_to_end(key)
            return list(cached)
    navigation = file_navigation(runtime, repo, commit, path, lines, highlighted)
    if navigation is None:
        return highlighted
    linked = tuple(link_identifiers(navigation, number, html) for number, html in enumerate(highlighted, 1))
    with _CACHE_LOCK:
        _LINKED[key] = linked
        while len(_LINKED) > _LINKED_SIZE:
            _LINKED.popitem(last=False)
    return list(linked)


def link_identifiers(navigation: Navigation, number: int, html: Markup) -> Markup:
    """Line `number`'s highlighted fragment with its known identifiers as links (escaped text is untouched)."""
    out: list[str] = []
    at = 0
    quoted = str(Markup.escape(quote(navigation.path, safe="/")))
    for m in _NAME.finditer(html):
        css, name = m.group(1), m.group(2)
        if name not in navigation.known and (number, name) not in navigation.defined:
            continue
        if (number, name) in navigation.defined:
            href = _link(navigation.base, "references", quoted, number, name)
            title = "Find references"
        else:
            before = html[: m.start()]
            dot = _DOT.search(before)
            symbol = name
            if dot is not None:
                owner = _OWNER.search(before[: dot.start()])
                if owner is not None and owner.group(1) not in _RECEIVERS:
                    symbol = f"{owner.group(1)}.{name}"
            href = _link(navigation.base, "definition", quoted, number, symbol)
            title = "Go to definition"
        out.append(html[at : m.start()])
        out.append(f'<a class="{css} ident" href="{href}" title="{title}">{name}</a>')
        at = m.end()
    if not out:
        return html
    out.append(html[at:])
    return Markup("".join(out))


# -- pages --------------------------------------------------------------------------------------------------
def _query(request: Request) -> tuple[str, str, str, str, int | None]:
    name, revision = repo_and_revision(request)
    params = request.query_params
    path = params.get("path", "").strip("/")[:_MAX_QUERY]
    symbol = params.get("symbol", "").strip()[:_MAX_QUERY]
    if not path or not symbol:
        raise InvalidInput("`path` and `symbol` are required", hint="follow an identifier's link in the file view")
    line_text = params.get("line", "")
    line = int(line_text) if line_text.isdigit() else None
    return name, revision or "", path, symbol, line


def _definition_row(d: Any) -> dict[str, Any]:
    """A codenav Definition for the templates (its results module is not codenav's public API: typed loosely)."""
    lines = (d.def_line, max(d.def_line, d.def_end_line))
    qualified = f"{d.container.split('.')[-1]}.{d.name}" if d.kind in ("method", "field") and d.container else d.name
    return {
        "d": d,
        "url": urls.blob_url("", d.repo, d.commit, d.path) + f"?L{lines[0]}-{lines[1]}#L{d.line}",
        "references_url": _page_url(f"/{d.repo}@{d.commit}/-/", "references", d.path, d.line, qualified),
        "snippet": [(n, text, urls.blob_url("", d.repo, d.commit, d.path) + f"?L{n}#L{n}") for n, text in d.snippet],
    }


async def definition_page(request: Request) -> Response:
    """Where an identifier is defined: a redirect to the one definition, else the ranked candidates."""
    actor, runtime = actor_of(request), runtime_of(request)
    name, revision, path, symbol, line = _query(request)
    nav = runtime.get(CodeNavService)
    found = await run_in_threadpool(nav.go_to_definition, actor, name, path, symbol, revision or None)
    rows = [_definition_row(d) for d in found.candidates]
    if request.query_params.get("view") == "hover":
        # The file view's hover card (codewell.js): the best candidate's definition lines (signature, docs).
        more = len(rows) - 1
        return render(request, "web/hover.html", row=rows[0], symbol=symbol, more=more)
    if len(rows) == 1:
        return RedirectResponse(rows[0]["url"], status_code=303)
    origin = urls.blob_url("", found.repo, found.commit, path) + (f"?L{line}#L{line}" if line else "")
    return render(
        request,
        "web/definitions.html",
        title=f"Definitions of {symbol}",
        found=found,
        rows=rows,
        origin=origin,
        line=line,
        scope=SCOPE,
    )


def _references(runtime: Runtime, actor: Actor, name: str, revision: str, path: str, symbol: str) -> dict[str, Any]:
    nav = runtime.get(CodeNavService)
    try:
        found = nav.find_references(actor, name, path, symbol, revision or None, REFERENCES_LIMIT)
    except NotFound:
        # Asked from a use rather than the definition: references of what the use resolves to (the same
        # NotFound as before when the repository is unreadable or nothing is defined under that name).
        definitions = nav.go_to_definition(actor, name, path, symbol, revision or None)
        best = definitions.candidates[0]
        qualified = (
            f"{best.container.split('.')[-1]}.{best.name}"
            if best.kind in ("method", "field") and best.container
            else best.name
        )
        found = nav.find_references(actor, best.repo, best.path, qualified, best.commit, REFERENCES_LIMIT)
    files = []
    for f in found.files:
        base = urls.blob_url("", f.repo, f.commit, f.path)
        files.append(
            {
                "f": f,
                "url": base,
                "lines": [(n, col, text[:300], f"{base}?L{n}#L{n}") for n, col, text in f.lines],
                "more": max(0, f.total - len(f.lines)),
            }
        )
    return {"found": found, "definition": _definition_row(found.definition), "files": files}


async def references_page(request: Request) -> Response:
    """The references of a symbol (defined in `path`, or what a use in `path` resolves to), grouped by file."""
    actor, runtime = actor_of(request), runtime_of(request)
    name, revision, path, symbol, _line = _query(request)
    context = await run_in_threadpool(_references, runtime, actor, name, revision, path, symbol)
    # `view=panel`: the same answer as a fragment for the file view's side panel (codewell.js).
    template = "web/references_panel.html" if request.query_params.get("view") == "panel" else "web/references.html"
    page_url = _page_url(
        f"/{name}@{revision}/-/" if revision else f"/{name}/-/", "references", path, _line or 0, symbol
    )
    return render(request, template, title=f"References of {symbol}", symbol=symbol, page_url=page_url, **context)
