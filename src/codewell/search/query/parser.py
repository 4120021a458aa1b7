"""The search query language: one parser from query text to a `Query` (pattern tree plus filters).

Pure code, no I/O. Grammar (AND binds tighter than OR; adjacent terms are ANDed):
    or   := and (OR and)*
    and  := unary ([AND] unary)*
    unary:= NOT unary | '(' or ')' | term
    term := word | "phrase" | /regex/
Filters (`repo:`, `file:`, `lang:`, ...) may appear anywhere and apply to the whole query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from codewell.core.errors import InvalidInput
from codewell.search.query.regex import compile_regex

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_NESTING",
    "MAX_QUERY_LENGTH",
    "MAX_TERMS",
    "MAX_TIMEOUT",
    "And",
    "Node",
    "Not",
    "Or",
    "Pattern",
    "Query",
    "RepoFilter",
    "parse_query",
]

DEFAULT_TIMEOUT = 10.0
MAX_TIMEOUT = 60.0
MAX_QUERY_LENGTH = 16_384
# Search terms per query (after identical ones are merged): each costs a trigram lookup and a verification
# pass, ~8.5 ms on a big repository, so thousands of terms took half a minute (#22).
MAX_TERMS = 100
# Parentheses and NOT nest at most this deep: the parser and every walk over the tree recurse per level.
MAX_NESTING = 32

_FIELD_ALIASES = {
    "repo": "repo",
    "r": "repo",
    "file": "file",
    "f": "file",
    "path": "file",
    "rev": "rev",
    "revision": "rev",
    "count": "count",
    "lang": "lang",
    "l": "lang",
    "language": "lang",
    "case": "case",
    "type": "type",
    "timeout": "timeout",
    "patterntype": "patterntype",
    # `sym:NAME` is a search term matched against symbol names only: shorthand for `type:symbol NAME`.
    "sym": "sym",
    "symbol": "sym",
}
_FIELD_RE = re.compile(r"(-?)([A-Za-z]+):")
_KEYWORDS = {"and", "or", "not"}
_GLOB_RE = re.compile(r"(^\*|\*\.|\*\*|\*$|^\*\w|\{[^}]*,[^}]*\})")


@dataclass(frozen=True, slots=True)
class Pattern:
    """A leaf: `value` is an RE2 regex (literals and phrases are escaped); `text` is what the user typed."""

    value: str
    text: str
    regex: bool
    position: int


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    child: Node


Node = Pattern | And | Or | Not


@dataclass(frozen=True, slots=True)
class RepoFilter:
    """An unanchored regex on repository names, with an optional revision (`repo:x@rev`)."""

    pattern: str
    revisions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Query:
    """A parsed query: a pattern tree (None for filter-only queries) and the filters around it."""

    expr: Node | None
    repos: tuple[RepoFilter, ...] = ()
    exclude_repos: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    exclude_files: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    exclude_languages: tuple[str, ...] = ()
    revisions: tuple[str, ...] = ()
    count: int | None = None
    count_all: bool = False
    case_sensitive: bool = False
    type: str = "file"
    timeout: float = DEFAULT_TIMEOUT
    regex_default: bool = False
    warnings: tuple[str, ...] = field(default=())

    def patterns(self, *, positive_only: bool = True) -> list[Pattern]:
        """Every leaf pattern, in query order (without negated ones unless asked)."""
        found: list[Pattern] = []

        def walk(node: Node, negated: bool) -> None:
            if isinstance(node, Pattern):
                if not (negated and positive_only):
                    found.append(node)
            elif isinstance(node, Not):
                walk(node.child, not negated)
            else:
                for child in node.children:
                    walk(child, negated)

        if self.expr is not None:
            walk(self.expr, False)
        return found


def _error(message: str, query: str, position: int, hint: str) -> InvalidInput:
    """An InvalidInput whose message points at `position` (1-based column) in the query."""
    snippet = query if len(query) <= 80 else query[max(0, position - 40) : position + 40]
    return InvalidInput(f"{message} at column {position + 1}: {snippet!r}", hint=hint)


# Tokens -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "(", ")", "and", "or", "not", "term", "field"
    value: str
    position: int
    regex: bool = False
    quoted: bool = False
    name: str = ""
    negated: bool = False


def _read_quoted(query: str, start: int, quote: str) -> tuple[str, int]:
    """Read a quoted string starting at `start` (the quote); return (unescaped text, index after it)."""
    out: list[str] = []
    i = start + 1
    while i < len(query):
        ch = query[i]
        if ch == "\\" and i + 1 < len(query) and query[i + 1] in (quote, "\\"):
            out.append(query[i + 1])
            i += 2
            continue
        if ch == quote:
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    raise _error(
        "unbalanced quote",
        query,
        start,
        f"close the {quote} quote, or escape a literal quote as \\{quote}",
    )


def _read_regex(query: str, start: int) -> tuple[str, int]:
    """Read `/regex/` starting at the opening slash; the closing slash must end the token."""
    i = start + 1
    while i < len(query):
        ch = query[i]
        if ch == "\\" and i + 1 < len(query):
            i += 2
            continue
        if ch == "/" and (i + 1 == len(query) or query[i + 1].isspace() or query[i + 1] == ")"):
            raw = query[start + 1 : i]
            # `\/` is how a slash is written inside /.../; RE2 would also accept it, but unescape for clarity.
            return raw.replace("\\/", "/"), i + 1
        i += 1
    raise _error("unterminated regex", query, start, "end the regex with a closing / (write \\/ for a slash)")


def _read_word(query: str, start: int, group_depth: int) -> tuple[str, int]:
    """Read a bare word; a `)` ends it only when it closes a group (parentheses inside words are kept)."""
    i = start
    depth = 0
    while i < len(query) and not query[i].isspace():
        ch = query[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0 and group_depth > 0:
                break
            depth = max(0, depth - 1)
        i += 1
    return query[start:i], i


def _tokenize(query: str, *, regex_mode: bool = False) -> list[_Tok]:
    """The query's tokens. In `regex_mode` (patterntype:regexp) a `(` opens a group only around AND/OR/NOT, and a
    stray `)` is regex text: `func (c \\*Command) Execute` is one regex, not a group (see _merge_regex_words)."""
    tokens: list[_Tok] = []
    depth = 0
    i = 0
    n = len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
            continue
        if regex_mode and ((ch == "(" and not _is_group(query, i)) or (ch == ")" and depth == 0)):
            start = i
            word, i = _read_word(query, i, depth)
            tokens.append(_Tok("term", word, start))
            continue
        if ch == "(":
            # `(` starts a group only when followed by something that is not a word character run to `)`:
            # `foo()` stays a word, `(a OR b)` is a group.
            depth += 1
            tokens.append(_Tok("(", "(", i))
            i += 1
            continue
        if ch == ")":
            if depth == 0:
                raise _error("unbalanced parenthesis", query, i, "remove the ) or add a matching (")
            depth -= 1
            tokens.append(_Tok(")", ")", i))
            i += 1
            continue
        if ch == '"':
            text, i = _read_quoted(query, i, '"')
            tokens.append(_Tok("term", text, i, quoted=True))
            continue
        if ch == "/" and i + 1 < n and not query[i + 1].isspace():
            start = i
            text, i = _read_regex(query, i)
            tokens.append(_Tok("term", text, start, regex=True))
            continue
        m = _FIELD_RE.match(query, i)
        if m and m.group(2).lower() in _FIELD_ALIASES:
            tok, i = _read_field(query, m, depth)
            tokens.append(tok)
            continue
        start = i
        word, i = _read_word(query, i, depth)
        if word.lower() in _KEYWORDS:
            tokens.append(_Tok(word.lower(), word, start))
        else:
            tokens.append(_Tok("term", word, start))
    return tokens


def _is_group(query: str, start: int) -> bool:
    """Whether the `(` at `start` groups boolean terms: its matching `)` encloses a word AND, OR or NOT."""
    depth = 0
    i = start
    while i < len(query):
        ch = query[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                inside = query[start + 1 : i].replace("(", " ").replace(")", " ")
                return any(word.lower() in _KEYWORDS for word in inside.split())
        i += 1
    return False  # never closed: regex text (RE2 then reports the missing parenthesis)


def _merge_regex_words(query: str, tokens: list[_Tok]) -> list[_Tok]:
    """patterntype:regexp: bare words next to each other (no operator, filter, quote or /regex/ between) are one
    regex with the query's own whitespace in it, as typed. Splitting them made `func (c \\*Command) Execute`
    three terms ANDed anywhere in a file (#32)."""
    out: list[_Tok] = []
    for tok in tokens:
        prev = out[-1] if out else None
        if prev is not None and _bare(prev) and _bare(tok):
            end = tok.position + len(tok.value)
            out[-1] = _Tok("term", query[prev.position : end], prev.position)
        else:
            out.append(tok)
    return out


def _bare(tok: _Tok) -> bool:
    """A word typed as is (its value is the query's text from its position): not quoted, not /.../, not sym:."""
    return tok.kind == "term" and not tok.quoted and not tok.regex and not tok.name


def _read_field(query: str, m: re.Match[str], depth: int) -> tuple[_Tok, int]:
    """Read `name:value` (the value may be quoted); `sym:value` becomes a search term (see _sym_term)."""
    start, i, n = m.start(), m.end(), len(query)
    if i < n and query[i] in "\"'":
        value, i = _read_quoted(query, i, query[i])
    else:
        j = i
        while j < n and not query[j].isspace() and not (query[j] == ")" and depth > 0):
            j += 1
        value, i = query[i:j], j
    name = _FIELD_ALIASES[m.group(2).lower()]
    if name == "sym":
        return _sym_term(query, value, start, negated=m.group(1) == "-"), i
    return _Tok("field", value, start, name=name, negated=m.group(1) == "-"), i


# Parser --------------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, query: str, tokens: list[_Tok], regex_default: bool) -> None:
        self.query = query
        self.tokens = tokens
        self.i = 0
        self.regex_default = regex_default
        self.depth = 0

    def peek(self) -> _Tok | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def parse(self) -> Node | None:
        if not self.tokens:
            return None
        node = self.parse_or()
        tok = self.peek()
        if tok is not None:
            raise _error("unbalanced parenthesis", self.query, tok.position, "remove the ) or add a matching (")
        return node

    def parse_or(self) -> Node:
        children = [self.parse_and()]
        while (tok := self.peek()) is not None and tok.kind == "or":
            self.i += 1
            if self.peek() is None or self.peek().kind in (")", "or", "and"):  # type: ignore[union-attr]
                raise _error("OR needs a term on both sides", self.query, tok.position, "remove the trailing OR")
            children.append(self.parse_and())
        return _combine(Or, children)

    def parse_and(self) -> Node:
        children = [self.parse_unary()]
        while (tok := self.peek()) is not None and tok.kind not in ("or", ")"):
            if tok.kind == "and":
                self.i += 1
                nxt = self.peek()
                if nxt is None or nxt.kind in (")", "or", "and"):
                    raise _error("AND needs a term on both sides", self.query, tok.position, "remove the AND")
            children.append(self.parse_unary())
        return _combine(And, children)

    def nest(self, tok: _Tok) -> None:
        """Enter a NOT or a group, refusing the level past MAX_NESTING (before recursing into it)."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _error(
                f"the query nests parentheses and NOT more than {MAX_NESTING} levels deep",
                self.query,
                tok.position,
                "remove redundant parentheses (AND binds tighter than OR) and double negations",
            )

    def parse_unary(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise _error("expected a term", self.query, len(self.query), "finish the query after the operator")
        if tok.kind == "not":
            self.i += 1
            if self.peek() is None or self.peek().kind in (")", "or", "and"):  # type: ignore[union-attr]
                raise _error("NOT needs a term after it", self.query, tok.position, "write NOT <term>")
            self.nest(tok)
            child = self.parse_unary()
            self.depth -= 1
            return Not(child)
        if tok.kind == "(":
            self.i += 1
            if (nxt := self.peek()) is not None and nxt.kind == ")":
                raise _error("empty parentheses", self.query, tok.position, "put a term inside ( ) or remove them")
            self.nest(tok)
            node = self.parse_or()
            self.depth -= 1
            close = self.peek()
            if close is None or close.kind != ")":
                raise _error("unbalanced parenthesis", self.query, tok.position, "add the missing )")
            self.i += 1
            return node
        if tok.kind in ("and", "or"):
            raise _error(
                f"{tok.value.upper()} needs a term on both sides", self.query, tok.position, "remove the operator"
            )
        if tok.kind == ")":
            raise _error("unbalanced parenthesis", self.query, tok.position, "remove the ) or add a matching (")
        self.i += 1
        return _pattern(self.query, tok, self.regex_default)


def _combine(kind: type[And] | type[Or], children: list[Node]) -> Node:
    """`kind` of `children` with identical subtrees merged (`a a a` is `a`: the same matches, one pass)."""
    unique: dict[object, Node] = {}
    for child in children:
        unique.setdefault(_shape(child), child)
    kept = list(unique.values())
    return kept[0] if len(kept) == 1 else kind(tuple(kept))


def _shape(node: Node) -> object:
    """What a subtree matches, without the positions of its terms (equal shapes match the same lines)."""
    if isinstance(node, Pattern):
        return ("pattern", node.value, node.regex)
    if isinstance(node, Not):
        return ("not", _shape(node.child))
    return (type(node).__name__, tuple(_shape(c) for c in node.children))


def _pattern(query: str, tok: _Tok, regex_default: bool) -> Pattern:
    if tok.regex or (regex_default and not tok.quoted):
        check_regex(tok.value, query, tok.position)
        return Pattern(tok.value, tok.value, True, tok.position)
    return Pattern(re.escape(tok.value), tok.value, False, tok.position)


def check_regex(pattern: str, query: str, position: int) -> None:
    """Raise InvalidInput (pointing at `position`) when RE2 rejects `pattern`."""
    try:
        compile_regex(pattern, case_sensitive=True)
    except InvalidInput as exc:
        raise _error(exc.message, query, position, exc.hint or "fix the regex (RE2 syntax)") from None


# Filters -------------------------------------------------------------------------------------------


@dataclass
class _Opts:
    repos: list[RepoFilter] = field(default_factory=list)
    exclude_repos: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    exclude_files: list[str] = field(default_factory=list)
    languages: list[str] = field(default_factory=list)
    exclude_languages: list[str] = field(default_factory=list)
    revisions: tuple[str, ...] = ()
    rev_tok: _Tok | None = None
    count: int | None = None
    count_all: bool = False
    case_sensitive: bool = False
    type: str = "file"
    timeout: float = DEFAULT_TIMEOUT


def parse_query(text: str, *, regex_default: bool = False) -> Query:
    """Parse `text` into a Query, or raise InvalidInput naming the position and the fix."""
    if len(text) > MAX_QUERY_LENGTH:
        raise InvalidInput(
            f"query is too long ({len(text)} characters, at most {MAX_QUERY_LENGTH})",
            hint="shorten the query: search for fewer or shorter terms, or split it into several queries",
        )
    if not text.strip():
        raise InvalidInput("empty query", hint='type a search term, e.g. mutex_lock or "exact phrase" or /regex/')
    tokens, regex_default = _tokens(text, regex_default)
    fields = [t for t in tokens if t.kind == "field"]
    rest = [t for t in tokens if t.kind != "field"]
    opts = _Opts()
    if any(t.name == "sym" for t in rest):
        opts.type = "symbol"
    for tok in fields:
        _apply_field(text, tok, opts)
    expr = _Parser(text, rest, regex_default).parse()
    distinct = len({(p.value, p.regex) for p in _leaves(expr)})
    if distinct > MAX_TERMS:
        raise InvalidInput(
            f"too many search terms ({distinct} different ones, at most {MAX_TERMS})",
            hint="search for fewer terms (split the search into several queries), or use one /regex/",
        )
    repos = opts.repos
    if opts.rev_tok is not None:
        if not repos:
            raise _error(
                "rev: needs repo:", text, opts.rev_tok.position, "add repo:<name> (rev: only works with repo:)"
            )
        if any(r.revisions for r in repos):
            raise _error(
                "rev: given twice (also as repo:x@rev)", text, opts.rev_tok.position, "use either repo:x@rev or rev:"
            )
        repos = [RepoFilter(r.pattern, opts.revisions) for r in repos]
    if expr is None and not opts.files and opts.type != "path":
        raise InvalidInput(
            "the query has only filters and no search pattern",
            hint="add a search term (or file:<regex> to list matching files)",
        )
    return Query(
        expr=expr,
        repos=tuple(repos),
        exclude_repos=tuple(opts.exclude_repos),
        files=tuple(opts.files),
        exclude_files=tuple(opts.exclude_files),
        languages=tuple(opts.languages),
        exclude_languages=tuple(opts.exclude_languages),
        revisions=opts.revisions,
        count=opts.count,
        count_all=opts.count_all,
        case_sensitive=opts.case_sensitive,
        type=opts.type,
        timeout=opts.timeout,
        regex_default=regex_default,
    )


def _tokens(text: str, regex_default: bool) -> tuple[list[_Tok], bool]:
    """The query's tokens and whether bare words are regexes (the caller's default or a patterntype: field).

    Which tokenizer applies depends on a field inside the query, so it is tokenized as keywords first; text
    only valid as regex (`foo( )`) fails that pass and is tried as regex text before the error is shown."""
    try:
        tokens = _tokenize(text, regex_mode=regex_default)
    except InvalidInput as exc:
        if regex_default:
            raise
        try:
            tokens = _tokenize(text, regex_mode=True)
        except InvalidInput:
            raise exc from None
        if not _pattern_type(text, [t for t in tokens if t.kind == "field"], regex_default):
            raise
        return _merge_regex_words(text, tokens), True
    regex = _pattern_type(text, [t for t in tokens if t.kind == "field"], regex_default)
    if regex and not regex_default:
        tokens = _tokenize(text, regex_mode=True)
    return (_merge_regex_words(text, tokens) if regex else tokens), regex


def _leaves(node: Node | None) -> list[Pattern]:
    """Every leaf of the tree (depth is bounded by MAX_NESTING, so recursion is safe)."""
    if node is None:
        return []
    if isinstance(node, Pattern):
        return [node]
    if isinstance(node, Not):
        return _leaves(node.child)
    return [leaf for child in node.children for leaf in _leaves(child)]


def _pattern_type(text: str, fields: list[_Tok], regex_default: bool) -> bool:
    for tok in fields:
        if tok.name == "patterntype":
            value = tok.value.lower()
            if value not in ("keyword", "literal", "standard", "regexp", "regex"):
                raise _error(
                    f"unknown patterntype {tok.value!r}", text, tok.position, "use patterntype:keyword or regexp"
                )
            regex_default = value in ("regexp", "regex")
    return regex_default


def _apply_field(text: str, tok: _Tok, opts: _Opts) -> None:  # noqa: PLR0912 - one branch per field
    name, value, pos = tok.name, tok.value, tok.position
    if not value and name != "patterntype":
        raise _error(f"{name}: needs a value", text, pos, f"write {name}:<value> with no space after the colon")
    if tok.negated and name not in ("repo", "file", "lang"):
        raise _error(f"-{name}: cannot be negated", text, pos, f"remove the - before {name}:")
    if name == "repo":
        pattern, _, rev = value.partition("@")
        check_regex(pattern, text, pos)
        if tok.negated:
            opts.exclude_repos.append(pattern)
        else:
            opts.repos.append(RepoFilter(pattern, tuple(r for r in rev.split(":") if r) if rev else ()))
    elif name == "file":
        _check_glob(text, tok)
        check_regex(value, text, pos)
        (opts.exclude_files if tok.negated else opts.files).append(value)
    elif name == "lang":
        (opts.exclude_languages if tok.negated else opts.languages).append(value.lower())
    elif name == "rev":
        if opts.rev_tok is not None:
            raise _error("rev: given twice", text, pos, "give rev: once (rev:a:b searches several revisions)")
        opts.rev_tok = tok
        opts.revisions = tuple(r for r in value.split(":") if r)
    elif name == "count":
        _apply_count(text, tok, opts)
    elif name == "case":
        if value.lower() not in ("yes", "no"):
            raise _error(f"case:{value} is not valid", text, pos, "use case:yes or case:no")
        opts.case_sensitive = value.lower() == "yes"
    elif name == "type":
        if value.lower() not in ("file", "path", "symbol"):
            raise _error(f"type:{value} is not supported", text, pos, "use type:file, type:path or type:symbol")
        if opts.type == "symbol" and value.lower() != "symbol":
            raise _error(f"type:{value} cannot be combined with sym:", text, pos, "remove type: or use a plain term")
        opts.type = value.lower()
    elif name == "timeout":
        opts.timeout = _parse_timeout(text, tok)


def _sym_term(query: str, value: str, start: int, *, negated: bool) -> _Tok:
    """The search term of `sym:value` (`sym:/regex/` is a regex), marked so that the query becomes type:symbol."""
    if negated:
        raise _error("-sym: cannot be negated", query, start, "use NOT with type:symbol, e.g. type:symbol foo NOT bar")
    if not value:
        raise _error("sym: needs a value", query, start, "write sym:<name> with no space after the colon")
    if len(value) > 2 and value.startswith("/") and value.endswith("/"):
        return _Tok("term", value[1:-1], start, regex=True, name="sym")
    return _Tok("term", value, start, name="sym")


def _apply_count(text: str, tok: _Tok, opts: _Opts) -> None:
    value = tok.value.lower()
    if value == "all":
        opts.count_all = True
        return
    if not value.isdigit() or int(value) <= 0:
        raise _error(f"count:{tok.value} is not valid", text, tok.position, "use count:<positive number> or count:all")
    opts.count = min(int(value), 1_000_000)


_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)?$")


def _parse_timeout(text: str, tok: _Tok) -> float:
    m = _DURATION_RE.match(tok.value.lower())
    if not m:
        raise _error(
            f"timeout:{tok.value} is not a duration", text, tok.position, "use e.g. timeout:5s or timeout:500ms"
        )
    amount = float(m.group(1))
    unit = m.group(2) or "s"
    seconds = amount / 1000 if unit == "ms" else amount * 60 if unit == "m" else amount
    if seconds <= 0:
        raise _error("timeout: must be positive", text, tok.position, "use e.g. timeout:5s")
    return min(seconds, MAX_TIMEOUT)


def _check_glob(text: str, tok: _Tok) -> None:
    """A glob in file: (`*.py`) is almost always a mistake: suggest the equivalent regex."""
    value = tok.value
    if not _GLOB_RE.search(value):
        return
    suggestion = _glob_to_regex(value)
    raise _error(
        f"file:{value} looks like a glob, but file: takes a regular expression",
        text,
        tok.position,
        f"use file:{suggestion}",
    )


def _glob_to_regex(glob: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(glob):
        ch = glob[i]
        if glob.startswith("**/", i):
            out.append("(.*/)?")
            i += 3
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "{" and "}" in glob[i:]:
            end = glob.index("}", i)
            out.append("(" + "|".join(re.escape(p) for p in glob[i + 1 : end].split(",")) + ")")
            i = end + 1
            continue
        else:
            out.append(re.escape(ch))
        i += 1
    regex = "".join(out)
    regex = regex.removeprefix("[^/]*")
    return regex + "$"
