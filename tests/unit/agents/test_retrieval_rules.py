"""The retrieval pipeline's general rules, without a model: the repositories a task names are filters and never
search terms, code outranks docs, changelogs, CI files and tests unless the question asks for them, and the
answer quotes the few lines of a cited range that hold the question's words."""

from __future__ import annotations

from dataclasses import dataclass

from codewell.agents.naming import named_repositories, without_names
from codewell.agents.retrieval import extract_terms, file_kind, kind_prior, quote


@dataclass(frozen=True)
class _Ref:
    name: str


def _terms(task: str, *names: str) -> tuple[str, ...]:
    words = {w for name in names for w in name.lower().replace(".", "/").split("/")}
    terms = extract_terms(without_names(task, names), ignore=frozenset(words))
    return (*terms.identifiers, *terms.keywords)


def test_repository_words_are_filters_never_search_terms() -> None:
    task = "Where does github.com/spf13/cobra generate the bash completion script?"
    assert _terms(task, "github.com/spf13/cobra") == ("generate", "bash", "completion", "script")
    # The short name and a host-prefixed form of a registered `org/name` are the repository too.
    assert _terms("how does cobra parse flags", "spf13/cobra") == ("parse", "flags")
    assert _terms("where in github.com/spf13/cobra are flags parsed", "spf13/cobra") == ("flags", "parsed")
    # Without the repository removed, `github.com` would be searched for as a dotted identifier.
    assert "github.com" in extract_terms(task).identifiers
    # A word that only contains the short name is kept.
    assert _terms("where are cobras counted", "spf13/cobra") == ("cobras", "counted")


def test_a_host_prefixed_name_names_the_registered_repository() -> None:
    readable = [_Ref("spf13/cobra"), _Ref("pallets/click")]
    assert named_repositories("where does github.com/spf13/cobra run hooks", readable) == [readable[0]]
    assert named_repositories("where does cobra run hooks", readable) == [readable[0]]
    assert named_repositories("where are hooks run", readable) == []


def test_file_kinds() -> None:
    assert file_kind("cobra/command.go") == "code"
    assert file_kind("lib/response.js") == "code"
    assert file_kind("History.md") == "changelog"
    assert file_kind("CHANGELOG.rst") == "changelog"
    assert file_kind("README.md") == "docs"
    assert file_kind("site/content/completions/bash.md") == "docs"
    assert file_kind("docs/guide/index.html") == "docs"
    assert file_kind("doc/md_docs.go") == "code"  # source files in a documentation folder are code
    assert file_kind("typings/esm.d.mts") == "stub"
    assert file_kind(".github/workflows/test.yml") == "ci"
    assert file_kind(".travis.yml") == "ci"
    assert file_kind("command_test.go") == "test"
    assert file_kind("tests/test_parser.py") == "test"
    assert file_kind("test/app.router.js") == "test"
    assert file_kind("src/router.spec.ts") == "test"
    assert file_kind("dist/index.js") == "code"  # some packages ship only their built code
    assert file_kind("dist/index.min.js") == "vendored"
    assert file_kind("vendor/github.com/x/y.go") == "vendored"
    assert file_kind("examples/hello/main.go") == "example"
    assert file_kind("package.json") == "config"
    assert file_kind("click/__init__.pyi") == "stub"


def test_code_outranks_other_kinds_unless_the_question_asks_for_them() -> None:
    plain = extract_terms("where are flags parsed")
    assert kind_prior("flags.go", plain) == 1.0
    for left_out in ("README.md", "History.md", ".github/workflows/ci.yml", "flags_test.go", "vendor/a/b.go"):
        assert kind_prior(left_out, plain) is None, left_out
    assert kind_prior("package.json", plain) == 0.5  # weighed down, not left out
    # What the question asks for comes before the code around it.
    assert kind_prior("flags_test.go", extract_terms("how do the tests check flag parsing")) == 1.3
    assert kind_prior("README.md", extract_terms("what does the documentation say about flags")) == 1.3
    assert kind_prior("History.md", extract_terms("which changelog entry mentions flags")) == 1.3
    assert kind_prior(".github/workflows/ci.yml", extract_terms("which CI workflow runs the linter")) == 1.3
    assert kind_prior("flags.go", extract_terms("how do the tests check flag parsing")) == 1.0


def test_quote_keeps_the_head_and_the_lines_with_question_words() -> None:
    lines = [
        "def split_opts(args):",
        '    """Split raw arguments into options and values."""',
        "    out = []",
        *[f"    step_{i} = {i}" for i in range(20)],
        "    for arg in args:  # each raw option",
        "        out.append(arg)",
        "    return out",
    ]
    got = quote(lines, 10, extract_terms("where are raw arguments split into options"), limit=6)
    assert got[:3] == [
        "10: def split_opts(args):",
        '11:     """Split raw arguments into options and values."""',
        "12:     out = []",
    ]
    assert "…" in got  # skipped lines are marked
    assert "33:     for arg in args:  # each raw option" in got
    assert len([g for g in got if g != "…"]) <= 6
    # A short range is quoted whole; a long line is cut with a mark.
    assert quote(["x = 1", "y = 2"], 1, extract_terms("where is x set")) == ["1: x = 1", "2: y = 2"]
    cut = quote(["z = '" + "a" * 300 + "'"], 7, extract_terms("where is z set"))[0]
    assert cut.endswith("…")
    assert len(cut) < 200


def test_words_that_ask_for_a_kind_of_file_select_files_and_are_not_searched_for() -> None:
    terms = extract_terms("Which tests check that a command fails with too many arguments?")
    assert "test" in terms.asked_kinds
    assert "tests" not in terms.keywords
    assert "test" not in terms.stems
    assert terms.keywords == ("check", "command", "fails", "too", "many", "arguments")
    docs = extract_terms("where is the package documentation of path variables")
    assert "docs" in docs.asked_kinds
    assert "documentation" not in docs.keywords
    # A question made only of such a word still searches for it.
    assert extract_terms("tests").keywords == ("tests",)


def test_header_names_and_flags_are_literal_strings() -> None:
    terms = extract_terms("Where is the Access-Control-Allow-Methods header set, and what does --inspect do?")
    assert terms.quoted == ("Access-Control-Allow-Methods", "--inspect")
    assert "header" in terms.keywords
    # Ordinary hyphenated English words stay words.
    assert extract_terms("where is trailing-slash matching done").quoted == ()
