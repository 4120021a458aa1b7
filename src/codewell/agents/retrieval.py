"""The deterministic retrieval pipeline: an answer without a model (the embedded default, and the fallback).

A question is reduced to what a search can use: identifiers as typed (`CamelCase`, `snake_case`, dotted
names, anything in backticks), quoted strings, and content words (English and question stop words out,
stemmed). Three searches then run over the scope (one repository at a pinned commit, or every repository the
actor may read), each as the actor through the capabilities' service API:

- symbols (codenav's per-revision symbol tables): definitions named like an identifier of the question, or
  whose name is made of the question's words (`merge_cookies` for "where are cookies merged");
- natural-language search (nls: BM25 over code chunks whose boundaries are the definitions);
- keyword search: the identifiers and quoted strings, and the content words ORed.

Their file rankings are fused by reciprocal rank (definitions and hits in the path weigh more, tests less
unless the question is about tests); each chosen file gets a line range (the matched definition's span when
it is known, else the nls chunk, else a window around the matching lines), which is read back at its commit
(`RepoService.read_file`): only ranges that exist and that the actor may read are cited. The summary is one
line per file with the definitions found there, and the answer says plainly that no model wrote it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import Stemmer

from codewell.agents.answers import AgentAnswer, AgentStats, Citation
from codewell.codenav.service import CodeNavService
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, InvalidInput, NotFound, Unavailable
from codewell.nls.service import NlsService
from codewell.repos.service import RepoService, ResolvedRevision
from codewell.search.service import SearchService, SymbolMatch

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = ["NOTICE", "Terms", "extract_terms", "retrieve"]

NOTICE = (
    "No model wrote this answer: codewell's deterministic retrieval (symbol, natural-language and keyword "
    "search) picked these places; read the cited lines to confirm."
)
# The whole pipeline's budget when the caller gives no deadline.
DEFAULT_BUDGET_SECONDS = 8.0
# At most this many readable repositories are searched for symbols when no scope is given.
MAX_SCOPE_REPOS = 25
MAX_RANGE_LINES = 60
WINDOW = 6
# Keyword search ANDs at most this many content words (the longest: the most specific).
MAX_AND_WORDS = 5
MAX_SUBSETS = 2
# Reciprocal-rank fusion: score = Σ weight / (K + rank). A small K keeps the first places of each list apart.
RRF_K = 3.0
_W_SYMBOL = 1.2
_W_EXACT_SYMBOL = 2.5
_W_NLS = 1.0
_W_IDENT = 0.9
_W_KEYWORD = 0.5
_W_PATH = 0.45
_TEST_FACTOR = 0.35
_SYMBOL_LIMIT = 400
_STEMMER = Stemmer.Stemmer("english")

_QUOTED = re.compile(r"\"([^\"\n]{2,200})\"|(?<!\w)'([^'\n]{2,200})'(?!\w)|`([^`\n]{1,200})`")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_TEST_PATH = re.compile(r"(^|/)(tests?|testing|spec|__tests__)(/|$)|(^|/)test_[^/]*$|_tests?\.[a-z]+$|conftest\.py$")
# Type stubs declare what the code beside them does: never where it is done.
_STUB = re.compile(r"\.pyi$|\.d\.ts$")
_TEST_WORDS = frozenset({"test", "tests", "testing", "fixture", "fixtures", "spec", "specs", "conftest"})
_DEFINITION_KINDS = frozenset({"class", "struct", "interface", "enum", "function", "method", "type alias", "macro"})

# English function words, the words of "where is X done in Y" requests, and words every program is full of.
STOP_WORDS = frozenset(
    """a an and are as at be been but by can could do does did for from has have how i if in into is it its
    me my of on or should so than that the their them then there these they this those to was we were what
    when where which while who whom why will with would you your all any some not no yes also just only via
    def self cls return none null nil true false var let const func fn public private static void int str
    import include package else elif end begin new use used using find show tell look locate located
    implement implemented implementation implements done handled handle handles happen happens happening
    code codebase logic repo repository repositories project function functions method methods
    class classes module modules place places part parts defined define defines definition live lives
    responsible actually exactly please want need thing things way get gets go goes work works make makes
    whole given each every one two us our lib library source""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class Terms:
    """What a question gives a search: identifiers and quoted strings as typed, content words, their stems."""

    identifiers: tuple[str, ...]
    quoted: tuple[str, ...]
    keywords: tuple[str, ...]
    stems: frozenset[str]
    about_tests: bool
    # Adjacent content words written as one name (`file sizes` → filesize): modules and names are often that.
    compounds: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return not (self.identifiers or self.quoted or self.keywords)


