"""Definition detection per language (table-driven) and the ordering rules of `rank`."""

from __future__ import annotations

import re
import time

import pytest

from codewell.search.index.languages import LANGUAGES
from codewell.search.query.regex import compile_regex
from codewell.search.ranking import (
    DEFINITIONS,
    definition_lines,
    definition_spans,
    is_definition,
    looks_like_code,
    match_quality,
    phrase_regex,
    rank,
)
from codewell.search.results import FileMatch, LineMatch


def ranges(line: str, word: str) -> list[tuple[int, int]]:
    """Byte ranges of `word` in `line`, as the service computes them (case-insensitive)."""
    raw = line.encode("utf-8")
    return [m.span() for m in re.finditer(re.escape(word.encode("utf-8")), raw, re.IGNORECASE)]


# (language, line, searched word, is a definition of it)
CASES = [
    # C / C++
    ("C", "static int foo(struct device *dev)", "foo", True),
    ("C", "int foo(void) { return 0; }", "foo", True),
    ("C", "foo(struct device *dev)", "foo", True),  # second line of `static int\nfoo(...)`
    ("C", "static inline struct page *foo(unsigned long pfn,", "foo", True),
    ("C", "struct foo {", "foo", True),
    ("C", "struct foo", "foo", True),
    ("C", "enum foo {", "foo", True),
    ("C", "union foo {", "foo", True),
    ("C", "typedef struct foo {", "foo", True),
    ("C", "#define FOO 1", "FOO", True),
    ("C", "#  define FOO(x) ((x) + 1)", "FOO", True),
    ("C", "typedef unsigned long foo_t;", "foo_t", True),
    ("C", "typedef int (*foo_fn)(int);", "foo_fn", True),
    ("C", "} foo_t;", "foo_t", True),
    ("C", "static const struct file_operations foo_fops = {", "foo_fops", True),
    ("C", "\tret = foo(dev);", "foo", False),
    ("C", "\tfoo(dev);", "foo", False),
    ("C", "// calls foo()", "foo", False),
    ("C", " * foo() - does things", "foo", False),
    ("C", "/* foo() */", "foo", False),
    ("C", 'printf("foo(%d)\\n", x);', "foo", False),
    ("C", "int foo(void);", "foo", False),  # a prototype
    ("C", "EXPORT_SYMBOL(foo);", "foo", False),
    ("C", "return foo(x,", "foo", False),
    ("C", "static int bar(int foo)", "foo", False),  # a parameter, not the defined name
    ("C", "struct foo *bar(void)", "foo", False),  # the return type, bar is defined
    ("C", "struct foo;", "foo", False),
    ("C", "#include <foo.h>", "foo", False),
    ("C++", "void Widget::foo(int x) const", "foo", True),
    ("C++", "Widget::~Widget()", "Widget", True),
    ("C++", "std::map<int, std::vector<int>> foo(int x)", "foo", True),
    ("C++", "class Foo : public Bar {", "Foo", True),
    ("C++", "namespace foo {", "foo", True),
    ("C++", "enum class Color : int {", "Color", True),
    ("C++", "class Foo;", "Foo", False),
    ("C++", "\tauto x = foo(1);", "foo", False),
    # Python
    ("Python", "def foo(x):", "foo", True),
    ("Python", "    async def foo(self):", "foo", True),
    ("Python", "class Foo(Base):", "Foo", True),
    ("Python", "FOO = 3", "FOO", True),
    ("Python", "foo: dict[str, int] = {}", "foo", True),
    ("Python", "type Foo = int", "Foo", True),
    ("Python", "    foo = 3", "foo", False),  # a local variable
    ("Python", "    return foo(x)", "foo", False),
    ("Python", "# calls foo()", "foo", False),
    ("Python", 'print("def foo")', "foo", False),
    ("Python", "foo == 3", "foo", False),
    ("Python", "def bar(foo):", "foo", False),
    # Go
    ("Go", "func Foo(x int) error {", "Foo", True),
    ("Go", "func (r *Reader) Foo(p []byte) (int, error) {", "Foo", True),
    ("Go", "func Map[T any](xs []T) []T {", "Map", True),
    ("Go", "type Foo struct {", "Foo", True),
    ("Go", "\ttype foo int", "foo", True),
    ("Go", "const Foo = 1", "Foo", True),
    ("Go", "func (r *Foo) Read(p []byte) (int, error) {", "Foo", False),  # the receiver type
    ("Go", "\treturn Foo(x)", "Foo", False),
    ("Go", "// Foo does things", "Foo", False),
    # Rust
    ("Rust", "pub fn foo(x: u32) -> u32 {", "foo", True),
    ("Rust", "    pub(crate) async unsafe fn foo() {", "foo", True),
    ("Rust", 'pub extern "C" fn foo() {', "foo", True),
    ("Rust", "struct Foo {", "Foo", True),
    ("Rust", "pub enum Foo {", "Foo", True),
    ("Rust", "pub trait Foo {", "Foo", True),
    ("Rust", "type Foo = u32;", "Foo", True),
    ("Rust", "const FOO: u32 = 1;", "FOO", True),
    ("Rust", "static mut FOO: u32 = 1;", "FOO", True),
    ("Rust", "mod foo;", "foo", True),
    ("Rust", "macro_rules! foo {", "foo", True),
    ("Rust", "    let x = foo(1);", "foo", False),
    ("Rust", "impl Foo for Bar {", "Foo", False),
    ("Rust", "/// See foo()", "foo", False),
    # Java
    ("Java", "public class Foo extends Bar {", "Foo", True),
    ("Java", "public interface Foo {", "Foo", True),
    ("Java", "    public static <T> List<T> foo(List<T> xs) {", "foo", True),
    ("Java", "    private Map<String, List<Integer>> foo(int x) {", "foo", True),
    ("Java", "    @Override public String foo() {", "foo", True),
    ("Java", "    public Foo(int x) {", "Foo", True),  # a constructor
    ("Java", "    private static final int FOO = 1;", "FOO", True),
    ("Java", "        return foo(x);", "foo", False),
    ("Java", "        int y = foo(x);", "foo", False),
    ("Java", "        Foo f = new Foo(x);", "Foo", False),
    ("Java", "        int foo = 1;", "foo", False),  # a local variable
    ("Java", "        // calls foo()", "foo", False),
    # Kotlin
    ("Kotlin", "fun foo(x: Int): Int {", "foo", True),
    ("Kotlin", "    private suspend fun foo() {", "foo", True),
    ("Kotlin", "fun String.foo(): String =", "foo", True),
    ("Kotlin", "data class Foo(val x: Int)", "Foo", True),
    ("Kotlin", "object Foo {", "Foo", True),
    ("Kotlin", "const val FOO = 1", "FOO", True),
    ("Kotlin", "    val y = foo(x)", "foo", False),
    # C#
    ("C#", "public sealed class Foo : Bar", "Foo", True),
    ("C#", "    public async Task<int> FooAsync(int x)", "FooAsync", True),
    ("C#", "    [HttpGet] public IActionResult Foo()", "Foo", True),
    ("C#", "    public int Foo { get; set; }", "Foo", True),
    ("C#", "namespace Acme.Foo", "Foo", True),
    ("C#", "        var x = Foo(1);", "Foo", False),
    ("C#", "        return Foo(1);", "Foo", False),
    ("C#", "        await FooAsync(1);", "FooAsync", False),
    # Scala
    ("Scala", "  def foo(x: Int): Int =", "foo", True),
    ("Scala", "case class Foo(x: Int)", "Foo", True),
    ("Scala", "object Foo {", "Foo", True),
    ("Scala", "  private[pkg] lazy val foo = 1", "foo", True),
    ("Scala", "    foo(1)", "foo", False),
    # Swift
    ("Swift", "func foo(x: Int) -> Int {", "foo", True),
    ("Swift", "    public static func foo() {", "foo", True),
    ("Swift", "@objc private func foo() {", "foo", True),
    ("Swift", "struct Foo {", "Foo", True),
    ("Swift", "protocol Foo {", "Foo", True),
    ("Swift", "    let y = foo(x)", "foo", False),
    # JavaScript / TypeScript
    ("JavaScript", "function foo(a, b) {", "foo", True),
    ("JavaScript", "export default async function foo() {", "foo", True),
    ("JavaScript", "export class Foo extends Bar {", "Foo", True),
    ("JavaScript", "const foo = (a) => a + 1;", "foo", True),
    ("JavaScript", "  static async foo(a, b) {", "foo", True),
    ("JavaScript", "  foo(a);", "foo", False),
    ("JavaScript", "  if (foo(a)) {", "foo", False),
    ("JavaScript", "  it('calls foo', () => {", "foo", False),
    ("JavaScript", "  foo('x', function () {", "foo", False),
    ("JavaScript", "// calls foo()", "foo", False),
    ("TypeScript", "export interface Foo {", "Foo", True),
    ("TypeScript", "export type Foo = string | number;", "Foo", True),
    ("TypeScript", "export const enum Foo {", "Foo", True),
    ("TypeScript", "declare function foo(x: number): void;", "foo", True),
    ("TypeScript", "  private foo(a: string): Promise<void> {", "foo", True),
    ("TypeScript", "  const x: Foo = bar();", "Foo", False),
    # Ruby
    ("Ruby", "  def foo(x)", "foo", True),
    ("Ruby", "  def self.foo?", "foo", True),
    ("Ruby", "class Foo < Bar", "Foo", True),
    ("Ruby", "module Acme::Foo", "Foo", True),
    ("Ruby", "FOO = 1", "FOO", True),
    ("Ruby", "    foo(x)", "foo", False),
    ("Ruby", "  # calls foo", "foo", False),
    # PHP
    ("PHP", "    public static function foo($x)", "foo", True),
    ("PHP", "function &foo() {", "foo", True),
    ("PHP", "final class Foo extends Bar", "Foo", True),
    ("PHP", "    const FOO = 1;", "FOO", True),
    ("PHP", "define('FOO', 1);", "FOO", True),
    ("PHP", "    $x = foo(1);", "foo", False),
    ("PHP", "    $this->foo();", "foo", False),
    # Shell
    ("Shell", "foo() {", "foo", True),
    ("Shell", "function foo {", "foo", True),
    ("Shell", "  foo arg1 arg2", "foo", False),
    ("Shell", 'echo "foo() {"', "foo", False),
    # Lua
    ("Lua", "function foo(a)", "foo", True),
    ("Lua", "local function foo(a)", "foo", True),
    ("Lua", "function M.foo(a)", "foo", True),
    ("Lua", "M.foo = function(a)", "foo", True),
    ("Lua", "  local x = foo(a)", "foo", False),
    ("Lua", "-- calls foo()", "foo", False),
    # Others in the table, and languages without one
    ("Perl", "sub foo {", "foo", True),
    ("Kconfig", "config FOO", "FOO", True),
    ("Kconfig", "\tdepends on FOO", "FOO", False),
    ("Markdown", "def foo(x):", "foo", False),
    ("", "def foo(x):", "foo", False),
]


