"""The deterministic retrieval pipeline: an answer without a model (the embedded default, and the fallback).

The repositories a question names (code_finder's scope, or those deep search's question names; every readable
one when it names none) are where to look, never what to look for: their names are taken out of the question
(`github.com/spf13/cobra` searches for neither `github.com` nor `cobra`) and the searches keep to them. The
rest is reduced to what a search can use: identifiers as typed (`CamelCase`, `snake_case`, dotted names,
anything in backticks), quoted strings, and content words (English and question stop words out, stemmed).
Three searches then run, each as the actor through the capabilities' service API:

- symbols (codenav's per-revision symbol tables): definitions named like an identifier of the question, or
  whose name is made of the question's words (`merge_cookies` for "where are cookies merged"); a name holding
  a single word of the question (`Option`) is a weak hint. A word of a name or a path also matches the
  question's word it abbreviates (`win` for "Windows", `regexp` for "regular expression": abbreviations.py);
- natural-language search (nls: BM25 over code chunks whose boundaries are the definitions), and among its
  chunks the definitions whose head (name, signature, docstring) holds the most question words, each word
  weighed by its rarity among those heads;
- keyword search: the identifiers and quoted strings, and the content words ANDed.

Their file rankings are fused by reciprocal rank. Files are weighed by kind: code first; tests, docs,
changelogs, CI files and vendored files are left out unless the question asks for their kind (tests when it
says test, docs when it says documentation, ...), configuration and examples weigh half. Each chosen file
gets a line range (the definition whose docstring matched, else the matched definition's span, else the nls
chunk, else a window around the matching lines), which is read back at its commit (`RepoService.read_file`):
only ranges that exist and that the actor may read are cited. The answer lists, per file, the range pinned
as `repo@commit:path#Lx-y`, why it was picked, and the few lines of it that hold the question's words, and
says plainly that no model wrote it.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import Stemmer

from codewell.agents.abbreviations import matcher
from codewell.agents.answers import AgentAnswer, AgentStats, Citation
from codewell.agents.naming import named_repositories, without_names
from codewell.codenav.service import CodeNavService
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, InvalidInput, NotFound, Unavailable
from codewell.nls.service import NlsHit, NlsService
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
# A definition named by a single word of the question (`Option`, `get_host`): a name, not an answer.
_W_WEAK_SYMBOL = 0.5
# Definitions whose head (signature, docstring or leading comment) holds most of the question's words.
_W_HEAD = 1.4
_STRONG_SYMBOL = 1.5
HEAD_LINES = 12
_W_EXACT_SYMBOL = 2.5
_W_NLS = 1.0
_W_IDENT = 0.9
_W_KEYWORD = 0.5
_W_PATH = 0.45
# The list of candidate files whose own name (not their folders') is made of abbreviations of the question's
# words (name_match).
_W_NAME = 0.5
# What a question stem matched only through an abbreviation counts in a file's name, against 1 as written.
_W_ABBREVIATED = 0.5
# When the question asks for tests: the share of the score of the code file a test file tests (`args.go` for
# `args_test.go`) that the test file gets. A name matched through abbreviations (`args` for "arguments") ranks
# the code file and its tests alike; the tests asked for should not fall behind the code they test.
_W_TESTED = 0.5
# The test file of a code file beside it: Go's `x_test.go`, Python's `test_x.py` and `x_test.py`, JavaScript's
# `x.test.js` and `x.spec.js`.
_TESTED = re.compile(
    r"(?:^|(?<=/))(?:test_(?P<py>[^/]+\.py)|(?P<stem>[^/]+?)(?:_test|\.test|\.spec)(?P<ext>\.[a-z]+))$"
)
_SYMBOL_LIMIT = 400
_STEMMER = Stemmer.Stemmer("english")

_QUOTED = re.compile(r"\"([^\"\n]{2,200})\"|(?<!\w)'([^'\n]{2,200})'(?!\w)|`([^`\n]{1,200})`")
_LITERAL = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]{2,}|[A-Z][a-z0-9]*(?:-[A-Z][A-Za-z0-9]*)+)(?![\w-])")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_TEST_PATH = re.compile(
    r"(^|/)(tests?|testing|spec|__tests__)(/|$)|(^|/)test_[^/]*$|_tests?\.[a-z]+$|\.(test|spec)\.[a-z]+$|conftest\.py$"
)
# Type stubs declare what the code beside them does: never where it is done.
_STUB = re.compile(r"\.pyi$|\.d\.[cm]?ts$")
_CODE = re.compile(
    r"\.(py|go|[cm]?[jt]sx?|rs|c|h|cc|cpp|cxx|hh|hpp|java|kt|scala|rb|php|cs|swift|m|mm|sh|bash|lua|pl|ex|exs|erl|hs|ml|"
    r"clj|dart|r|jl|zig|nim|v|sql)$",
    re.I,
)
_TEST_WORDS = frozenset({"test", "tests", "testing", "fixture", "fixtures", "spec", "specs", "conftest"})
# Files that are not where something is done, by kind: each is left out unless the question asks for its kind
# with one of these words (then it ranks like code).
_CHANGELOG = re.compile(r"(^|/)(change_?log|changes|history|news|releases?|release[-_]notes)(\.[a-z]+)?$", re.I)
_CI = re.compile(
    r"(^|/)(\.github|\.circleci|\.buildkite|\.gitlab)/|(^|/)(\.travis\.ya?ml|\.gitlab-ci\.ya?ml|appveyor\.ya?ml|"
    r"azure-pipelines\.ya?ml|jenkinsfile|\.cirrus\.ya?ml|codecov\.ya?ml|\.pre-commit-config\.yaml)$",
    re.I,
)
_DOCS = re.compile(
    r"\.(md|markdown|rst|txt|adoc|asciidoc|texi|[1-9])$|(^|/)doc\.go$|(^|/)(readme|license|licence|copying|authors|contributors|"
    r"notice|code_of_conduct|security|contributing)(\.[a-z]+)?$",
    re.I,
)
# A documentation folder holds docs, but its source files are code (cobra's doc/ generates man pages).
_DOCS_FOLDER = re.compile(r"(^|/)(docs?|documentation|man|site)/", re.I)
_VENDORED = re.compile(
    r"(^|/)(vendor|node_modules|third_party)/|\.min\.(js|css)$|(^|/)(package-lock\.json|yarn\.lock|go\.sum|pnpm-lock\.yaml)$"
)
_CONFIG = re.compile(r"\.(json|ya?ml|toml|ini|cfg|lock|xml|csv|svg|html?|css)$|(^|/)(makefile|dockerfile)$", re.I)
_EXAMPLE = re.compile(r"(^|/)(_?examples?|samples?|demos?|bench(marks?)?|_?fixtures?|testdata)/", re.I)
# Words that make a verb of another word and that names run together with it: "looked up" → `lookup`,
# "call back" → `callback`, "shut down" → `shutdown`, "log in" → `login`.
_PARTICLES = frozenset({"up", "down", "in", "out", "off", "over", "back"})
_KIND_SELECTORS = frozenset({"test", "tests", "testing", "doc", "docs", "documentation", "changelog", "changelogs"})
_KIND_WORDS = {
    "docs": frozenset({"doc", "docs", "documentation", "documented", "readme", "manual", "guide", "license"}),
    "changelog": frozenset({"changelog", "changelogs", "history", "release", "releases", "news"}),
    "ci": frozenset({"ci", "workflow", "workflows", "pipeline", "pipelines", "travis", "actions"}),
    "config": frozenset({"config", "configuration", "json", "yaml", "toml", "makefile", "dockerfile", "manifest"}),
    "example": frozenset({"example", "examples", "sample", "samples", "demo", "benchmark", "benchmarks"}),
}
# How much a file of each kind weighs against code when the question does not ask for its kind (None: left out).
_ASKED_PRIOR = 1.3
_KIND_PRIOR: dict[str, float | None] = {
    "code": 1.0,
    "test": None,
    "docs": None,
    "changelog": None,
    "ci": None,
    "vendored": None,
    "config": 0.5,
    "example": 0.5,
    "stub": 0.35,  # type stubs declare what the code beside them does
}
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
    # The kinds of files other than code the question asks for (`docs`, `changelog`, `ci`, `config`).
    asked_kinds: frozenset[str] = frozenset()
    # The content words in the question's order (adjacent ones may be contracted into one name: `regexp`).
    words: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.identifiers or self.quoted or self.keywords)

    @cached_property
    def abbreviated(self) -> Callable[[str], frozenset[str]]:
        """A word of a name or path (lower case) → the stems of the question's words it abbreviates."""
        return matcher(self.words)


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


