"""The native C scanner (codenav/_lex.c): definitions and occurrences on real-looking C, and equivalence with
the tree-sitter path it replaces for C files."""

from __future__ import annotations

import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codewell.codenav import builder, native
from codewell.codenav.builder import build_index
from codewell.codenav.extract import FileSymbols, Symbol, extract
from codewell.codenav.imports import Import
from codewell.codenav.store import open_index
from tests.unit.codenav.fixtures import SOURCES

# Kernel-style C: annotations, macros (one-line, function-like, continued), K&R, function pointers, #if/#else
# branches that each open a brace, comments and strings naming identifiers.
KERNEL_C = r"""// SPDX-License-Identifier: GPL-2.0
#include <linux/slab.h>
#include "internal.h"

#define QUEUE_DEPTH 64
#define queue_full(q) \
	((q)->count >= QUEUE_DEPTH && \
	check_limit((q)->limit))

struct request_queue;

struct queue {
	unsigned int count;
	unsigned long limit __aligned(8);
	struct list_head *head;
	int (*submit)(struct queue *q, void *data);
	union {
		u32 flags;
		void *private;
	};
	unsigned int busy:1;
} __packed;

typedef struct {
	spinlock_t lock;
} queue_lock_t;

typedef int (*queue_fn)(struct queue *q);

enum queue_state {
	QUEUE_IDLE,
	QUEUE_BUSY = 4,
	QUEUE_DEAD = (1 << 3),
};

static unsigned long queue_stats[8] __read_mostly;
static struct kmem_cache *queue_cachep;
static int queue_count __initdata = 0, queue_max = QUEUE_DEPTH;
extern int queue_debug;
int check_limit(unsigned long limit);
static DEFINE_SPINLOCK(queue_spin);
EXPORT_SYMBOL_GPL(queue_cachep);

static int __init queue_init(void)
{
	/* queue_count is counted here: "queue_max" */
	queue_cachep = kmem_cache_create("queue", sizeof(struct queue), 0, 0, NULL);
	if (!queue_cachep)
		goto out;
	return 0;
out:
	return -ENOMEM;
}

NOKPROBE_SYMBOL(queue_init)

static inline struct queue *
queue_first(struct queue *q)
{
	return q->head ? (struct queue *)q->head : NULL;
}

int old_style(a, b)
	int a;
	char *b;
{
	return a + b[0] + 'b';
}

#ifdef CONFIG_QUEUE_DEBUG
static void queue_dump(struct queue *q) {
#else
static void queue_dump(struct queue *q, int level) {
#endif
	queue_first(q)->count++;
}

int queue_submit(struct queue *q, void *data)
{
	return q->submit(q, data);
}
"""


def _defs(result: FileSymbols) -> set[tuple[str, str, str, int]]:
    return {(s.kind, s.container, s.name, s.line) for s in result.symbols}


def _occurrences(result: FileSymbols) -> set[tuple[str, int, int, str]]:
    return {(o.name, o.line, o.column, o.role) for o in result.occurrences}


def _tree_sitter(path: str, source: str) -> FileSymbols:
    native.ENABLED = False
    try:
        return extract(path, source.encode())
    finally:
        native.ENABLED = True


def test_the_scanner_is_built() -> None:
    # setup.py builds it wherever the suite runs; without it every other test here would test tree-sitter.
    assert native.available(), "codenav/_lex.c must be built for these tests (pip install -e .)"