@pytest.mark.parametrize(("language", "line", "word", "expected"), CASES)
def test_definition_forms(language: str, line: str, word: str, expected: bool) -> None:
    found = ranges(line, word)
    assert found, "the case must contain the searched word"
    assert is_definition(language, line, found) is expected


def test_table_uses_language_names_from_the_index() -> None:
    assert set(DEFINITIONS) <= set(LANGUAGES)
    assert all(form.groupindex.get("name") for forms in DEFINITIONS.values() for form in forms)


def test_partial_overlap_counts_and_no_ranges_never_do() -> None:
    # A match overlapping the defined name counts, like Zoekt's partial symbol matches.
    assert is_definition("C", "static int frobnicate_all(void)", ranges("static int frobnicate_all(void)", "frob"))
    assert is_definition("Python", "def foo():", []) is False


def test_spans_are_byte_offsets_in_non_ascii_lines() -> None:
    line = "def résumé(x):"
    assert definition_spans("Python", line) == [(4, 12)]
    assert is_definition("Python", line, ranges(line, "résumé"))
    assert not is_definition("Python", line, ranges(line, "x"))


def test_long_and_hostile_lines_are_quick() -> None:
    started = time.monotonic()
    for language in DEFINITIONS:
        for line in ("a<" * 500, "int " + "x " * 500 + "foo", "foo(" + "a," * 2000 + ")", "<" * 1000 + ">" * 20):
            is_definition(language, line, [(0, 3)])
    assert time.monotonic() - started < 2