def _scan(text: str, ignore: frozenset[str], identifiers: list[str], keywords: list[str]) -> tuple[set[str], list[str]]:
    """Appends the identifiers and content words of `text` (outside quotes) to `identifiers` and `keywords`;
    returns adjacent content words written as one name (compounds), and the content words in order with the
    particles that follow them ("looked up")."""
    compounds: set[str] = set()
    sequence: list[str] = []
    previous = ""
    for token in _TOKEN.findall(text):
        low = token.lower()
        if low in ignore:
            previous = ""
            continue
        particle = bool(previous) and low in _PARTICLES
        if particle:
            compounds.update({previous + low, _STEMMER.stemWord(previous) + low})
            sequence.append(low)
        if _is_identifier(token):
            identifiers.append(token)
            previous = ""
        elif low not in STOP_WORDS and len(low) > 2 and not low.isdigit():
            keywords.append(low)
            if not particle:
                sequence.append(low)
            if previous:
                compounds.update({previous + low, previous + _STEMMER.stemWord(low)})
            previous = low
        else:
            previous = ""
    return compounds, sequence


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
    # Header names and command-line flags are literal strings, as if quoted: `Access-Control-Allow-Methods`.
    quoted.extend(m.group(1) for m in _LITERAL.finditer(rest))
    rest = _LITERAL.sub(" ", rest)
    compounds, sequence = _scan(rest, ignore, identifiers, keywords)
    named: list[str] = []  # the words of the identifiers and quoted strings
    for text in (*identifiers, *quoted):
        named.extend(split_identifier(text) if _TOKEN.fullmatch(text) else re.findall(r"[a-z0-9]+", text.lower()))
    # A content word written with underscores (`__init__`) is searched as typed, and its words are question
    # words too: `_make_init` is named with `init`.
    named.extend(w for k in keywords if "_" in k for w in split_identifier(k))
    words = [*keywords, *named]
    typed = {w.lower() for w in _TOKEN.findall(question)}
    about_tests = bool(typed & _TEST_WORDS)
    asked = frozenset(kind for kind, kind_words in _KIND_WORDS.items() if typed & kind_words)
    # "Which tests check X", "where is the documentation of X": the words that ask for a kind of file select
    # files, like a repository's name; X is what to search for.
    kept = [w for w in keywords if w not in _KIND_SELECTORS]
    if kept:
        keywords = kept
        words = [w for w in words if w not in _KIND_SELECTORS]
        sequence = [w for w in sequence if w not in _KIND_SELECTORS]
    return Terms(
        tuple(dict.fromkeys(identifiers)),
        tuple(dict.fromkeys(quoted)),
        tuple(dict.fromkeys(keywords)),
        frozenset(_stems(words)),
        about_tests,
        frozenset(compounds),
        asked | ({"test"} if about_tests else set()),
        (*sequence, *(w for w in named if w not in STOP_WORDS and len(w) > 1)),
    )