def split_identifier(ident: str) -> list[str]:
    """`parseHTTPRequest` → [parse, http, request]; `snake_case` → [snake, case]; dotted names by part."""
    return [w.lower() for part in re.split(r"[_.:]+", ident) for w in _WORD.findall(part)]


def _stems(words: list[str]) -> list[str]:
    return list(_STEMMER.stemWords([w for w in words if w not in STOP_WORDS and len(w) > 1]))


def _is_identifier(token: str) -> bool:
    if "_" in token.strip("_") or "." in token or "::" in token:
        return True
    # camelCase / CamelCase with at least two words, or an acronym followed by a word (HTTPAdapter); not units
    # such as `kB` or `MiB`.
    return len(token) >= 4 and len(_WORD.findall(token)) > 1 and token != token.lower() and token != token.upper()


def extract_terms(question: str, *, ignore: frozenset[str] = frozenset()) -> Terms:
    """Identifiers, quoted strings and content words of `question`; words in `ignore` (e.g. the repository's
    name, which the task names but which says nothing about where to look) are left out."""
    identifiers: list[str] = []
    quoted: list[str] = []
    keywords: list[str] = []
    for m in _QUOTED.finditer(question):
        text = (m.group(1) or m.group(2) or m.group(3) or "").strip()
        if not text:
            continue
        if m.group(3) is not None and _TOKEN.fullmatch(text):
            identifiers.append(text)  # `name` in backticks is an identifier even when it is one plain word
        else:
            quoted.append(text)
    rest = _QUOTED.sub(" ", question)
    compounds: set[str] = set()
    previous = ""
    for token in _TOKEN.findall(rest):
        low = token.lower()
        if low in ignore:
            previous = ""
            continue
        if _is_identifier(token):
            identifiers.append(token)
            previous = ""
        elif low not in STOP_WORDS and len(low) > 2 and not low.isdigit():
            keywords.append(low)
            if previous:
                compounds.update({previous + low, previous + _STEMMER.stemWord(low)})
            previous = low
        else:
            previous = ""
    words: list[str] = list(keywords)
    for text in (*identifiers, *quoted):
        words.extend(split_identifier(text) if _TOKEN.fullmatch(text) else re.findall(r"[a-z0-9]+", text.lower()))
    about_tests = bool({w.lower() for w in _TOKEN.findall(question)} & _TEST_WORDS)
    return Terms(
        tuple(dict.fromkeys(identifiers)),
        tuple(dict.fromkeys(quoted)),
        tuple(dict.fromkeys(keywords)),
        frozenset(_stems(words)),
        about_tests,
        frozenset(compounds),
    )


@dataclass
class _File:
    """One candidate file and everything the searches said about it."""

    repo: str
    commit: str
    path: str
    ranks: dict[str, int] = field(default_factory=dict)  # list name → best (0-based) rank in that list
    symbols: list[tuple[float, SymbolMatch]] = field(default_factory=list)
    chunks: list[tuple[int, int, tuple[str, ...]]] = field(default_factory=list)  # nls (start, end, symbols)
    lines: dict[int, float] = field(default_factory=dict)  # matching line → weight
    score: float = 0.0