def test_definition_lines_keeps_line_order() -> None:
    f = file(
        "a.py",
        "Python",
        [(1, "import foo"), (5, "def foo():"), (9, "    foo()"), (12, "class Foo:")],
        word="foo",
    )
    assert [m.line_number for m in definition_lines(f)] == [5, 12]


# Ordering ----------------------------------------------------------------------------------------------------


def file(
    path: str, language: str, lines: list[tuple[int, str]], *, word: str = "foo", path_match: bool = False
) -> FileMatch:
    return FileMatch(
        "r",
        path,
        "0" * 40,
        language,
        [LineMatch(n, text, ranges(text, word)) for n, text in lines],
        path_match,
    )


def calls(n: int) -> list[tuple[int, str]]:
    return [(i + 1, f"\tfoo({i});") for i in range(n)]


def test_definition_outranks_references_whatever_the_count() -> None:
    caller = file("a.c", "C", calls(50))
    definer = file("some/much/longer/path/z.c", "C", [(10, "int foo(int x)")])
    files = [caller, definer]
    rank(files)
    assert files == [definer, caller]
    assert definer.score > caller.score


def test_name_match_outranks_definition() -> None:
    definer = file("a.c", "C", [(10, "int foo(int x)")])
    named = file("foo.h", "C", [], path_match=True)
    files = [definer, named]
    rank(files)
    assert files == [named, definer]


def test_name_match_with_definition_outranks_name_match_alone() -> None:
    named = file("foo.h", "C", calls(20), path_match=True)
    named_definer = file("lib/foo.c", "C", [(3, "int foo(int x)")], path_match=True)
    files = [named, named_definer]
    rank(files)
    assert files == [named_definer, named]


