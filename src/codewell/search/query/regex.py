"""RE2 compilation with our matching semantics, and regex → required-literal formulas for the trigram index.

Matching is byte-oriented like `rg --no-unicode`: patterns are UTF-8 encoded and compiled in Latin-1 mode,
`^`/`$` match at line boundaries, and no match ever crosses a newline (`never_nl`), so one scan over a
shard's concatenated content finds exactly the per-line matches.
"""

from __future__ import annotations

import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

from codewell.core.errors import InvalidInput

__all__ = [
    "TRUE",
    "Formula",
    "Lit",
    "LitAnd",
    "LitOr",
    "compile_regex",
    "literal_then_class",
    "prefilter_literal",
    "required_literals",
]

# RE2 program memory cap: big enough for real code searches, small enough that 10k alternations or deep
# nesting fail fast with a clear error instead of eating a worker's memory (#4).
MAX_REGEX_MEMORY = 64 << 20
MAX_PATTERN_LENGTH = 4096


@lru_cache(maxsize=256)
def compile_regex(pattern: str, *, case_sensitive: bool) -> Any:
    """The compiled RE2 object for `pattern` in line mode; InvalidInput with RE2's reason if invalid."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidInput(
            f"regex is too long ({len(pattern)} characters, at most {MAX_PATTERN_LENGTH})",
            hint="search for a shorter pattern or split it into several terms",
        )
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.never_nl = True
    options.never_capture = True
    options.case_sensitive = case_sensitive
    options.max_mem = MAX_REGEX_MEMORY
    options.log_errors = False
    try:
        return re2.compile(b"(?m)" + pattern.encode("utf-8"), options)
    except re2.error as exc:
        reason = _reason(exc) or "invalid regular expression"
        raise InvalidInput(f"invalid regex /{pattern}/: {reason}", hint=_regex_hint(pattern, reason)) from None


def _reason(exc: Exception) -> str:
    """RE2's reason as text: it comes as bytes quoting the compiled pattern, which starts with our `(?m)`
    (`str()` showed people `b'missing ): (?m)a('`, #32)."""
    raw = exc.args[0] if exc.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return text.replace(": (?m)", ": ", 1)


def _regex_hint(pattern: str, reason: str) -> str:
    if "pattern too large" in reason:
        return "the regex is too large for the matcher: use fewer alternatives or smaller repetition counts"
    if "(?=" in pattern or "(?!" in pattern or "(?<" in pattern:
        return "lookaround is not supported (RE2 syntax): search for the terms separately with AND/NOT"
    if "\\1" in pattern or "\\2" in pattern:
        return "backreferences are not supported (RE2 syntax)"
    return "use RE2 syntax; escape special characters like ( [ { . * + ? with a backslash"


# Required literals ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lit:
    """The document must contain these bytes (ASCII-lowercased, as the index folds case)."""

    value: bytes


@dataclass(frozen=True, slots=True)
class LitAnd:
    children: tuple[Formula, ...]


@dataclass(frozen=True, slots=True)
class LitOr:
    children: tuple[Formula, ...]


@dataclass(frozen=True, slots=True)
class _True:
    pass


TRUE = _True()
Formula = Lit | LitAnd | LitOr | _True

# Cross products of alternatives are kept while at most this many strings: `(save|restore)` and small
# character classes (`[0-9a-f]`) become OR-sets of literals instead of "anything".
_MAX_SET = 64
_MAX_CLASS = 16
_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT)


def _and(parts: list[Formula]) -> Formula:
    flat: list[Formula] = []
    for p in parts:
        if isinstance(p, _True):
            continue
        flat.extend(p.children if isinstance(p, LitAnd) else (p,))
    if not flat:
        return TRUE
    return flat[0] if len(flat) == 1 else LitAnd(tuple(dict.fromkeys(flat)))


def _or(parts: list[Formula]) -> Formula:
    if not parts or any(isinstance(p, _True) for p in parts):
        return TRUE
    flat: list[Formula] = []
    for p in parts:
        flat.extend(p.children if isinstance(p, LitOr) else (p,))
    uniq = tuple(dict.fromkeys(flat))
    return uniq[0] if len(uniq) == 1 else LitOr(uniq)


def _fold(b: bytes) -> bytes:
    return b.lower()  # bytes.lower() folds ASCII only, exactly like the index


def _lit(s: bytes) -> Formula:
    """A literal as a formula: pieces split at Latin-1 letters (RE2 may fold those; the index does not)."""
    pieces = [p for p in _split_non_ascii_letters(_fold(s)) if len(p) >= 3]
    return _and([Lit(p) for p in pieces])