@dataclass
class _Run:
    runtime: Runtime
    actor: Actor
    terms: Terms
    deadline: float
    files: dict[tuple[str, str], _File] = field(default_factory=dict)
    calls: int = 0
    notes: list[str] = field(default_factory=list)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def file(self, repo: str, commit: str, path: str) -> _File:
        key = (repo, path)
        found = self.files.get(key)
        if found is None:
            found = self.files[key] = _File(repo, commit, path)
        return found

    def rank(self, listing: str, repo: str, commit: str, path: str, rank: int) -> _File:
        f = self.file(repo, commit, path)
        if listing not in f.ranks or rank < f.ranks[listing]:
            f.ranks[listing] = rank
        return f


def retrieve(
    runtime: Runtime,
    actor: Actor,
    question: str,
    *,
    scope: ResolvedRevision | None,
    max_files: int = 5,
    deadline: float | None = None,
) -> AgentAnswer:
    """Deterministic: identifiers/quoted strings/keywords from `question` → keyword + nls + symbol search
    (within `scope`'s repo@commit when given, else across readable repos) → rank files and line ranges →
    read the top ranges → AgentAnswer(author="retrieval", text=<short Markdown summary>, sources=<re-checked
    citations>, notice="No model wrote this answer: ...")."""
    started = time.monotonic()
    ignore = frozenset(_name_words(scope.repo.name)) if scope is not None else frozenset()
    terms = extract_terms(question, ignore=ignore)
    if terms.empty:
        raise InvalidInput(
            "the question has no identifier, quoted string or content word to search for",
            hint="name what you are looking for, e.g. a function, a class, an error message or what the code does",
        )
    run = _Run(runtime, actor, terms, deadline if deadline is not None else started + DEFAULT_BUDGET_SECONDS)
    _symbols(run, [scope] if scope is not None else _readable_targets(run))
    _identifiers(run, scope)
    _nls(run, scope)
    _keywords(run, scope)
    chosen = _fuse(run)[: max(1, max_files)]
    sources = _cite(run, chosen)
    text = _summary(scope, sources, run.terms)
    stats = AgentStats(seconds=time.monotonic() - started, tool_calls=run.calls, steps=1)
    return AgentAnswer(text=text, sources=sources, stats=stats, author="retrieval", notice=NOTICE)


# --- scope -------------------------------------------------------------------------------------------------


def _name_words(name: str) -> list[str]:
    """The words of a repository name (`github.com/psf/requests` → github, com, psf, requests)."""
    return [w for w in re.split(r"[^A-Za-z0-9_]+", name.lower()) if w]


def _readable_targets(run: _Run) -> list[ResolvedRevision]:
    """The default branches of the repositories the actor may read (cloned ones, at most MAX_SCOPE_REPOS)."""
    repos = run.runtime.get(RepoService)
    out: list[ResolvedRevision] = []
    for repo in repos.iter_readable(run.actor):  # page by page: no records beyond the ones used
        if len(out) >= MAX_SCOPE_REPOS or run.left() <= 0:
            break
        if not repo.cloned:
            continue
        try:
            out.append(repos.resolve(run.actor, repo.name))
        except (NotFound, Unavailable, InvalidInput):
            continue
    return out


def _repo_filter(scope: ResolvedRevision | None) -> str:
    if scope is None:
        return ""
    return f"repo:^{re.escape(scope.repo.name)}$ rev:{scope.commit} "


