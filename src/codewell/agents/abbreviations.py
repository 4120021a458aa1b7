"""Abbreviations in identifiers and file names matched to the words of a task (#31).

Code names things with shortened words (`command_win.go` for Windows, `regexp.go` for regular expressions,
`args_test.go` for arguments) that a task written in prose spells out. A word of an identifier or a path
stands for a word of the task when:

- a table of common programming abbreviations says so (`ABBREVIATIONS`, in both directions: `cfg` in the
  code for "configuration" in the task, or `config` in the task for `configuration` in the code);
- it is a prefix, three letters or more, of a task word at least three letters longer (`reg` for "regular",
  `expr` for "expression", `pos` for "positional"): the shortening identifier-splitting research calls
  truncation (Lawrie, Binkley and Morrell, "Normalizing Source Code Vocabulary", WCRE 2010; Hill et al.,
  "AMAP: Automatically Mining Abbreviation Expansions in Programs", MSR 2008);
- it is two such prefixes of two adjacent task words run together, each two letters or more (`regexp` for
  "regular expression", `strconv` for "string conversion"): AMAP's multi-word ("acronym-like") expansion;
- it is two adjacent task words run together, the first possibly stemmed (`lookup` for "looked up",
  `callback` for "call back").

The same rules apply to every task alike; nothing here knows a task or a repository.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import Stemmer

__all__ = ["ABBREVIATIONS", "expansions", "matcher"]

# Source: the list "Abbreviations in code" (github.com/abbrcode/abbreviations-in-code, README.md, section
# "List", as of 2025): its entries whose meaning is a word programs are written about, recommended and
# context-sensitive alike; one-letter entries (`e`, `f`, `p`, ...), trigonometric functions and the entries it
# marks as not recommended but still common in code (`hdr`, `txt`, `usr`) are kept or left out by that test.
# Several meanings are alternatives (`dir`: directory or direction), each matched on its own; a meaning of
# several words (`fd`: file descriptor) matches each of its words.
ABBREVIATIONS: Mapping[str, tuple[str, ...]] = {
    "abbr": ("abbreviation",),
    "abs": ("absolute",),
    "addr": ("address",),
    "alloc": ("allocate", "allocation"),
    "alt": ("alternative", "alternate"),
    "app": ("application",),
    "arg": ("argument",),
    "arr": ("array",),
    "async": ("asynchronous",),
    "attr": ("attribute",),
    "auth": ("authentication", "authenticate", "authorization"),
    "avg": ("average",),
    "bg": ("background",),
    "bin": ("binary",),
    "bool": ("boolean",),
    "btn": ("button",),
    "buf": ("buffer",),
    "calc": ("calculate", "calculator"),
    "cb": ("callback",),
    "cert": ("certificate",),
    "ch": ("channel",),
    "chk": ("check",),
    "char": ("character",),
    "clr": ("clear",),
    "cmd": ("command",),
    "cmp": ("compare",),
    "cnt": ("counter", "count"),
    "concat": ("concatenate",),
    "conf": ("configuration",),
    "config": ("configuration",),
    "conn": ("connection",),
    "col": ("column",),
    "coll": ("collection",),
    "coord": ("coordinate",),
    "csum": ("checksum",),
    "ctrl": ("control",),
    "ctx": ("context",),
    "cur": ("current",),
    "curr": ("current",),
    "db": ("database",),
    "dbg": ("debug",),
    "dec": ("decimal", "decrease"),
    "def": ("default", "define", "definition"),
    "del": ("delete",),
    "dest": ("destination",),
    "dev": ("development", "device", "developer"),
    "diff": ("difference",),
    "dir": ("directory", "direction"),
    "dis": ("disable",),
    "disp": ("display",),
    "doc": ("document", "documentation"),
    "drv": ("driver",),
    "dsc": ("descriptor",),
    "dyn": ("dynamic",),
    "en": ("enable",),
    "env": ("environment",),
    "eq": ("equal",),
    "err": ("error",),
    "exe": ("executable",),
    "expr": ("expression",),
    "ext": ("extension",),
    "fac": ("factory",),
    "fd": ("file descriptor",),
    "fig": ("figure",),
    "fmt": ("format",),
    "fn": ("function",),
    "fp": ("function pointer",),
    "func": ("function",),
    "gen": ("generate",),
    "hdr": ("header",),
    "hex": ("hexadecimal",),
    "hw": ("hardware",),
    "id": ("identifier",),
    "idx": ("index",),
    "iface": ("interface",),
    "img": ("image",),
    "inc": ("include", "increase"),
    "info": ("information",),
    "init": ("initialize",),
    "ins": ("insert",),
    "intf": ("interface",),
    "int": ("integer",),
    "iter": ("iterator",),
    "js": ("javascript",),
    "lang": ("language",),
    "lib": ("library",),
    "len": ("length",),
    "ll": ("linked list",),
    "max": ("maximum",),
    "mem": ("memory",),
    "meta": ("metadata",),
    "mid": ("middle",),
    "min": ("minimum",),
    "misc": ("miscellaneous",),
    "mng": ("manager",),
    "mod": ("modulo",),
    "msg": ("message",),
    "mut": ("mutable",),
    "nav": ("navigation",),
    "net": ("network",),
    "nl": ("newline",),
    "num": ("number",),
    "obj": ("object",),
    "op": ("operation",),
    "opt": ("option", "optional"),
    "os": ("operating system",),
    "param": ("parameter",),
    "perf": ("performance",),
    "pic": ("picture",),
    "pos": ("position",),
    "pred": ("prediction",),
    "pref": ("preference",),
    "prev": ("previous",),
    "proc": ("process",),
    "prod": ("production",),
    "prof": ("profiler",),
    "ptr": ("pointer",),
    "pwr": ("power",),
    "px": ("pixel",),
    "q": ("query",),
    "qry": ("query",),
    "rand": ("random",),
    "rec": ("record",),
    "rect": ("rectangle",),
    "recv": ("receive",),
    "ref": ("reference",),
    "regex": ("regular expression",),
    "rgx": ("regular expression",),
    "rem": ("remove",),
    "repo": ("repository",),
    "req": ("request", "required"),
    "res": ("response", "result"),
    "ret": ("return",),
    "rev": ("revision",),
    "rng": ("range",),
    "sem": ("semaphore",),
    "sel": ("selection", "selected"),
    "seq": ("sequence",),
    "sqrt": ("square root",),
    "src": ("source",),
    "sw": ("software",),
    "stat": ("statistic",),
    "std": ("standard",),
    "str": ("string",),
    "sync": ("synchronize",),
    "temp": ("temporary", "temperature"),
    "tmp": ("temporary",),
    "tgl": ("toggle",),
    "tmr": ("timer",),
    "ts": ("timestamp",),
    "txt": ("text",),
    "usr": ("user",),
    "val": ("value",),
    "var": ("variable",),
    "ver": ("version",),
    "vert": ("vertical",),
    "win": ("window",),
    "ws": ("whitespace",),
}

_STEMMER = Stemmer.Stemmer("english")
# A truncation is at least this long, and the word it shortens at least _MIN_CUT letters longer: `win` for
# "windows", not `route` for "router" (a different word, or the same one inflected: stemming's business).
_MIN_PREFIX = 3
_MIN_CUT = 3
# Each part of a two-word contraction (`reg`+`exp`).
_MIN_PIECE = 2


def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def _index() -> dict[str, frozenset[str]]:
    """Every word of the table (abbreviation or meaning, and the stems of both) → the stems of the words it
    can stand for or be written as."""
    out: dict[str, set[str]] = {}
    for short, meanings in ABBREVIATIONS.items():
        for meaning in meanings:
            words = meaning.split()
            stems = {_stem(w) for w in words}
            for key in (short, _stem(short)):
                out.setdefault(key, set()).update(stems)
            if len(words) == 1:  # `configuration` in the code for `config` in the task
                for key in (words[0], _stem(words[0])):
                    out.setdefault(key, set()).update({short, _stem(short)})
    return {k: frozenset(v) for k, v in out.items()}


_TABLE = _index()


def expansions(word: str) -> frozenset[str]:
    """The stems of the words the table says `word` (lower case) stands for or is written as."""
    return _TABLE.get(word, frozenset()) | _TABLE.get(_stem(word), frozenset())


def _prefix_of(piece: str, word: str, minimum: int) -> bool:
    return len(piece) >= minimum and len(word) >= len(piece) + _MIN_CUT and word.startswith(piece)


def matcher(task_words: Sequence[str]) -> Callable[[str], frozenset[str]]:
    """For the content words of a task (lower case, in the task's order, with the particles that follow a
    verb: "looked up"), a function from a word of an
    identifier or path (lower case) to the stems of the task words it abbreviates or spells out (empty: none;
    a word that is itself a task word's stem is left to the caller). Cached per word: the symbol tables of a
    repository ask about tens of thousands of names made of far fewer words."""
    sequence = [w for w in task_words if w.isalpha()]
    words = list(dict.fromkeys(sequence))
    stems = {w: _stem(w) for w in words}
    wanted = frozenset(stems.values())
    # Adjacent pairs in the task's order, for two-word contractions.
    pairs = list(dict.fromkeys((sequence[i], sequence[i + 1]) for i in range(len(sequence) - 1)))
    joined = {
        first_form + second: frozenset({stems[first], stems[second]}) & wanted
        for first, second in pairs
        for first_form in (first, stems[first])
    }
    cache: dict[str, frozenset[str]] = {}

    def match(part: str) -> frozenset[str]:
        got = cache.get(part)
        if got is not None:
            return got
        found = set(expansions(part) & wanted) | joined.get(part, frozenset())
        found.update(stems[w] for w in words if _prefix_of(part, w, _MIN_PREFIX))
        if not found and len(part) >= 2 * _MIN_PIECE + 1:
            for first, second in pairs:
                if any(
                    _prefix_of(part[:cut], first, _MIN_PIECE) and _prefix_of(part[cut:], second, _MIN_PIECE)
                    for cut in range(_MIN_PIECE, len(part) - _MIN_PIECE + 1)
                ):
                    found.update({stems[first], stems[second]})
        got = cache[part] = frozenset(found)
        return got

    return match