@dataclass(frozen=True)
class Matched:
    """How the words of a name or a path match a question."""

    total: int  # their distinct stems
    parts: int  # how many of those match: the stem is a question stem, or the word abbreviates question words
    stems: frozenset[str]  # the question's stems matched (`regexp` matches two: regular, expression)
    abbreviated: frozenset[str]  # those matched only through an abbreviation
    # The stems matched as written count 1, those only abbreviated _W_ABBREVIATED: an abbreviation may stand
    # for another word (`gen`: generate or generation), a word as written is the word.
    weight: float


def matched_words(words: Iterable[str], terms: Terms) -> Matched:
    """How the words of a name or a path (`split_identifier`'s) match the question `terms`."""
    own: dict[str, str] = {}
    for w in words:
        if w not in STOP_WORDS and len(w) > 1:
            own.setdefault(_STEMMER.stemWord(w), w)
    parts = 0
    exact: set[str] = set()
    short: set[str] = set()
    for stem, word in own.items():
        if stem in terms.stems:
            exact.add(stem)
            parts += 1
        else:
            stands_for = terms.abbreviated(word) & terms.stems
            if stands_for:
                short |= stands_for
                parts += 1
    weight = len(exact) + _W_ABBREVIATED * len(short - exact)
    return Matched(len(own), parts, frozenset(exact | short), frozenset(short - exact), weight)


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
    # The definition whose head (signature, docstring) holds most question words, and those words.
    head: tuple[str, list[str]] | None = None


