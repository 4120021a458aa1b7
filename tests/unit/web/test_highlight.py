"""Highlighting of the file view: the tree-sitter highlighter's output (escaped, exact, classed), the Pygments
fallback, the highlight store on disk (survives a new app instance, bounded, damage-tolerant), and the search
page's result blocks built in Python."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from markupsafe import Markup, escape

from codewell.core.settings import Settings
from codewell.runtime import Runtime
from codewell.search.results import FileMatch, LineMatch
from codewell.web import highlight, highlight_ts
from codewell.web.highlight import HighlightStore, highlight_lines
from codewell.web.pages import LINES_PER_FILE, _escaped, _marked, _result_block

HOSTILE_LINES = [
    '<script>alert("x")</script> \'single\' "double" &amp; &lt; -> ::',
    "a\x00b = '\x00'; /* NUL \x00 in a comment */",
    b"invalid \xff\xfe utf-8 \xc3( decoded as read_file does".decode("utf-8", "replace"),
    "\"unterminated <b>string & 'quote",
    "/* a comment <img src=x onerror=alert(1)>",
    "   still the comment </span> */ x = 1;",
    '"""a docstring <i>',
    '"""',
    "ünïcode_names = «guillemets» + 漢字 // </script>",
    "",
]
HOSTILE_FILES = ["x.c", "x.h", "x.cpp", "x.py", "x.go", "x.rs", "x.js", "x.ts", "x.tsx", "x.java"]
_TAG = re.compile(r"<[^>]*>")
_ALLOWED_TAG = re.compile(r'<span class="[a-z0-9]+">|</span>')


def _text_of(fragment: str) -> str:
    return html.unescape(_TAG.sub("", fragment))


@pytest.fixture(autouse=True)
def _fresh_memory_cache() -> None:
    highlight._highlighted.cache_clear()


@pytest.mark.parametrize("name", HOSTILE_FILES)
def test_tree_sitter_output_escapes_everything_and_preserves_the_text_exactly(name: str) -> None:
    assert highlight_ts.grammar_for(f"src/{name}") is not None  # this test is about the tree-sitter path
    out = highlight_lines(f"src/{name}", HOSTILE_LINES)
    assert len(out) == len(HOSTILE_LINES)
    for line, fragment in zip(HOSTILE_LINES, out, strict=True):
        # The only markup is our own balanced spans: the file's tags, quotes and entities are text.
        tags = _TAG.findall(fragment)
        assert all(_ALLOWED_TAG.fullmatch(tag) for tag in tags), (name, fragment)
        assert fragment.count("<span") == fragment.count("</span>"), (name, fragment)
        assert "\n" not in fragment
        assert '"' not in _TAG.sub("", fragment)
        assert "'" not in _TAG.sub("", fragment)
        assert _text_of(fragment) == line, (name, fragment)


def test_tree_sitter_output_uses_pygments_classes_for_c() -> None:
    source = [
        "#include <linux/kernel.h>",
        '#include "local.h"',
        "/* block",
        "   comment */",
        "static int count_items(struct item *p, unsigned long n)",
        "{",
        "\tchar c = 'x'; // line comment",
        '\treturn p->next ? 0x1f + n : strlen("text");',
        "}",
    ]
    out = highlight_lines("drivers/x.c", source)
    assert out[0].startswith('<span class="cp">#include</span> <span class="cpf">&lt;linux/kernel.h&gt;</span>')
    assert '<span class="cpf">&#34;local.h&#34;</span>' in out[1]
    assert out[2] == '<span class="c">/* block</span>'
    assert out[3] == '<span class="c">   comment */</span>'
    assert '<span class="k">static</span> <span class="kt">int</span>' in out[4]
    assert '<span class="nf">count_items</span>' in out[4]
    assert '<span class="k">struct</span> <span class="n">item</span>' in out[4]
    assert '<span class="sc">&#39;x&#39;</span>' in out[6]
    assert '<span class="c">// line comment</span>' in out[6]
    # Member access keeps the shape navigation.py links (`owner` `->` `name`), numbers and strings their classes.
    assert '<span class="n">p</span><span class="o">-&gt;</span><span class="n">next</span>' in out[7]
    assert '<span class="m">0x1f</span>' in out[7]
    assert '<span class="s">&#34;text&#34;</span>' in out[7]