def test_kernel_style_definitions() -> None:
    result = extract("block/queue.c", KERNEL_C.encode())
    found = {(kind, container, name) for kind, container, name, _ in _defs(result)}
    assert found == {
        ("macro", "", "QUEUE_DEPTH"),
        ("macro", "", "queue_full"),
        ("struct", "", "queue"),
        ("field", "queue", "count"),
        ("field", "queue", "limit"),  # not `__aligned`
        ("field", "queue", "head"),
        ("field", "queue", "submit"),  # a function pointer
        ("field", "queue", "flags"),  # in an anonymous union: the named struct contains it
        ("field", "queue", "private"),
        ("field", "queue", "busy"),  # a bit field
        ("field", "", "lock"),
        ("type alias", "", "queue_lock_t"),
        ("type alias", "", "queue_fn"),
        ("enum", "", "queue_state"),
        ("constant", "queue_state", "QUEUE_IDLE"),
        ("constant", "queue_state", "QUEUE_BUSY"),
        ("constant", "queue_state", "QUEUE_DEAD"),
        ("variable", "", "queue_stats"),  # not `__read_mostly`
        ("variable", "", "queue_cachep"),
        ("variable", "", "queue_count"),  # not `__initdata`
        ("variable", "", "queue_max"),
        ("function", "", "queue_init"),  # not `__init`
        ("function", "", "queue_first"),  # after a macro call without `;`
        ("function", "", "old_style"),  # K&R: `a` and `b` are parameters, not globals
        ("function", "", "queue_dump"),  # both #if branches open a brace: one definition, one body
        ("function", "", "queue_submit"),
    }
    # Not definitions: a forward declaration, `} __packed`, an extern, a prototype, macro calls.
    names = {s.name for s in result.symbols}
    assert not names & {"request_queue", "__packed", "queue_debug", "check_limit", "queue_spin", "a", "b"}


def test_ranges() -> None:
    result = extract("block/queue.c", KERNEL_C.encode())
    by_name = {s.name: s for s in result.symbols}
    init = by_name["queue_init"]
    assert (init.line, init.column, init.end_line, init.end_column) == (44, 19, 44, 29)
    assert (init.def_line, init.def_column, init.def_end_line, init.def_end_column) == (44, 1, 53, 2)
    full = by_name["queue_full"]  # a continued macro ends where the next line starts
    assert (full.def_line, full.def_end_line, full.def_end_column) == (6, 9, 1)
    assert (by_name["old_style"].def_line, by_name["old_style"].def_end_line) == (63, 68)
    # One per #if branch (as ctags lists them), both ending with the body they share.
    dumps = sorted((s.line, s.def_end_line, s.def_end_column) for s in result.symbols if s.name == "queue_dump")
    assert dumps == [(71, 76, 2), (73, 76, 2)]


def test_occurrences_roles_comments_strings_labels() -> None:
    source = KERNEL_C.encode()
    result = extract("block/queue.c", source)
    occurrences = _occurrences(result)
    lines = KERNEL_C.splitlines()
    for name, line, column, _ in occurrences:
        assert lines[line - 1].encode()[column - 1 : column - 1 + len(name)] == name.encode()
    at = {(name, line): role for name, line, _, role in occurrences}
    assert at[("queue_init", 44)] == "d"
    assert at[("queue_cachep", 47)] == "r"
    assert at[("check_limit", 8)] == "r"  # inside a continued #define body
    assert at[("limit", 8)] == "m"  # (q)->limit
    assert at[("submit", 80)] == "m"
    # A comment and a string naming queue_count/queue_max (line 46), the label `out` and `goto out`,
    # the character literal 'b', keywords and the #include targets are not identifiers.
    assert not {o for o in occurrences if o[1] == 46}
    assert not {o for o in occurrences if o[0] in {"out", "static", "int", "return", "include", "linux", "slab"}}
    assert sorted(column for name, line, column, _ in occurrences if (name, line) == ("b", 67)) == [13]  # not 'b'
    assert result.imports == [Import("<linux/slab.h>", "", "", 2), Import("internal.h", "", "", 3)]