def test_more_matches_then_shorter_path() -> None:
    few = file("a.c", "C", calls(1))
    many = file("b.c", "C", calls(3))
    long_path = file("deeper/dir/c.c", "C", calls(3))
    files = [long_path, few, many]
    rank(files)
    assert files == [many, long_path, few]


def test_more_matches_among_definers() -> None:
    one = file("a.c", "C", [(1, "int foo(int x)")])
    two = file("b.c", "C", [(1, "int foo(int x)"), (7, "\tfoo(1);")])
    files = [one, two]
    rank(files)
    assert files == [two, one]


def test_ties_keep_index_order() -> None:
    files = [file(f"d{i}/x.c", "C", calls(2)) for i in range(5)]
    files += [file(f"e{i}/x.c", "C", [(1, "int foo(void)")]) for i in range(5)]
    expected = files[5:] + files[:5]
    rank(files)
    assert files == expected


def test_lines_within_a_file_are_not_reordered() -> None:
    f = file("a.c", "C", [(1, "\tfoo(1);"), (4, "int foo(int x)"), (9, "\tfoo(2);")])
    before = list(f.line_matches)
    rank([f])
    assert f.line_matches == before


# Match quality and code-looking queries (#22) ------------------------------------------------------------------

QUALITY = [
    # (terms, lines of one file, expected quality)
    (["def", "main"], ["def main(argv):"], 3),
    (["def", "main"], ["    return cli.main()", "def run():"], 2),
    (["def", "main"], ["the default is main"], 1),
    (["def", "main"], ["default values for the remaining args"], 0),
    (["cli", "main"], ["cli.main(args=args)"], 3),
    (["cli", "main"], ["cli = 1  # see the main entry point"], 2),
    (["foo"], ["x = foo(1)"], 2),
    (["foo"], ["x = foobar(1)"], 0),
    (["foo"], ["x = foobar(1) + foo"], 2),
    (["résumé"], ["un résumé ici"], 2),
    (["sumé"], ["un résumé ici"], 0),  # a non-ASCII letter continues the word
]


@pytest.mark.parametrize(("terms", "lines", "expected"), QUALITY)
def test_match_quality(terms: list[str], lines: list[str], expected: int) -> None:
    f = FileMatch(
        "r",
        "a.py",
        "0" * 40,
        "Python",
        [LineMatch(n, text, sorted({r for t in terms for r in ranges(text, t)})) for n, text in enumerate(lines, 1)],
    )
    assert match_quality(f, terms) == expected


@pytest.mark.parametrize(
    ("terms", "code"),
    [
        (["def", "main"], True),
        (["mutex_lock"], True),
        (["os.path"], True),
        (["getUserName"], True),
        (["foo("], True),
        (["remaining", "args"], False),
        (["hello", "world"], False),
    ],
)
def test_looks_like_code(terms: list[str], code: bool) -> None:
    assert looks_like_code(terms) is code


def test_phrase_regex_means_the_same_in_re2_and_python() -> None:
    regex = phrase_regex(["def", "main"])
    assert regex is not None
    assert phrase_regex(["main"]) is None
    compiled = compile_regex(regex, case_sensitive=False)
    for line, expected in [
        ("def main():", True),
        ("DEF  MAIN", True),
        ("def default main", False),
        ("undef main", False),
        ("def mainly", False),
        ("def::main", True),
        ("def ->  main", False),  # four separator characters
    ]:
        assert bool(compiled.search(line.encode())) is expected, line
        assert bool(re.search(regex, line, re.ASCII | re.IGNORECASE)) is expected, line


def test_code_outranks_prose_for_code_queries_only() -> None:
    prose = file("CHANGES.md", "Markdown", [(1, "foo_bar changed"), (2, "foo_bar again")], word="foo_bar")
    code = file("src/deeper/path/x.py", "Python", [(9, "    return foo_bar")], word="foo_bar")
    files = [prose, code]
    rank(files, ["foo_bar"])
    assert files == [code, prose]
    prose2 = file("NOTES.md", "Markdown", [(1, "hello world"), (2, "hello world")], word="hello")
    code2 = file("src/deeper/path/x.py", "Python", [(9, "print('hello')")], word="hello")
    files = [prose2, code2]
    rank(files, ["hello"])
    assert files == [prose2, code2]  # not code-looking: more lines, shorter path win


def test_whole_words_outrank_parts_of_words() -> None:
    parts = file("a.md", "Markdown", [(n, f"default value {n}") for n in range(1, 30)], word="def")
    whole = file("zz/long/path/b.txt", "Text", [(3, "def is a keyword")], word="def")
    files = [parts, whole]
    rank(files, ["def"])
    assert files == [whole, parts]