@dataclass
class _Run:
    runtime: Runtime
    actor: Actor
    terms: Terms
    deadline: float
    files: dict[tuple[str, str], _File] = field(default_factory=dict)
    calls: int = 0
    notes: list[str] = field(default_factory=list)
    # The repositories searched (at their commits); empty: every readable repository.
    targets: list[ResolvedRevision] = field(default_factory=list)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def skip(self, path: str) -> bool:
        """Whether a search's hit in `path` is left out: a kind of file the question does not ask for."""
        return kind_prior(path, self.terms) is None

    def file(self, repo: str, commit: str, path: str) -> _File:
        key = (repo, path)
        found = self.files.get(key)
        if found is None:
            found = self.files[key] = _File(repo, commit, path)
        return found

    def rank(self, listing: str, rank: int, repo: str, commit: str, path: str) -> _File:
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
    # The repositories the question names are where to look, never what to look for: without a scope, the
    # searches keep to them (to every readable repository when it names none).
    targets = [scope] if scope is not None else _named_targets(runtime, actor, question)
    names = [t.repo.name for t in targets]
    ignore = frozenset(w for name in names for w in _name_words(name))
    terms = extract_terms(without_names(question, names), ignore=ignore)
    if terms.empty:
        raise InvalidInput(
            "the question has no identifier, quoted string or content word to search for",
            hint="name what you are looking for, e.g. a function, a class, an error message or what the code does",
        )
    run = _Run(runtime, actor, terms, deadline if deadline is not None else started + DEFAULT_BUDGET_SECONDS)
    run.targets = targets
    _symbols(run, targets or _readable_targets(run))
    _identifiers(run)
    _nls(run)
    _keywords(run)
    chosen = _fuse(run)[: max(1, max_files)]
    quotes = _cite(run, chosen)
    sources = [q.citation for q in quotes]
    text = _summary(run, scope, quotes)
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


def _repo_filter(run: _Run) -> str:
    """The keyword-search filter of the searched repositories ("" for every readable one)."""
    if not run.targets:
        return ""
    if len(run.targets) == 1:
        (target,) = run.targets
        return f"repo:^{re.escape(target.repo.name)}$ rev:{target.commit} "
    return "repo:^(?:" + "|".join(re.escape(t.repo.name) for t in run.targets) + ")$ "


def _named_targets(runtime: Runtime, actor: Actor, question: str) -> list[ResolvedRevision]:
    """The default branches of the readable repositories `question` names (none: it names none)."""
    repos = runtime.get(RepoService)
    out: list[ResolvedRevision] = []
    for ref in named_repositories(question, repos.readable_refs(actor))[:MAX_SCOPE_REPOS]:
        try:
            out.append(repos.resolve(actor, ref.name))
        except (NotFound, Unavailable, InvalidInput):
            continue
    return out


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
            matched = matched_words(split_identifier(name), terms)
            hits = len(matched.stems)
            if hits:
                coverage = matched.parts / matched.total
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
    terms = run.terms

    def include(path: str) -> bool:
        return kind_prior(path, terms) is not None

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
    # Each file is ranked once, by its best definition: in the list of exact names, of names made of several
    # question words, or of names holding a single one (weak).
    order: dict[tuple[str, str], tuple[str, int]] = {}
    counts: dict[str, int] = {}
    for value, target, s in scored:
        if value < 0.5:
            continue
        key = (target.repo.name, s.path)
        if key not in order:
            listing = "exact" if value >= 10 else "symbol" if value >= _STRONG_SYMBOL else "weak"
            order[key] = (listing, counts.get(listing, 0))
            counts[listing] = order[key][1] + 1
        f = run.rank(*order[key], target.repo.name, target.commit, s.path)
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