def _split_non_ascii_letters(s: bytes) -> list[bytes]:
    out: list[bytes] = []
    cur = bytearray()
    for ch in s:
        if 0xC0 <= ch <= 0xFE and ch not in (0xD7, 0xF7):
            out.append(bytes(cur))
            cur.clear()
        else:
            cur.append(ch)
    out.append(bytes(cur))
    return out


def _flush(cur: set[bytes] | None) -> Formula:
    if not cur:
        return TRUE
    if any(len(s) < 3 for s in cur):
        return TRUE
    return _or([_lit(s) for s in sorted(cur)])


def _product(a: set[bytes], b: set[bytes]) -> set[bytes] | None:
    if len(a) * len(b) > _MAX_SET:
        return None
    return {x + y for x in a for y in b}


class _Analyzer:
    """Walks an sre parse tree; `exact` = the finite set of strings a node matches (if small)."""

    def exact(self, op: Any, av: Any) -> set[bytes] | None:
        c = sre_constants
        if op is c.LITERAL:
            return {bytes([av]).lower()}
        if op is c.AT:
            return {b""}
        if op is c.IN:
            return self._class(av)
        if op is c.SUBPATTERN:
            return self.seq_exact(av[-1])
        if op is c.BRANCH:
            out: set[bytes] = set()
            for alt in av[1]:
                e = self.seq_exact(alt)
                if e is None:
                    return None
                out |= e
            return out if len(out) <= _MAX_SET else None
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            lo, hi, sub = av
            if lo == hi and lo <= 3:
                e = self.seq_exact(sub)
                result: set[bytes] | None = {b""}
                for _ in range(lo):
                    if e is None or result is None:
                        return None
                    result = _product(result, e)
                return result
        return None

    def _class(self, items: Any) -> set[bytes] | None:
        c = sre_constants
        chars: set[bytes] = set()
        for op, av in items:
            if op is c.NEGATE:
                return None
            if op is c.LITERAL:
                chars.add(bytes([av]).lower())
            elif op is c.RANGE:
                lo, hi = av
                if hi - lo > 64:
                    return None
                chars |= {bytes([x]).lower() for x in range(lo, hi + 1)}
            elif op is c.CATEGORY and av is c.CATEGORY_DIGIT:
                chars |= {bytes([x]) for x in range(48, 58)}
            else:
                return None
        return chars if len(chars) <= _MAX_CLASS else None

    def seq_exact(self, seq: Any) -> set[bytes] | None:
        cur: set[bytes] | None = {b""}
        for op, av in seq:
            e = self.exact(op, av)
            if e is None or cur is None:
                return None
            cur = _product(cur, e)
        return cur

    def required(self, op: Any, av: Any) -> Formula:
        c = sre_constants
        if op is c.SUBPATTERN:
            return self.seq_required(av[-1])
        if op is c.BRANCH:
            return _or([self.seq_required(alt) for alt in av[1]])
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            lo, _hi, sub = av
            return self.seq_required(sub) if lo >= 1 else TRUE
        return _flush(self.exact(op, av))

    def seq_required(self, seq: Any) -> Formula:
        clauses: list[Formula] = []
        cur: set[bytes] = {b""}
        for op, av in seq:
            if op in _REPEATS and av[0] >= 1 and not (av[0] == av[1] and av[0] <= 3):
                # x{n,}: the first iteration continues the current literal, the last one starts the next.
                e = self.seq_exact(av[2])
                if e is not None:
                    grown = _product(cur, e)
                    clauses.append(_flush(grown if grown is not None else cur))
                    cur = e
                    continue
            e = self.exact(op, av)
            if e is not None:
                grown = _product(cur, e)
                if grown is not None:
                    cur = grown
                    continue
                clauses.append(_flush(cur))
                cur = e
                continue
            clauses.append(_flush(cur))
            clauses.append(self.required(op, av))
            cur = {b""}
        clauses.append(_flush(cur))
        return _and(clauses)


@lru_cache(maxsize=256)
def required_literals(pattern: str) -> Formula:
    """A formula of literals every match of `pattern` must contain (TRUE when nothing can be derived).

    The formula is a necessary condition only (a superset of matching documents), so any construct the
    analysis does not understand yields TRUE rather than a wrong literal.
    """
    # POSIX classes and RE2-only escapes parse differently (or not at all) in Python's parser.
    if "[:" in pattern or "\\Q" in pattern or "\\p" in pattern or "\\P" in pattern or "\\C" in pattern:
        return TRUE
    text = pattern.encode("utf-8").decode("latin-1")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = sre_parse.parse(text)
    except Exception:  # any pattern Python cannot parse just gets no index help
        return TRUE
    try:
        return _Analyzer().seq_required(list(tree))
    except Exception:  # e.g. code points above 255 from escapes RE2 reads differently: no index help
        return TRUE