def _literal(text: str) -> str:
    """A keyword-search pattern matching `text` literally (quoted when it holds spaces or query syntax)."""
    if re.fullmatch(r"[A-Za-z0-9_.]+", text) and text.upper() not in ("AND", "OR", "NOT"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- the searches ------------------------------------------------------------------------------------------


def _symbol_scorer(terms: Terms) -> Callable[[str], float]:
    exact = {i.lower() for ident in terms.identifiers for i in (ident, re.split(r"\.|::", ident)[-1])}
    stems = terms.stems
    cache: dict[str, float] = {}

    def score(name: str) -> float:
        got = cache.get(name)
        if got is not None:
            return got
        low = name.lower()
        value = 0.0
        if low in exact:
            value = 10.0
        elif low.replace("_", "") in terms.compounds:
            value = 3.0
        elif stems:
            parts = set(_stems(split_identifier(name)))
            hits = len(parts & stems)
            if hits:
                coverage = hits / len(parts)
                # `merge_cookies` for "merge cookies": every part asked for; one word of many is weak.
                if hits >= 2 or coverage >= 0.5:
                    value = hits * coverage + (0.5 if hits >= 2 and coverage == 1.0 else 0.0)
        cache[name] = value
        return value

    return score


def _symbols(run: _Run, targets: list[ResolvedRevision]) -> None:
    """Definitions named like an identifier of the question, or made of its words (codenav's tables), ranked
    by file across all `targets`."""
    score = _symbol_scorer(run.terms)
    include: Callable[[str], bool] = (lambda _p: True) if run.terms.about_tests else (lambda p: not _is_test(p))
    codenav = run.runtime.get(CodeNavService)
    scored: list[tuple[float, ResolvedRevision, SymbolMatch]] = []
    for target in targets:
        if run.left() <= 0:
            break
        run.calls += 1
        try:
            found = codenav.symbols(target.repo, target.commit, lambda n: score(n) > 0, include, _SYMBOL_LIMIT)
        except CodewellError:
            found = None
        scored.extend((score(s.name) * _kind_factor(s.kind), target, s) for s in found or ())
    scored.sort(key=lambda t: (-t[0], t[1].repo.name, t[2].path, t[2].line))
    order: dict[tuple[str, str], int] = {}
    for value, target, s in scored:
        if value < 0.5:
            continue
        key = (target.repo.name, s.path)
        if key not in order:
            order[key] = len(order)
        f = run.rank("symbol" if value < 10 else "exact", target.repo.name, target.commit, s.path, order[key])
        f.symbols.append((value, s))
        f.lines[s.line] = f.lines.get(s.line, 0.0) + value


def _kind_factor(kind: str) -> float:
    if kind in _DEFINITION_KINDS:
        return 1.0
    if kind in ("constant", "module"):
        return 0.7
    return 0.5  # variables and fields: a name, rarely where something is done


def _search(run: _Run, query: str, count: int = 200) -> list[tuple[str, str, str, list[tuple[int, str]]]]:
    """(repo, commit, path, matching lines) per file of a keyword search, best first; [] on a failed search."""
    left = run.left()
    if left <= 0.05:
        return []
    run.calls += 1
    try:
        found = run.runtime.get(SearchService).search(run.actor, query, count=count, timeout=max(0.05, left))
    except CodewellError:
        return []
    return [(f.repo, f.commit, f.path, [(m.line_number, m.line) for m in f.line_matches]) for f in found.files]


def _identifiers(run: _Run, scope: ResolvedRevision | None) -> None:
    """Identifiers and quoted strings, literally: the files that mention them, definitions first (search's
    ranking puts defining lines ahead)."""
    wanted = [*run.terms.identifiers, *run.terms.quoted]
    if not wanted:
        return
    query = _repo_filter(scope) + "(" + " OR ".join(_literal(w) for w in wanted) + ")"
    for rank, (repo, commit, path, lines) in enumerate(_search(run, query)):
        if not run.terms.about_tests and _is_test(path):
            continue
        f = run.rank("ident", repo, commit, path, rank)
        for n, _text in lines[:20]:
            f.lines[n] = f.lines.get(n, 0.0) + 1.0


def _keywords(run: _Run, scope: ResolvedRevision | None) -> None:
    """Files holding every content word (keyword search ANDs terms within a file), then files holding all but
    one of them. Exact and cheap (an OR of common words matches half a code base and costs ten times more)."""
    words = sorted(run.terms.keywords, key=len, reverse=True)[:MAX_AND_WORDS]
    if not words:
        return
    queries = [words]
    if len(words) >= 3:
        # All but one word, leaving out the shortest (the least specific) first. Each query costs a search.
        queries.extend([w for w in words if w != left_out] for left_out in reversed(words[-MAX_SUBSETS:]))
    hits: dict[tuple[str, str, str], list[int]] = {}
    lines: dict[tuple[str, str, str], list[int]] = {}
    for level, group in enumerate(queries):
        query = _repo_filter(scope) + " ".join(_literal(w) for w in group) + " count:100"
        for rank, (repo, commit, path, matched) in enumerate(_search(run, query)):
            key = (repo, commit, path)
            hits.setdefault(key, []).append(rank + (0 if level == 0 else 1000))
            lines.setdefault(key, [n for n, _ in matched[:30]])
        if level == 0 and len(hits) >= 3:
            break  # enough files hold every word
    # Every word first (by search's rank), then the files that most subsets found.
    order = sorted(hits, key=lambda k: (min(hits[k]) >= 1000, -len(hits[k]), min(hits[k]), k[2]))
    rank = 0
    for key in order:
        repo, commit, path = key
        if not run.terms.about_tests and _is_test(path):
            continue
        f = run.rank("keyword", repo, commit, path, rank)
        rank += 1
        for n in lines[key]:
            f.lines[n] = f.lines.get(n, 0.0) + 0.3


def _nls(run: _Run, scope: ResolvedRevision | None) -> None:
    """Natural-language search over code chunks (nls), with its own stemming and boosts."""
    if run.left() <= 0.05:
        return
    words = [*run.terms.identifiers, *run.terms.quoted, *run.terms.keywords]
    text = " ".join(re.sub(r"[\"'`():]", " ", w) for w in words)
    query = f"{text} count:50" + (f" repo:{scope.repo.name} rev:{scope.commit}" if scope is not None else "")
    run.calls += 1
    try:
        found = run.runtime.get(NlsService).search(run.actor, query)
    except CodewellError:
        return
    order: dict[tuple[str, str], int] = {}
    for hit in found.hits:
        if not run.terms.about_tests and _is_test(hit.path):
            continue
        key = (hit.repo, hit.path)
        if key not in order:
            order[key] = len(order)
        f = run.rank("nls", hit.repo, hit.commit, hit.path, order[key])
        if len(f.chunks) < 3:
            f.chunks.append((hit.start, hit.end, hit.symbols))


# --- fusion and ranges -------------------------------------------------------------------------------------

_WEIGHTS = {
    "exact": _W_EXACT_SYMBOL,
    "symbol": _W_SYMBOL,
    "nls": _W_NLS,
    "ident": _W_IDENT,
    "keyword": _W_KEYWORD,
}


def _is_test(path: str) -> bool:
    return bool(_TEST_PATH.search(path))


def _path_coverage(path: str, terms: Terms) -> float:
    if not terms.stems:
        return 0.0
    bare = re.sub(r"\.[A-Za-z0-9]+$", "", path)
    parts = set(_stems(split_identifier(bare.replace("/", "_"))))
    compound = 1.0 if bare.rsplit("/", 1)[-1].replace("_", "").lower() in terms.compounds else 0.0
    return len(parts & terms.stems) / len(terms.stems) + compound


def _fuse(run: _Run) -> list[_File]:
    for f in run.files.values():
        score = sum(_WEIGHTS[name] / (RRF_K + rank) for name, rank in f.ranks.items())
        score += _W_PATH * _path_coverage(f.path, run.terms) * (1.0 if f.ranks else 0.0)
        if _is_test(f.path) and not run.terms.about_tests:
            score *= _TEST_FACTOR
        if _STUB.search(f.path):
            score *= _TEST_FACTOR
        f.score = score
    return sorted(run.files.values(), key=lambda f: (-f.score, f.repo, f.path))


def _ranges(run: _Run, f: _File) -> list[tuple[int, int, str]]:
    """Up to two (start, end, note) line ranges of `f`: definitions first, then nls chunks, then windows."""
    out: list[tuple[int, int, str]] = []
    for value, s in sorted(f.symbols, key=lambda t: (-t[0], t[1].line))[:2]:
        if out and value < 1.0:
            break
        start, end = _definition_span(run, f, s)
        out.append((start, end, s.label))
    if not out and f.chunks:
        start, end, symbols = f.chunks[0]
        out.append((start, end, ", ".join(symbols[:3])))
    if not out and f.lines:
        best = max(f.lines.items(), key=lambda t: (t[1], -t[0]))[0]
        near = sorted(n for n in f.lines if abs(n - best) <= 3 * WINDOW)
        out.append((max(1, near[0] - WINDOW // 2), near[-1] + WINDOW, "matching lines"))
    if not out:
        out.append((1, 1 + 2 * WINDOW, "file name"))
    merged: list[tuple[int, int, str]] = []
    for start, stop, note in sorted(out):
        end = min(stop, start + MAX_RANGE_LINES - 1)
        if merged and start <= merged[-1][1] + 1:
            a, b, n = merged[-1]
            merged[-1] = (a, max(b, end), n if not note or note in n else f"{n}; {note}")
        else:
            merged.append((start, end, note))
    return merged


def _definition_span(run: _Run, f: _File, s: SymbolMatch) -> tuple[int, int]:
    """The lines of the definition `s` (an nls chunk starting there when there is one, else the block)."""
    for start, end, _symbols in f.chunks:
        if start == s.line:
            return start, end
    qualified = f"{s.container}.{s.name}" if s.container else s.name
    if run.left() > 0.05:
        run.calls += 1
        try:
            found = run.runtime.get(CodeNavService).go_to_definition(run.actor, f.repo, f.path, qualified, f.commit)
        except CodewellError:
            found = None
        for d in found.candidates if found is not None else ():
            if d.path == f.path and d.line == s.line:
                return min(d.def_line, s.line), max(d.def_end_line, s.line)
    return s.line, s.line + 2 * WINDOW


def _cite(run: _Run, chosen: list[_File]) -> list[Citation]:
    """The ranges of the chosen files that exist at their commit (read back as the actor), in rank order."""
    repos = run.runtime.get(RepoService)
    out: list[Citation] = []
    for f in chosen:
        for start, end, note in _ranges(run, f):
            run.calls += 1
            try:
                content = repos.read_file(run.actor, f.repo, f.path, start, end, f.commit)
            except CodewellError:
                continue
            if content.binary or not content.lines:
                continue
            out.append(Citation(f.repo, content.commit, f.path, content.start_line, content.end_line, note))
    return out


# --- the summary -------------------------------------------------------------------------------------------


def _summary(scope: ResolvedRevision | None, sources: list[Citation], terms: Terms) -> str:
    where = f"{scope.repo.name}@{scope.commit[:12]}" if scope is not None else "the repositories you can read"
    if not sources:
        return (
            f"Nothing in {where} matched the identifiers or words of the question "
            f"({', '.join(_asked(terms)) or 'none'}). Try other names for what you are looking for."
        )
    lines = [f"Best matches in {where} for: {', '.join(_asked(terms))}", ""]
    by_file: dict[tuple[str, str], list[Citation]] = {}
    for c in sources:
        by_file.setdefault((c.repo, c.path), []).append(c)
    for (repo, path), cites in by_file.items():
        spans = ", ".join(f"L{c.start_line}-{c.end_line}" for c in cites)
        names = list(dict.fromkeys(c.note for c in cites if c.note and c.note not in ("matching lines", "file name")))
        what = f": {'; '.join(f'`{n}`' for n in names)}" if names else ""
        prefix = f"{repo} – " if scope is None else ""
        lines.append(f"- {prefix}`{path}` ({spans}){what}")
    return "\n".join(lines)


def _asked(terms: Terms) -> list[str]:
    return [*(f"`{i}`" for i in terms.identifiers), *(f'"{q}"' for q in terms.quoted), *terms.keywords][:12]