def _identifiers(run: _Run) -> None:
    """Identifiers and quoted strings, literally: the files that mention them, definitions first (search's
    ranking puts defining lines ahead)."""
    wanted = [*run.terms.identifiers, *run.terms.quoted]
    if not wanted:
        return
    query = _repo_filter(run) + "(" + " OR ".join(_literal(w) for w in wanted) + ")"
    for rank, (repo, commit, path, lines) in enumerate(_search(run, query)):
        if run.skip(path):
            continue
        f = run.rank("ident", rank, repo, commit, path)
        for n, _text in lines[:20]:
            f.lines[n] = f.lines.get(n, 0.0) + 1.0


def _keywords(run: _Run) -> None:
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
        query = _repo_filter(run) + " ".join(_literal(w) for w in group) + " count:100"
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
        if run.skip(path):
            continue
        f = run.rank("keyword", rank, repo, commit, path)
        rank += 1
        for n in lines[key]:
            f.lines[n] = f.lines.get(n, 0.0) + 0.3


def _nls(run: _Run) -> None:
    """Natural-language search over code chunks (nls), with its own stemming and boosts."""
    if run.left() <= 0.05:
        return
    words = [*run.terms.identifiers, *run.terms.quoted, *run.terms.keywords]
    text = " ".join(re.sub(r"[\"'`():]", " ", w) for w in words)
    query = f"{text} count:50"
    if len(run.targets) == 1:
        query += f" repo:{run.targets[0].repo.name} rev:{run.targets[0].commit}"
    elif run.targets:
        query += " repo:^(?:" + "|".join(re.escape(t.repo.name) for t in run.targets) + ")$"
    run.calls += 1
    try:
        found = run.runtime.get(NlsService).search(run.actor, query)
    except CodewellError:
        return
    order: dict[tuple[str, str], int] = {}
    heads: list[tuple[set[str], int, NlsHit]] = []
    for hit in found.hits:
        if run.skip(hit.path):
            continue
        key = (hit.repo, hit.path)
        if key not in order:
            order[key] = len(order)
        f = run.rank("nls", order[key], hit.repo, hit.commit, hit.path)
        if len(f.chunks) < 3:
            f.chunks.append((hit.start, hit.end, hit.symbols))
        if hit.symbols:
            said = _said(" ".join(hit.lines[:HEAD_LINES]), run.terms)
            if len(said) >= min(2, len(run.terms.stems)):  # one word of several is a weak hint
                heads.append((said, order[key], hit))
    _heads(run, heads)


def _heads(run: _Run, found: list[tuple[set[str], int, NlsHit]]) -> None:
    """Rank files by their definition whose head (name, signature, docstring) holds the most question words,
    each weighed by how rare it is among the heads found (a word of the question that every head holds says
    little); ties: nls's order. That definition's chunk is cited first."""
    weight = {
        s: math.log(1.0 + (1 + len(found)) / (1 + sum(s in said for said, _o, _h in found))) for s in run.terms.stems
    }
    total = sum(weight.values()) or 1.0
    heads = sorted(((sum(weight[s] for s in said) / total, o, h) for said, o, h in found), key=lambda t: (-t[0], t[1]))
    ranked: dict[tuple[str, str], int] = {}
    for covered, _order, hit in heads:
        key = (hit.repo, hit.path)
        if key in ranked or covered < _MIN_HEAD_COVERAGE:
            continue
        ranked[key] = len(ranked)
        f = run.rank("head", ranked[key], hit.repo, hit.commit, hit.path)
        said = _line_stems(" ".join(hit.lines[:HEAD_LINES]))
        words = [w for w in (*run.terms.identifiers, *run.terms.keywords) if _line_stems(w) & said]
        f.head = (hit.symbols[0], words)
        if (hit.start, hit.end, hit.symbols) in f.chunks:
            f.chunks.remove((hit.start, hit.end, hit.symbols))
        f.chunks.insert(0, (hit.start, hit.end, hit.symbols))