def test_tree_sitter_output_uses_pygments_classes_for_python() -> None:
    source = [
        "class Store(Base):",
        '    """Docs."""',
        "    def get(self, key: str) -> bool:  # why",
        "        return len(key) > 3 and key is not None or True",
    ]
    out = highlight_lines("pkg/store.py", source)
    assert out[0].startswith('<span class="k">class</span> <span class="nc">Store</span>(<span class="n">Base</span>)')
    assert out[1] == '    <span class="s">&#34;&#34;&#34;Docs.&#34;&#34;&#34;</span>'
    assert '<span class="k">def</span> <span class="nf">get</span>(<span class="bp">self</span>' in out[2]
    assert '<span class="nb">str</span>' in out[2]
    assert '<span class="c"># why</span>' in out[2]
    assert '<span class="nb">len</span>' in out[3]
    assert '<span class="m">3</span>' in out[3]
    assert '<span class="ow">and</span>' in out[3]
    assert '<span class="kc">None</span>' in out[3]


def test_languages_without_a_grammar_use_pygments_and_lone_surrogates_fall_back_to_it() -> None:
    assert highlight_ts.grammar_for("page.html") is None
    page = highlight_lines("page.html", ["<script>alert(1)</script>"])
    assert '<span class="nt">script</span>' in page[0]
    assert "<script" not in page[0]
    # Text that is not valid UTF-8 once encoded (surrogateescape'd bytes) cannot be parsed: Pygments instead.
    odd = ["int x = 1; // \udcff <b>"]
    assert highlight_ts.highlight_html("c", odd[0]) is None
    out = highlight_lines("x.c", odd)
    assert _text_of(out[0]) == odd[0]
    assert "<b>" not in out[0]