# Class members `literal_then_class` understands: RE2's ASCII digit and word classes.
_CATEGORY_BYTES = {
    sre_constants.CATEGORY_DIGIT: b"0123456789",
    sre_constants.CATEGORY_WORD: b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz",
}
# The literal and the class run it requires must be at least this long together to be worth a native scan.
_MIN_LEAD = 6


@lru_cache(maxsize=256)
def literal_then_class(pattern: str, case_sensitive: bool) -> tuple[bytes, bytes, int] | None:
    """(literal, class bitmap, n) when every match of `pattern` starts with the ASCII literal followed by at
    least n bytes of the class (32 bytes, bit c set for byte c), as `\b0x[0-9a-fA-F]{12,}\b` does; else None.

    A regex without a required literal of its own (`prefilter_literal`) may still start this way: the native
    kernel (`line_bounds` with a class) then finds the few lines where the literal is followed by such a run
    instead of RE2 stepping through every candidate unit. Necessary, not sufficient: RE2 matches each line
    found. Caseless, the literal is lower case and the class holds both cases of its letters (RE2's Latin-1
    folding of other letters does not arise: literal and class are ASCII). Anything this does not understand
    (groups, flags, alternation, POSIX classes) gives None.
    """
    if "(?" in pattern or "[:" in pattern or "\\Q" in pattern or "\\p" in pattern or "\\P" in pattern:
        return None
    if "\\C" in pattern or not pattern.isascii():
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            items = list(sre_parse.parse(pattern.encode("ascii")))
    except Exception:  # RE2 syntax Python reads otherwise or not at all: no shortcut
        return None
    while items and items[0][0] is sre_constants.AT:  # `^` and `\b` only narrow where a match may start
        items.pop(0)
    literal = bytearray()
    while items and items[0][0] is sre_constants.LITERAL and items[0][1] < 0x80 and items[0][1] != 0x0A:
        literal.append(items.pop(0)[1])
    if len(literal) < 2 or not items or items[0][0] not in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
        return None
    least, _most, body = items[0][1]
    members = _class_members(list(body))
    if members is None or least < 1 or len(literal) + least < _MIN_LEAD:
        return None
    if not case_sensitive:
        literal = bytearray(bytes(literal).lower())
        members |= {ord(chr(c).swapcase()) for c in members if c < 0x80 and chr(c).isalpha()}
    bitmap = bytearray(32)
    for c in members:
        bitmap[c >> 3] |= 1 << (c & 7)
    return bytes(literal), bytes(bitmap), least


def _class_members(body: list[Any]) -> set[int] | None:
    """The ASCII bytes one item of a parsed regex matches: a literal or a class of literals, ranges and
    the digit and word categories (negated or not); None for anything else."""
    if len(body) != 1:
        return None
    op, arg = body[0]
    if op is sre_constants.LITERAL:
        return {arg} if arg < 0x80 else None
    if op is not sre_constants.IN:
        return None
    members: set[int] = set()
    negate = False
    for kind, value in arg:
        if kind is sre_constants.NEGATE:
            negate = True
        elif kind is sre_constants.LITERAL and value < 0x80:
            members.add(value)
        elif kind is sre_constants.RANGE and value[1] < 0x80:
            members.update(range(value[0], value[1] + 1))
        elif kind is sre_constants.CATEGORY and value in _CATEGORY_BYTES:
            members.update(_CATEGORY_BYTES[value])
        else:
            return None
    if negate:
        # A negated class also matches every non-ASCII byte: kept, so the class stays a superset.
        members = set(range(256)) - members
    return members


def prefilter_literal(value: str, *, regex: bool) -> bytes | None:
    """The longest ASCII literal a regex requires, when scanning for it first pays off (None otherwise)."""
    if not regex:
        return None
    formula = required_literals(value)
    candidates = (
        [formula] if isinstance(formula, Lit) else list(formula.children) if isinstance(formula, LitAnd) else []
    )
    literals = [c.value for c in candidates if isinstance(c, Lit) and c.value.isascii() and len(c.value) >= 4]
    if not literals:
        return None
    best = max(literals, key=len)
    # Any substring of a required literal is required too. Leading underscores are everywhere in C, and
    # RE2 finds a literal by its first byte: `coherent` scans ~1.6x faster than `_coherent` (measured).
    stripped = best.lstrip(b"_")
    if len(stripped) >= 4:
        best = stripped
    # A regex that starts with its literal already gets RE2's own prefix acceleration.
    if re.escape(best.decode()).lower() == value.lower():
        return None
    return best