_MIN_HEAD_COVERAGE = 0.3


# --- fusion and ranges -------------------------------------------------------------------------------------

_WEIGHTS = {
    "exact": _W_EXACT_SYMBOL,
    "symbol": _W_SYMBOL,
    "weak": _W_WEAK_SYMBOL,
    "head": _W_HEAD,
    "nls": _W_NLS,
    "ident": _W_IDENT,
    "keyword": _W_KEYWORD,
    "name": _W_NAME,
}


def file_kind(path: str) -> str:
    """What a file is, by its path: `code`, or `test`, `docs`, `changelog`, `ci`, `vendored`, `config`,
    `example`, `stub`."""
    if _VENDORED.search(path):
        return "vendored"
    if _CI.search(path):
        return "ci"
    if _CHANGELOG.search(path):
        return "changelog"
    if _TEST_PATH.search(path):
        return "test"
    if _STUB.search(path):
        return "stub"
    if _DOCS.search(path) or (_DOCS_FOLDER.search(path) and not _CODE.search(path)):
        return "docs"
    if _EXAMPLE.search(path):
        return "example"
    if _CONFIG.search(path):
        return "config"
    return "code"


def kind_prior(path: str, terms: Terms) -> float | None:
    """The weight of `path` against code for this question: 1.0 for code and for the kinds the question asks
    for (tests when it says test, docs when it says documentation, ...), less for configuration and examples,
    None for the kinds left out (tests, docs, changelogs, CI files, vendored files)."""
    kind = file_kind(path)
    if kind == "code":
        return 1.0
    if kind in terms.asked_kinds or (kind == "stub" and "docs" in terms.asked_kinds):
        return _ASKED_PRIOR  # what the question asks for comes before the code around it
    return _KIND_PRIOR[kind]


def _path_coverage(path: str, terms: Terms) -> float:
    if not terms.stems:
        return 0.0
    bare = re.sub(r"\.[A-Za-z0-9]+$", "", path)
    parts = set(_stems(split_identifier(bare.replace("/", "_"))))
    compound = 1.0 if bare.rsplit("/", 1)[-1].replace("_", "").lower() in terms.compounds else 0.0
    # Words as written only: a file named with abbreviations of the question's words is ranked by the "name"
    # list (name_match), once.
    return len(parts & terms.stems) / len(terms.stems) + compound


def name_match(path: str, terms: Terms) -> float:
    """How well a file's own name (folders and extension left out, and words saying it is a test) is made of
    abbreviations of the question's words (`command_win.go` for a question about Windows): the question's
    stems it matches plus the share of its words that match, when at least half of them do and one is an
    abbreviation; else 0. A name made of the question's words as written needs no help: nls weighs the words
    of a path (`nls.index.PATH_BOOST`), but not the words they abbreviate."""
    base = re.sub(r"\.[A-Za-z0-9.]+$", "", path.rsplit("/", 1)[-1])
    words = [w for w in split_identifier(base.replace("-", "_")) if w not in _TEST_WORDS]
    matched = matched_words(words, terms)
    if not matched.abbreviated or matched.parts * 2 < matched.total:
        return 0.0
    return matched.weight + matched.parts / matched.total


def code_under_test(path: str) -> str | None:
    """The code file beside `path` that it tests, by name (`args_test.go` → `args.go`); None: not a test file
    named after one."""
    m = _TESTED.search(path)
    if m is None:
        return None
    name = m.group("py") or m.group("stem") + m.group("ext")
    return path[: m.start()] + name