def test_table_rows_say_what_the_objects_say() -> None:
    # The index build asks for the rows of its tables (file id given); read as Indexed.occurrences reads them
    # (a defined name without a row occurs exactly where it is defined), they hold the same as the objects.
    listed = extract("block/queue.c", KERNEL_C.encode())
    rows = extract("block/queue.c", KERNEL_C.encode(), file_id=7)
    assert rows.occurrence_rows is not None
    assert rows.symbol_rows is not None
    assert not rows.occurrences
    assert not rows.symbols
    assert {row[1] for row in rows.occurrence_rows} == {7}
    expanded = {
        (name, line, column, role)
        for name, _, packed in rows.occurrence_rows
        for line, column, role in native.unpack_positions(packed)
    }
    with_row = {name for name, _, _ in rows.occurrence_rows}
    from_symbols = {(row[1], row[4], row[5], "d") for row in rows.symbol_rows if row[1] not in with_row}
    assert from_symbols  # names only defined (fields, `QUEUE_DEPTH`-like macros used nowhere else) have no row
    assert not expanded & from_symbols
    assert expanded | from_symbols == _occurrences(listed)
    # `queue` is defined (the struct) and used: its row keeps every position, the definition's too.
    assert ("queue", 12, 8, "d") in expanded
    assert [name for name, _, _ in rows.occurrence_rows][:3] == ["QUEUE_DEPTH", "q", "count"]
    assert {row[0] for row in rows.symbol_rows} == {7}
    assert [Symbol(*row[1:]) for row in rows.symbol_rows] == listed.symbols
    assert rows.imports == listed.imports


def test_a_defined_name_that_never_occurs_has_an_empty_row() -> None:
    # `bool` is a keyword to the lexer, so `#define bool _Bool` defines a name with no identifier occurrence:
    # the empty row tells the reader not to take the definition for one.
    source = b"#define bool _Bool\n#define ONLY_HERE 1\nint used;\nint f(void) { return used; }\n"
    rows = extract("a.c", source, file_id=1)
    assert rows.occurrence_rows is not None
    # ONLY_HERE and f occur only where they are defined: no row.
    assert sorted(rows.occurrence_rows) == [("bool", 1, b""), ("used", 1, native.pack_positions("3:5:d;4:22:r"))]
    assert {o.name for o in extract("a.c", source).occurrences} == {"ONLY_HERE", "used", "f"}


def test_same_definitions_and_occurrences_as_tree_sitter_on_the_c_fixture() -> None:
    path, source = SOURCES["c"]
    fast, slow = extract(path, source.encode()), _tree_sitter(path, source)
    assert fast.symbols
    assert set(fast.symbols) == set(slow.symbols)
    assert _occurrences(fast) == _occurrences(slow)
    assert fast.imports == slow.imports


def test_same_definitions_as_tree_sitter_on_kernel_style_c_where_tree_sitter_parses_it() -> None:
    # tree-sitter misreads some kernel idioms (`} __packed;` is a variable to it, `__init` a declarator); on
    # the others both must agree.
    fast, slow = extract("block/queue.c", KERNEL_C.encode()), _tree_sitter("block/queue.c", KERNEL_C)
    agreed = {"QUEUE_DEPTH", "queue_full", "queue", "count", "head", "submit", "flags", "private", "queue_fn"}
    agreed |= {"queue_state", "QUEUE_IDLE", "QUEUE_BUSY", "QUEUE_DEAD", "queue_submit", "queue_lock_t", "lock"}
    assert {d for d in _defs(fast) if d[2] in agreed} == {d for d in _defs(slow) if d[2] in agreed}
    assert len({d[2] for d in _defs(fast) if d[2] in agreed}) == len(agreed)


def test_packed_positions_round_trip_natively_and_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    # The occurrences table's positions (codenav/store.py): packed by the scanner's module when it is built, by
    # Python otherwise; both must give the same bytes and read back what was packed, in its order.
    rng = random.Random(30)
    texts = ["", "1:1:d", "3:5:d;4:22:r", "100000:70000:i;1:1:m;1:1:m", f"{2**32 - 1}:{2**32 - 1}:r;0:0:d"]
    for _ in range(300):
        spots = [
            (rng.randint(1, 1 << rng.choice((7, 14, 21))), rng.randint(0, 300), rng.choice("drmi"))
            for _ in range(rng.randint(1, 40))
        ]
        texts.append(";".join(f"{line}:{column}:{role}" for line, column, role in spots))
    native_packed = [native.pack_positions(text) for text in texts]
    native_read = [native.unpack_positions(packed) for packed in native_packed]
    monkeypatch.setattr(native, "_lex", None)
    assert [native.pack_positions(text) for text in texts] == native_packed
    assert [native.unpack_positions(packed) for packed in native_packed] == native_read
    for text, spots in zip(texts, native_read, strict=True):
        assert ";".join(f"{line}:{column}:{role}" for line, column, role in spots) == text
    assert len(native_packed[2]) == 4  # two occurrences in 4 bytes ("3:5:d;4:22:r" is 12 characters)
    for bad in ("1:2", "1:2:x", "1:2:r;", "a:1:r", "1:2:rr", f"{2**32}:1:r"):
        with pytest.raises(ValueError, match="positions: not line:col:role"):
            native.pack_positions(bad)
    with pytest.raises(ValueError, match="positions: truncated"):
        native.unpack_positions(b"\x80")


