"""The symbol index build (codenav/builder.py; codenav/store.py reads it): from the search shard or from git, the
same tables; the compact occurrences format (no row where a name occurs only as its definitions) reads back every
occurrence."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pygit2
import pytest

from codewell.codenav import builder, native
from codewell.codenav.builder import build_index
from codewell.codenav.extract import extract
from codewell.codenav.service import CodeNavService
from codewell.codenav.store import FORMAT, open_index
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.gitfixtures import make_repo, register_local_repo
from tests.unit.codenav.fixtures import SOURCES
from tests.unit.codenav.test_native_c import KERNEL_C

# A C file with a NUL past the first 8 KB: binary for search (no bytes in the shard), parsed by codenav.
LATE_NUL = b"int late_nul_counter;\n" + b"/* padding */\n" * 700 + b'char tail[] = "\x00";\n'
FILES: dict[str, str | bytes] = {
    **dict(SOURCES.values()),
    "block/queue.c": KERNEL_C,
    "include/generated.h": "".join(f"#define REG_{i} 0x{i:x}\n" for i in range(50)) + "#define ALIAS REG_7\n",
    "drivers/late.c": LATE_NUL,
    "drivers/huge.c": "int huge;\n" * 120_000,  # over 1 MB: skipped by both, never read
    "go.mod": "module example.com/acme\n",
    "tsconfig.json": '{"compilerOptions": {"baseUrl": "src"}}\n',
    "README.md": "not code\n",
    # Non-ASCII names: stored as the Python path decodes them (invalid UTF-8 replaced).
    "drivers/names.c": "int caf\u00e9 = 1;\nint f(void) { return caf\u00e9; }\n".encode() + b"int bad\xff = 2;\n",
}


def _tables(path: Path) -> dict[str, list[tuple[object, ...]]]:
    db = sqlite3.connect(path)
    try:
        tables = {
            table: sorted(db.execute(f"SELECT * FROM {table}"))  # fixed table names
            for table in ("meta", "files", "symbols", "imports", "gomods")
        }
        # tree-sitter's captures come in no fixed order: so do the positions of one row.
        tables["occurrences"] = sorted(
            (name, file_id, sorted(native.unpack_positions(positions)))
            for name, file_id, positions in db.execute("SELECT * FROM occurrences")
        )
        return tables
    finally:
        db.close()


def test_index_from_the_shard_equals_the_index_from_git(
    tmp_path: Path, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = register_local_repo(runtime, make_repo(tmp_path / "work", FILES), "acme/build")
    search = runtime.get(SearchService)
    search.index(repo)
    head = str(pygit2.Repository(str(repo.mirror_path)).head.peel(pygit2.Commit).id)
    files = search.revision_files(repo, head)
    assert files is not None

    read_from_git: list[str] = []
    blob_data = builder._blob_data

    def counted(git: pygit2.Repository, oid: pygit2.Oid) -> bytes:
        data = blob_data(git, oid)
        read_from_git.append(data[:21].decode())
        return data

    monkeypatch.setattr(builder, "_blob_data", counted)
    from_shard = build_index(tmp_path / "shard.sqlite", repo.mirror_path, head, {"repo": "r"}, None, files)
    # Only the file the shard has no bytes of and codenav parses came from git.
    assert read_from_git == ["int late_nul_counter;"]
    from_git = build_index(tmp_path / "git.sqlite", repo.mirror_path, head, {"repo": "r"}, None)
    assert len(read_from_git) > len(FILES) - 2

    assert (from_shard.files, from_shard.parsed, from_shard.skipped) == (
        from_git.files,
        from_git.parsed,
        from_git.skipped,
    )
    assert ("drivers/huge.c", "over 1 MB") in from_shard.skipped
    assert _tables(tmp_path / "shard.sqlite") == _tables(tmp_path / "git.sqlite")
    index = open_index(tmp_path / "shard.sqlite")
    assert index is not None
    try:
        assert [r.path for r in index.symbols_named("late_nul_counter")] == ["drivers/late.c"]
        assert index.go_modules() == [("", "example.com/acme")]
        assert index.meta("tsconfig") == '{"baseUrl": "src", "paths": {}}'
    finally:
        index.close()


@pytest.mark.parametrize("scanner", ["native", "tree-sitter"])
def test_occurrences_read_back_every_identifier_extraction_found(
    tmp_path: Path, scanner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native, "ENABLED", scanner == "native")
    work = make_repo(tmp_path / "work", FILES)
    head = str(pygit2.Repository(str(work)).head.peel(pygit2.Commit).id)
    build_index(tmp_path / "index.sqlite", work, head, {"repo": "r"}, None)

    expected: dict[str, dict[str, list[tuple[int, int, str]]]] = {}
    pairs = 0
    for path, text in FILES.items():
        data = text if isinstance(text, bytes) else text.encode()
        for o in extract(path, data).occurrences:
            expected.setdefault(o.name, {}).setdefault(path, []).append((o.line, o.column, o.role))
    pairs = sum(len(by_path) for by_path in expected.values())
    index = open_index(tmp_path / "index.sqlite")
    assert index is not None
    try:
        (rows,) = index.db.execute("SELECT count(*) FROM occurrences WHERE length(positions) > 0").fetchone()
        assert rows < pairs - 50  # the generated header's macros, among others, have no row
        for name, by_path in expected.items():
            found = index.occurrences(name)
            assert {p: sorted(s) for p, s in found.items()} == {p: sorted(s) for p, s in by_path.items()}, name
        # Defined, never an identifier occurrence: not made up from the definition (Ruby's `attr_reader :radius`
        # names a field with a symbol literal; for the native scanner `bool` is a keyword).
        for name in index.symbol_names():
            assert {p: sorted(s) for p, s in index.occurrences(name).items()} == {
                p: sorted(s) for p, s in expected.get(name, {}).items()
            }, name
    finally:
        index.close()


def test_the_native_writer_stores_the_rows_the_scanner_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The C rows inserted by _lex.Writer (its own connection, no Python objects) against the same rows returned
    # by scan_c and inserted with executemany.
    work = make_repo(tmp_path / "work", FILES)
    head = str(pygit2.Repository(str(work)).head.peel(pygit2.Commit).id)
    build_index(tmp_path / "writer.sqlite", work, head, {"repo": "r"}, None)
    monkeypatch.setattr(native, "row_writer", lambda _path, _scratch: None)
    build_index(tmp_path / "rows.sqlite", work, head, {"repo": "r"}, None)
    written, returned = _tables(tmp_path / "writer.sqlite"), _tables(tmp_path / "rows.sqlite")
    assert written == returned
    names = {row[1] for row in written["symbols"]}
    assert {"caf\u00e9", "bad\ufffd", "queue_init", "REG_49"} <= names


def test_an_index_of_the_previous_format_is_rebuilt_not_misread(tmp_path: Path, runtime: Runtime) -> None:
    repo = register_local_repo(runtime, make_repo(tmp_path / "work", {"a.c": "int shared;\nint f(void);\n"}), "a/b")
    head = str(pygit2.Repository(str(repo.mirror_path)).head.peel(pygit2.Commit).id)
    nav = runtime.get(CodeNavService)
    path = nav.index_file(repo, head)
    nav.index_revision(repo, head).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (str(FORMAT - 1),))
    db.commit()
    db.close()
    assert open_index(path) is None
    rebuilt = nav.index_revision(repo, head)
    try:
        assert rebuilt.meta("format") == str(FORMAT)
        assert rebuilt.occurrences("shared") == {"a.c": [(1, 5, "d")]}
    finally:
        rebuilt.close()


def test_a_build_that_fails_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The native writer's transaction is open when the extraction fails: both connections are closed and the
    # half-written file removed; nothing is left at the target.
    work = make_repo(tmp_path / "work", FILES)
    head = str(pygit2.Repository(str(work)).head.peel(pygit2.Commit).id)

    def failing(path: str, data: bytes | memoryview, **kwargs: object) -> object:
        if path == "include/generated.h":
            raise RuntimeError("extraction failed")
        return extract(path, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("codewell.codenav.builder.extract", failing)
    with pytest.raises(RuntimeError, match="extraction failed"):
        build_index(tmp_path / "out" / "index.sqlite", work, head, {"repo": "r"}, None)
    assert list((tmp_path / "out").iterdir()) == []


def test_names_that_decode_alike_keep_every_position(tmp_path: Path) -> None:
    # Two spellings whose invalid UTF-8 decodes to the same name: two rows of one (name, file) in the occurrences
    # table, whose key is the whole row; both are read back.
    source = b"int bad\xff;\nint bad\xfe;\nint f(void) { return bad\xff + bad\xfe; }\n"
    work = make_repo(tmp_path / "work", {"a.c": source})
    head = str(pygit2.Repository(str(work)).head.peel(pygit2.Commit).id)
    build_index(tmp_path / "index.sqlite", work, head, {"repo": "r"}, None)
    index = open_index(tmp_path / "index.sqlite")
    assert index is not None
    try:
        found = index.occurrences("bad\ufffd")
        assert sorted(found["a.c"]) == [(1, 5, "d"), (2, 5, "d"), (3, 22, "r"), (3, 29, "r")]
        (rows,) = index.db.execute("SELECT count(*) FROM occurrences WHERE name = 'bad\ufffd'").fetchone()
        assert rows == 2
    finally:
        index.close()