def _fuse(run: _Run) -> list[_File]:
    # Among the files the searches found, those named with abbreviations of the question's words, best first.
    named = sorted(
        ((value, f) for f in run.files.values() if f.ranks and (value := name_match(f.path, run.terms)) > 0),
        key=lambda t: (-t[0], t[1].repo, t[1].path),
    )
    for rank, (_value, f) in enumerate(named):
        f.ranks["name"] = rank
    for f in run.files.values():
        score = sum(_WEIGHTS[name] / (RRF_K + rank) for name, rank in f.ranks.items())
        score += _W_PATH * _path_coverage(f.path, run.terms) * (1.0 if f.ranks else 0.0)
        f.score = score * (kind_prior(f.path, run.terms) or 0.0)
    if "test" in run.terms.asked_kinds:
        scores = {(f.repo, f.path): f.score for f in run.files.values()}
        for f in run.files.values():
            subject = code_under_test(f.path)
            if subject is not None:
                f.score += _W_TESTED * scores.get((f.repo, subject), 0.0)
    return sorted(run.files.values(), key=lambda f: (-f.score, f.repo, f.path))


def _ranges(run: _Run, f: _File) -> list[tuple[int, int, str]]:
    """Up to two (start, end, note) line ranges of `f`: definitions first, then nls chunks, then windows."""
    out: list[tuple[int, int, str]] = []
    if f.head is not None and f.chunks:  # the definition whose docstring says what the question asks
        start, end, symbols = f.chunks[0]
        # unless a definition named like the question lies within it: its own span is cited instead
        if not any(value >= 1.0 and start <= s.line <= end for value, s in f.symbols):
            out.append((start, end, ", ".join(symbols[:3])))
    for value, s in sorted(f.symbols, key=lambda t: (-t[0], t[1].line))[: 2 - len(out)]:
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
            merged[-1] = (a, max(b, end), n if not note or note in n else note if n in note else f"{n}; {note}")
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


@dataclass(frozen=True)
class _Quote:
    """One cited range as read back, with the file it belongs to."""

    citation: Citation
    lines: list[str]
    file: _File


def _cite(run: _Run, chosen: list[_File]) -> list[_Quote]:
    """The ranges of the chosen files that exist at their commit (read back as the actor), in rank order."""
    repos = run.runtime.get(RepoService)
    out: list[_Quote] = []
    for f in chosen:
        for start, end, note in _ranges(run, f):
            run.calls += 1
            try:
                content = repos.read_file(run.actor, f.repo, f.path, start, end, f.commit)
            except CodewellError:
                continue
            if content.binary or not content.lines:
                continue
            cited = Citation(f.repo, content.commit, f.path, content.start_line, content.end_line, note)
            out.append(_Quote(cited, content.lines, f))
    return out


# --- the summary -------------------------------------------------------------------------------------------

# The lines quoted per file, and the characters kept of each quoted line (a cut line ends in `…`).
QUOTE_LINES = 8
QUOTE_CHARS = 160


def _summary(run: _Run, scope: ResolvedRevision | None, quotes: list[_Quote]) -> str:
    """Per file, best first: its pinned range, why it was picked, and the few lines of it that matter."""
    terms = run.terms
    if scope is not None:
        where = f"{scope.repo.name}@{scope.commit[:12]}"
    elif run.targets:
        where = ", ".join(t.repo.name for t in run.targets)
    else:
        where = "the repositories you can read"
    if not quotes:
        return (
            f"Nothing in {where} matched the identifiers or words of the question "
            f"({', '.join(_asked(terms)) or 'none'}). Try other names for what you are looking for."
        )
    lines = [f"Best matches in {where} for: {', '.join(_asked(terms))}", ""]
    by_file: dict[tuple[str, str], list[_Quote]] = {}
    for q in quotes:
        by_file.setdefault((q.citation.repo, q.citation.path), []).append(q)
    for number, ((repo, path), found) in enumerate(by_file.items(), start=1):
        first = found[0]
        c = first.citation
        spans = ", ".join(f"L{q.citation.start_line}-{q.citation.end_line}" for q in found)
        names = list(
            dict.fromkeys(
                q.citation.note
                for q in found
                if q.citation.note and q.citation.note not in ("matching lines", "file name")
            )
        )
        what = f" – {'; '.join(f'`{n}`' for n in names)}" if names else ""
        prefix = f"{repo} – " if scope is None else ""
        lines.append(f"{number}. {prefix}`{path}` ({spans}){what}")
        lines.append(f"   Why: {_why(run, first.file)}.")
        lines.append(f"   `{c.pin}`")
        lines.append("   ```")
        lines.extend(f"   {text}" for text in quote(first.lines, c.start_line, terms))
        lines.append("   ```")
    return "\n".join(lines)