def test_longest_line_matches_python() -> None:
    # The minified-file test (extract.skip_reason) measures lines natively; it must find what Python finds.
    samples = [b"", b"\n", b"a", b"ab\n\nabc", b"abc\n", b"x" * 5000, b"short\n" + b"y" * 4001 + b"\nz"]
    for data in samples:
        for limit in (0, 1, 3, 4, 4096, 65536):
            assert native.longest_line(data, limit) == max(map(len, data[:limit].split(b"\n")))


def test_bad_input_is_scanned_without_failing() -> None:
    for source in (b"", b"}}}{{{", b"struct {", b'#define X "unterminated\n', b"/* open comment", b"\xff\xfe int x;"):
        result = extract("odd.c", source)
        assert result.skipped == ""
    assert [s.name for s in extract("odd.c", "int caf\u00e9 = 1;".encode()).symbols] == ["caf\u00e9"]


def _git_repo(root: Path, files: dict[str, str]) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "c"]):
        subprocess.run(["git", *args], cwd=root, check=True, env={**env, "PATH": "/usr/bin:/bin"})
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_index_built_natively_answers_like_the_tree_sitter_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real repository with C (native, in this process) and Python (farmed to a pool: the threshold is lowered
    # so that the batching path runs), written batch by batch.
    repo = tmp_path / "repo"
    commit = _git_repo(
        repo,
        {
            "src/circle.c": SOURCES["c"][1],
            "block/queue.c": KERNEL_C,
            "tools/shape.py": SOURCES["python"][1],
            "README": "not code\n",
        },
    )
    monkeypatch.setattr(builder, "_POOL_MIN_BYTES", 0)
    monkeypatch.setattr(builder, "_BATCH_BYTES", 1)  # one file per batch
    with ThreadPoolExecutor(2) as pool:
        stats = build_index(tmp_path / "fast.sqlite", repo, commit, {"repo": "r"}, pool)  # type: ignore[arg-type]
    assert (stats.files, stats.parsed) == (4, 3)
    native.ENABLED = False
    try:
        build_index(tmp_path / "slow.sqlite", repo, commit, {"repo": "r"}, None)
    finally:
        native.ENABLED = True
    fast, slow = open_index(tmp_path / "fast.sqlite"), open_index(tmp_path / "slow.sqlite")
    assert fast is not None
    assert slow is not None
    try:
        for name in ("area", "circle", "radius", "counter", "describe", "Shape"):
            found = {path: sorted(spots) for path, spots in fast.occurrences(name).items()}
            assert found
            assert found == {path: sorted(spots) for path, spots in slow.occurrences(name).items()}
        assert {(r.path, r.symbol) for r in fast.symbols_named("area")} == {
            (r.path, r.symbol) for r in slow.symbols_named("area")
        }
        assert [(i.module, i.line) for i in fast.imports_of("src/circle.c")] == [("<stdio.h>", 1), ("shape.h", 2)]
        assert fast.file("README") is not None
        assert fast.file("tools/shape.py") is not None
        assert {s.name for s in fast.symbols_in("block/queue.c")} >= {"queue_init", "old_style", "queue_dump"}
    finally:
        fast.close()
        slow.close()