def test_the_highlight_store_survives_a_new_app_instance(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    source = [f"int f{n}(void) {{ return {n}; }}" for n in range(50)]
    first = Runtime.open(settings)
    try:
        highlighted = highlight_lines("src/f.c", source, first.get(HighlightStore))
    finally:
        first.close()
    stored = list((settings.data_dir / "web" / "highlight").iterdir())
    assert len(stored) == 1
    assert not stored[0].name.startswith(".tmp")

    highlight._highlighted.cache_clear()  # a new process: nothing in memory

    def highlighted_again(path: str, text: str, count: int) -> tuple[Markup, ...]:
        raise AssertionError("highlighted again instead of read from the store")

    monkeypatch.setattr(highlight, "_render", highlighted_again)
    second = Runtime.open(settings)
    try:
        assert highlight_lines("src/f.c", source, second.get(HighlightStore)) == highlighted
        # Another text (one character changed) is another entry: it is highlighted, not served a stale copy.
        with pytest.raises(AssertionError, match="highlighted again"):
            highlight_lines("src/f.c", [*source[:-1], "int g(void);"], second.get(HighlightStore))
    finally:
        second.close()


def test_the_store_key_is_the_content_and_the_file_name_not_the_directory(tmp_path: Path) -> None:
    store = HighlightStore(tmp_path)
    highlight_lines("a/x.c", ["int x;"], store)
    highlight_lines("b/x.c", ["int x;"], store)  # same blob under another directory: the same entry
    highlight_lines("b/x.py", ["int x;"], store)  # another name may be another language: another entry
    assert len(list(tmp_path.iterdir())) == 2


def test_the_store_stays_within_its_bound_and_keeps_the_recently_used(tmp_path: Path) -> None:
    fragments = tuple(Markup(f'<span class="n">v{n}_{"x" * 40}</span>') for n in range(200))
    HighlightStore(tmp_path / "probe").put("probe", fragments)
    size = (tmp_path / "probe" / "probe.hl").stat().st_size
    tmp_path = tmp_path / "store"
    store = HighlightStore(tmp_path, max_bytes=size * 3)
    for key in ("first", "second", "third"):
        store.put(key, fragments)
    assert store.get("first", len(fragments)) == fragments  # used: now the most recent
    store.put("fourth", fragments)  # over the bound: the least recently used go
    left = {p.name for p in tmp_path.iterdir()}
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= size * 3
    assert "first.hl" in left
    assert "fourth.hl" in left
    assert "second.hl" not in left
    assert store.get("second", len(fragments)) is None


def test_a_damaged_or_mismatched_entry_is_a_miss(tmp_path: Path) -> None:
    store = HighlightStore(tmp_path)
    fragments = (Markup("a"), Markup("b"))
    store.put("key", fragments)
    assert store.get("key", 3) is None  # not the asked number of lines
    (tmp_path / "key.hl").write_bytes(b"not zlib")
    assert store.get("key", 2) is None
    assert not (tmp_path / "key.hl").exists()
    assert highlight_lines("x.c", ["int a;"], HighlightStore(tmp_path / "missing" / "dir"))[0]


def test_search_result_blocks_escape_the_repository_text_and_mark_matches() -> None:
    line = '<script>alert("linus torvalds")</script>'
    start = line.encode().index(b"linus")
    matches = [LineMatch(n, line, [(start, start + 14)]) for n in range(1, LINES_PER_FILE + 3)]
    found = FileMatch('acme/"x"', 'dir/<b>"q".c', "abc123", "C", matches)
    block = str(_result_block(found))
    assert "<script" not in block
    assert "<b>" not in block
    assert 'href="/acme/&#34;x&#34;@abc123/-/blob/dir/&lt;b&gt;&#34;q&#34;.c?L3#L3"' in block
    # The first LINES_PER_FILE lines shown, the other two behind "show more" (a <details>, no JavaScript).
    shown, more = block.split('<details class="more-matches">')
    assert shown.count("<mark>linus torvalds</mark>") == LINES_PER_FILE
    assert "Show 2 more matching lines" in more
    assert more.count("<mark>linus torvalds</mark>") == 2


def test_tree_sitter_output_for_javascript_and_go() -> None:
    js = highlight_lines("app/main.js", ["function init() { const $el = `t ${x}`; return /a+b/.test($el); }"])[0]
    assert '<span class="k">function</span> <span class="nf">init</span>' in js
    assert '<span class="k">const</span> <span class="n">$el</span>' in js
    assert '<span class="s">`t ${x}`</span>' in js
    assert '<span class="sr">/a+b/</span>' in js
    go = highlight_lines("cmd/main.go", ['func (s *Server) Run(n int) error { return fmt.Errorf("%d", n) }'])[0]
    assert '<span class="k">func</span>' in go
    assert '<span class="nf">Run</span>' in go
    assert '<span class="kt">int</span>' in go
    assert '<span class="kt">error</span>' in go
    assert '<span class="n">fmt</span><span class="p">.</span><span class="n">Errorf</span>' in go


def test_the_search_page_escapes_exactly_as_markupsafe_does() -> None:
    samples = ["", "plain", "<a href=\"x\" title='y'>&amp;</a>", "\x00\ufffd漢字 <>&\"'", "&&<<>>''\"\""]
    for text in samples:
        assert _escaped(text) == str(escape(text))
    # Non-ASCII lines: the ranges are byte offsets into the UTF-8 form.
    line = "é <b>needle</b> ü"
    start = line.encode().index(b"needle")
    assert _marked(line, [(start, start + 6)]) == "é &lt;b&gt;<mark>needle</mark>&lt;/b&gt; ü"
    assert _marked("x needle", [(2, 8), (0, 99), (5, 3)]) == "x <mark>needle</mark>"  # bad ranges are ignored