def _said(text: str, terms: Terms) -> set[str]:
    """The question's stems that `text` holds, as words or abbreviated (`regexp`, `lookup`)."""
    return set(matched_words((w for token in _TOKEN.findall(text) for w in split_identifier(token)), terms).stems)


def _line_stems(text: str) -> set[str]:
    return set(_stems([w for token in _TOKEN.findall(text) for w in split_identifier(token)]))


def quote(lines: list[str], start_line: int, terms: Terms, limit: int = QUOTE_LINES) -> list[str]:
    """At most `limit` numbered lines of a cited range: its head (the definition's line and the next two,
    usually the docstring), then the lines holding the most question words, in file order; `…` marks
    skipped lines and cut ones."""
    if len(lines) <= limit:
        keep = list(range(len(lines)))
    else:
        head = [i for i in range(min(3, len(lines))) if lines[i].strip()]
        scored = sorted(
            (i for i in range(len(head), len(lines)) if lines[i].strip()),
            key=lambda i: (-len(_line_stems(lines[i]) & terms.stems), i),
        )
        keep = sorted({*head, *(i for i in scored[: limit - len(head)] if _line_stems(lines[i]) & terms.stems)})
        for i in range(len(lines)):  # too few lines with question words: more of the range's start
            if len(keep) >= limit:
                break
            if i not in keep:
                keep = sorted({*keep, i})
    out: list[str] = []
    previous = -1
    for i in keep:
        if previous >= 0 and i > previous + 1:
            out.append("…")
        text = lines[i].rstrip().expandtabs(4)
        if len(text) > QUOTE_CHARS:
            text = text[: QUOTE_CHARS - 1] + "…"
        out.append(f"{start_line + i}: {text}")
        previous = i
    return out


def _why(run: _Run, f: _File) -> str:
    """Why `f` was picked, from what the searches said about it."""
    terms = run.terms
    reasons: list[str] = []
    strong = [s for value, s in sorted(f.symbols, key=lambda t: (-t[0], t[1].line)) if value >= 1.0]
    if "exact" in f.ranks and strong:
        reasons.append(f"defines `{strong[0].name}`, named in the question")
    elif strong:
        reasons.append(f"defines {', '.join(f'`{s.name}`' for s in strong[:2])}, named with the question's words")
    if f.head is not None:
        symbol, words = f.head
        reasons.append(f"the head of `{symbol}` (signature, docstring) says {', '.join(words[:6])}")
    if "ident" in f.ranks:
        named = [*terms.identifiers, *terms.quoted][:3]
        reasons.append("mentions " + ", ".join(f"`{n}`" for n in named))
    if "nls" in f.ranks and f.head is None:
        reasons.append(f"natural-language search ranks it #{f.ranks['nls'] + 1}")
    if "keyword" in f.ranks:
        reasons.append("holds the words " + ", ".join(sorted(terms.keywords, key=len, reverse=True)[:MAX_AND_WORDS]))
    if _path_coverage(f.path, terms) > 0:
        reasons.append("its path matches the question")
    elif "name" in f.ranks:
        reasons.append("its name abbreviates words of the question")
    return "; ".join(reasons) or "its name"


def _asked(terms: Terms) -> list[str]:
    return [*(f"`{i}`" for i in terms.identifiers), *(f'"{q}"' for q in terms.quoted), *terms.keywords][:12]
