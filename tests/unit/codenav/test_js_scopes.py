"""JavaScript/TypeScript local scopes in find_references, on a real git repository shaped like a DOM helper
library (a module of small exported functions whose names are also natural parameter and variable names) and a
compiler with wrapper classes that destructure their own fields (`const { renderer } = this`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.codenav.extract import extract
from codewell.codenav.js_scopes import destructured_members, shadowed_uses
from codewell.codenav.languages import grammar_of
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.gitfixtures import make_repo, register_local_repo

REPO = "acme/dom"
DOM = (
    "export function element(name) {\n"  # 1
    "    return document.createElement(name)\n"
    "}\n"
    "\n"
    "export function children(element) {\n"  # 5: a parameter named like the module's function
    "    return Array.from(element.childNodes)\n"
    "}\n"
    "\n"
    "export function append(target, node) {\n"  # 9
    "    const element = node || element('div')\n"  # 10: the local shadows from here to the block's end
    "    target.appendChild(element)\n"
    "}\n"
    "\n"
    "export function claim(nodes, { element, text }) {\n"  # 14: a destructured parameter
    "    return element ? nodes.map((n) => element(n)) : text\n"
    "}\n"
    "\n"
    "export function first(nodes) {\n"  # 18
    "    for (const element of nodes) {\n"  # 19: for-of binding: the loop only
    "        if (element) return element\n"
    "    }\n"
    "    try {\n"
    "        return element('span')\n"  # 23: the module's function again
    "    } catch (element) {\n"  # 24: a catch parameter
    "        return element\n"
    "    }\n"
    "}\n"
    "\n"
    "export const detach = (element) => element.remove()\n"  # 29: an arrow function's parameter
    "\n"
    "export function make() {\n"  # 31
    "    if (nodes) {\n"
    "        let element = 1\n"  # 33: a `let` in an inner block
    "        return element\n"
    "    }\n"
    "    return element('p')\n"  # 36: outside that block: the module's function
    "}\n"
)
USE = (
    'import { element, children } from "./dom.js"\n'  # 1
    "\n"
    "export function mount(target, anchor) {\n"  # 3
    "    const node = element('div')\n"  # 4
    "    return children(node)\n"
    "}\n"
    "\n"
    "export function unmount({ element: node, children }) {\n"  # 8: `children` bound, `element` a property name
    "    node.remove()\n"
    "    return children.length ? element('i') : null\n"  # 10: `children` the parameter, `element` the import
    "}\n"
)
WRAPPER = (
    "export default class Wrapper {\n"  # 1
    "    /** @type {import('./Renderer.js').default} */\n"
    "    renderer;\n"  # 3
    "    node;\n"
    "    constructor(renderer, node) {\n"
    "        this.renderer = renderer\n"  # 6
    "        this.node = node\n"
    "    }\n"
    "}\n"
)
TEXT_WRAPPER = (
    'import Wrapper from "./Wrapper.js"\n'
    "\n"
    "export default class TextWrapper extends Wrapper {\n"
    "    render() {\n"
    "        const { renderer, node } = this\n"  # 5: reads this.renderer and this.node
    "        const { renderer: other } = node\n"  # 6: node.renderer, not a Wrapper's
    "        return renderer.render(other)\n"
    "    }\n"
    "}\n"
)
RENDERER = (
    "export default class Renderer {\n"
    "    renderer;\n"  # 2: another class's member of the same name
    "    render(x) {\n"
    "        return x\n"
    "    }\n"
    "}\n"
)
# JSDoc-typed members: the shapes svelte's compiler uses (an interfaces.d.ts of node types, wrapper classes typed
# through `@extends Base<import(...).default>`, parameters typed with `@param {import(...).Name}`).
INTERFACES = (
    "interface BaseNode {\n"
    "    start: number;\n"  # 2
    "    children?: TemplateNode[];\n"  # 3
    "}\n"
    "export interface Text extends BaseNode {\n"
    "    data: string;\n"  # 6
    "}\n"
    "export interface Options {\n"
    "    filename?: string;\n"  # 9
    "    parser: Parser;\n"  # 10
    "}\n"
    "export interface Parser {\n"
    "    start: number;\n"  # 13
    "}\n"
    "export type TemplateNode = Text | BaseNode | Transition;\n"
    "export interface Transition extends BaseNode {\n"
    "    outro: boolean;\n"  # 17
    "}\n"
)
TEXT_NODE = (
    "export default class TextNode {\n"
    "    /** @type {string} */\n"
    "    data;\n"  # 3
    "    start;\n"  # 4
    "}\n"
)
BASE = (
    "/** @template {unknown} [NodeType=unknown] */\n"
    "export default class Base {\n"
    "    /** @type {NodeType} */\n"
    "    node;\n"
    "    start;\n"  # 5
    "}\n"
)
TEXT_VIEW = (
    'import Base from "./Base.js"\n'
    "\n"
    "/** @extends Base<import('../nodes/Text.js').default> */\n"
    "export default class TextView extends Base {\n"
    "    /** @type {import('../interfaces.js').Options} */\n"
    "    options;\n"
    "    render() {\n"
    "        return this.node.data + this.options.parser.start\n"
    "    }\n"
    "}\n"
)
PARSE = (
    "/**\n"
    " * @param {import('./interfaces.js').TemplateNode} info\n"
    " * @param {import('./interfaces.js').Options<string>} options\n"
    " */\n"
    "export function walk(info, options) {\n"
    "    return info.start + info.children.length + info.outro + options.filename\n"
    "}\n"
    "/**\n"
    " * @param {import('./nodes/Text.js').default} text\n"
    " * @param {import('./interfaces.js').Text} other\n"
    " */\n"
    "export function both(text, other) {\n"
    "    return text.data\n"  # 13
    "        + other.data\n"  # 14: interfaces' Text.data
    "}\n"
)
FILES = {
    "src/dom.js": DOM,
    "src/use.js": USE,
    "src/wrappers/Wrapper.js": WRAPPER,
    "src/wrappers/Text.js": TEXT_WRAPPER,
    "src/wrappers/Renderer.js": RENDERER,
    "src/interfaces.d.ts": INTERFACES,
    "src/nodes/Text.js": TEXT_NODE,
    "src/views/Base.js": BASE,
    "src/views/Text.js": TEXT_VIEW,
    "src/parse.js": PARSE,
}


@pytest.fixture
def nav(runtime: Runtime, tmp_path: Path) -> CodeNavService:
    register_local_repo(runtime, make_repo(tmp_path / "dom", FILES), REPO)
    return runtime.get(CodeNavService)


def references(nav: CodeNavService, path: str, symbol: str) -> set[tuple[str, int]]:
    found = nav.find_references(INTERNAL, REPO, path, symbol, limit=100)
    assert not found.text_matches
    return {(f.path, line) for f in found.files for line, _, _ in f.lines}


def test_local_bindings_shadow_a_module_function_in_its_own_file_and_in_importers(nav: CodeNavService) -> None:
    assert references(nav, "src/dom.js", "element") == {
        ("src/dom.js", 23),  # in the `try` block, outside the for-of loop and the catch clause
        ("src/dom.js", 36),  # after the block whose `let element` shadowed it
        ("src/use.js", 1),
        ("src/use.js", 4),
        ("src/use.js", 10),
    }
    # `children(element)` in dom.js is its definition; in use.js the destructured parameter shadows it on 8-10.
    assert references(nav, "src/dom.js", "children") == {("src/use.js", 1), ("src/use.js", 5)}


def test_destructuring_this_reads_the_member(nav: CodeNavService) -> None:
    assert references(nav, "src/wrappers/Wrapper.js", "Wrapper.renderer") == {
        ("src/wrappers/Wrapper.js", 6),
        ("src/wrappers/Text.js", 5),  # `const { renderer } = this` in a subclass
    }
    # `const { renderer: other } = node` is some other object's member: Renderer defines one too.
    assert ("src/wrappers/Text.js", 6) not in references(nav, "src/wrappers/Wrapper.js", "Wrapper.renderer")


def spots_of(path: str, source: str, name: str) -> list[tuple[int, int, str]]:
    return [(o.line, o.column, o.role) for o in extract(path, source.encode()).occurrences if o.name == name]


@pytest.mark.parametrize("path", ["src/dom.js", "src/dom.ts"])
def test_every_binding_form_shadows_in_javascript_and_typescript(path: str) -> None:
    source = DOM.replace("(element)", "(element: Node)") if path.endswith(".ts") else DOM
    spots = spots_of(path, source, "element")
    grammar = grammar_of(path)
    assert grammar is not None
    hidden = {line for line, _, _ in shadowed_uses(grammar, source.encode(), "element", spots)}
    plain = {line for line, _, role in spots if role == "r"}
    assert plain - hidden == {23, 36}
    assert {5, 6, 10, 11, 14, 15, 19, 20, 24, 25, 29, 33, 34} <= hidden


def test_a_spread_parameter_and_a_default_value() -> None:
    source = "const f = (...element) => element\nfunction g(x = element) { return x }\n"
    spots = spots_of("a.js", source, "element")
    grammar = grammar_of("a.js")
    assert grammar is not None
    hidden = shadowed_uses(grammar, source.encode(), "element", spots)
    assert {(line, column) for line, column, _ in hidden} == {(1, 27)}  # not the default's `element` on line 2


def test_destructured_members_name_the_receiver_as_written() -> None:
    source = "const { a, b: local, c = 1 } = this.node\nconst { d } = make()\nconst { e: { f } } = g\n"
    grammar = grammar_of("a.js")
    assert grammar is not None
    found: dict[tuple[int, int], str] = {}
    for name in "abcdef":
        found |= destructured_members(grammar, source.encode(), name, spots_of("a.js", source, name))
    assert found == {(1, 9): "this.node", (1, 12): "this.node", (1, 22): "this.node", (3, 9): "g"}


def definition(nav: CodeNavService, path: str, symbol: str) -> tuple[str, int]:
    top = nav.go_to_definition(INTERNAL, REPO, path, symbol).candidates[0]
    return top.path, top.line


def test_members_through_jsdoc_types(nav: CodeNavService) -> None:
    # `@param {import('./interfaces.js').TemplateNode} info`: a union alias, so the member of the base interface
    # the file's types extend (not Parser.start, nor TextNode.start elsewhere).
    assert definition(nav, "src/parse.js", "info.start") == ("src/interfaces.d.ts", 2)
    assert definition(nav, "src/parse.js", "info.children") == ("src/interfaces.d.ts", 3)
    assert definition(nav, "src/parse.js", "info.outro") == ("src/interfaces.d.ts", 17)  # the only one there
    assert definition(nav, "src/parse.js", "options.filename") == ("src/interfaces.d.ts", 9)  # `<string>` dropped
    # `this.node` typed by the base's template parameter, which `@extends Base<...>` fills in.
    assert definition(nav, "src/views/Text.js", "this.node.data") == ("src/nodes/Text.js", 3)
    # a field's `@type`, then a `.d.ts` member's `parser: Parser`.
    assert definition(nav, "src/views/Text.js", "this.options.parser.start") == ("src/interfaces.d.ts", 13)


def test_references_through_jsdoc_types(nav: CodeNavService) -> None:
    # Two classes have a `data`: the receivers' JSDoc types tell which one each `x.data` reads.
    assert references(nav, "src/nodes/Text.js", "TextNode.data") == {("src/parse.js", 13), ("src/views/Text.js", 8)}
    assert references(nav, "src/interfaces.d.ts", "Text.data") == {("src/parse.js", 14)}
