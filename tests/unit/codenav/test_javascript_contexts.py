"""find_references in JavaScript where TypeScript's checker gives a use its type from where it stands
(codenav/jsdoc.py, js_scopes.py): a property read on a union of node classes (each type's member, the union
narrowed by `node.type === 'Text'`, `instanceof` and the `if`/`while` conditions around the use), and object
properties typed by their context (a callback's destructured element, `for (const { x } of xs)`, an object passed
to a method whose `@param` types it or pushed onto a typed array). Each rule has a near miss it must not count.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.gitfixtures import make_repo, register_local_repo

REPO = "acme/nodes"
NODE = (
    "/**\n"
    " * @template {string} Type\n"
    " */\n"
    "export default class Node {\n"
    "    /** @type {Type} */\n"
    "    type;\n"  # 6: each subclass fills Type through `@extends Node<'...'>`
    "}\n"
)
TEXT = (
    "import Node from './shared/Node.js';\n"
    "\n"
    "/** @extends Node<'Text'> */\n"
    "export default class Text extends Node {\n"
    "    /** @type {string} */\n"
    "    data;\n"  # 6
    "}\n"
)
COMMENT = TEXT.replace("'Text'", "'Comment'").replace("class Text", "class Comment")
ELEMENT = TEXT.replace("'Text'", "'Element'").replace("class Text", "class Element").replace("data;", "children;")
SLOT = (
    "import Element from './Element.js';\n"
    "\n"
    "export default class Slot extends Element {\n"
    "    /** @type {'Slot'} */\n"
    "    type = 'Slot';\n"  # 5: its own declaration of the discriminant
    "}\n"
)
INTERFACES = (
    "import Text from './Text';\n"
    "import Comment from './Comment';\n"
    "import Element from './Element';\n"
    "import Slot from './Slot';\n"
    "\n"
    "export type INode = Text | Comment | Element | Slot;\n"
)
USE = (
    "import Text from './nodes/Text.js';\n"
    "\n"
    "/** @param {import('./nodes/interfaces.js').INode} node */\n"
    "export function describe(node) {\n"
    "    if (node.type === 'Text') {\n"  # 5: every type's `type`: Slot's own and the one Node declares
    "        return node.data;\n"  # 6: narrowed to Text by the `if` around it
    "    }\n"
    "    if (node.type === 'Comment' && node.data) return 'c';\n"  # 8: narrowed on the line
    "    if (node instanceof Text ? node.data : '') return 't';\n"  # 9: narrowed by instanceof
    "    if (node.type === 'Comment') return String(node.data);\n"  # 10: by the `if` the line opens with
    "}\n"
    "\n"
    "/** @param {import('./nodes/interfaces.js').INode} node */\n"
    "export function text_of(node) {\n"
    "    return node.type === 'Text' || node.data;\n"  # 15: `||` guards nothing: Text's and Comment's
    "}\n"
    "\n"
    "/** @param {import('./nodes/interfaces.js').INode} node */\n"
    "export function walk(node) {\n"
    "    while (\n"
    "        node &&\n"
    "        (node.type === 'Comment' ||\n"
    "            node.type === 'Element')\n"
    "    ) {\n"
    "        node.data;\n"  # 25: a condition over several lines narrows to Comment | Element
    "    }\n"
    "}\n"
)
BRANCH = (
    "export default class Branch {\n"
    "    /** @type {string} */\n"
    "    condition;\n"  # 3
    "    /** @type {boolean} */\n"
    "    dynamic;\n"  # 5
    "}\n"
)
VARS = (
    "export interface Var {\n"
    "    name: string;\n"
    "    writable: boolean;\n"  # 3
    "}\n"
)
RENDERER = (
    "import Branch from './Branch.js';\n"
    "\n"
    "export default class Renderer {\n"
    "    /** @type {Branch[]} */\n"
    "    branches = [];\n"
    "    /** @type {import('./vars.js').Var[]} */\n"
    "    vars = [];\n"
    "\n"
    "    /** @param {import('./vars.js').Var} variable */\n"
    "    add_var(variable) {\n"
    "        this.vars.push(variable);\n"
    "    }\n"
    "\n"
    "    render() {\n"
    "        this.branches.map(({ condition }) => condition);\n"  # 15: an element of Branch[]
    "        for (const { dynamic } of this.branches) dynamic;\n"  # 16
    "        this.add_var({ name: 'a', writable: true });\n"  # 17: add_var's @param types the object
    "        this.vars.push({ name: 'b', writable: false });\n"  # 18: pushed onto a Var[]
    "        const first = this.branches[0];\n"
    "        return first.condition;\n"  # 20: an indexed element
    "    }\n"
    "}\n"
    "\n"
    "export function unrelated(make) {\n"
    "    make({ condition: 1, writable: 2 });\n"  # 25: nothing types `make`'s parameter
    "}\n"
    "\n"
    "/** @param {Renderer} renderer */\n"
    "export function first_dynamic(renderer) {\n"
    "    const found = renderer.branches.find((b) => b.dynamic);\n"
    "    const names = renderer.branches.filter((b) => b.dynamic).map((c) => c.condition);\n"  # 31: a chain's element
    "    return found.condition + names;\n"  # 32: `find` gives an element
    "}\n"
)
RULE = "export default class Rule {\n    /** @type {string} */\n    condition;\n}\n"  # the name alone is ambiguous
TEXT_USE = (
    "/** @param {import('./nodes/interfaces.js').INode} node */\n"
    "export function trimmed(node) {\n"
    "    return node.type === 'Text' && node.data.trim();\n"
    "}\n"
)
COMPILE_TYPES = (
    "interface Base {\n"
    "    start: number;\n"  # 2
    "}\n"
    "export interface Style extends Base {\n"
    "    content: {\n"
    "        start: number;\n"  # 6: the inline type's, not Style's
    "    };\n"
    "}\n"
    "export interface Result {\n"
    "    js: string;\n"  # 10
    "}\n"
    "export interface Source {\n"
    "    filename: string;\n"  # 13
    "}\n"
)
HASH = "export default function hash(text) {\n    return text.length;\n}\n"
COMPILER = (
    "import hash from './hash.js';\n"
    "\n"
    "export default class Compiler {\n"
    "    /** @type {import('./compile.js').Style} */\n"
    "    style;\n"
    "\n"
    "    /** @returns {import('./compile.js').Result} */\n"
    "    generate() {\n"
    "        return { js: '' };\n"  # 9: typed by generate's @returns
    "    }\n"
    "\n"
    "    hash() {\n"  # 12: a method of the same name as the import
    "        return hash(String(this.style.start));\n"  # 13: the import's, and Base's `start`
    "    }\n"
    "}\n"
    "\n"
    "/**\n"
    " * @param {number} offset\n"
    " * @param {import('./compile.js').Source} opts\n"
    " */\n"
    "export function slice(offset, { filename }) {\n"  # 21: the pattern in the place of `opts`
    "    return filename + offset;\n"
    "}\n"
    "\n"
    "/** @type {import('./compile.js').Source} */\n"
    "let current;\n"
    "export function reset() {\n"
    "    current = { filename: 'x' };\n"  # 28: typed as the variable it is assigned to
    "}\n"
)
TREE_BASE = (
    "/**\n"
    " * @template [Parent=import('./Root.js').default]\n"
    " */\n"
    "export default class Base {\n"
    "    /** @type {Parent} */\n"
    "    parent;\n"
    "}\n"
)
TREE_ROOT = "export default class Root {\n    /** @type {string} */\n    label;\n}\n"
TREE_HOLDER = TREE_ROOT.replace("Root", "Holder")
TREE_LEAF = (
    "import Base from './Base.js';\n"
    "\n"
    "/** @extends Base<import('./Holder.js').default> */\n"
    "export default class Leaf extends Base {}\n"
)
TREE_USE = (
    "/** @param {import('./Leaf.js').default} leaf */\n"
    "export function leaf_label(leaf) {\n"
    "    return leaf.parent.label;\n"  # 3: Leaf fills Base's Parent with Holder
    "}\n"
    "\n"
    "/** @param {import('./Base.js').default} base */\n"
    "export function base_label(base) {\n"
    "    return base.parent.label;\n"  # 8: the parameter's default, Root
    "}\n"
)
FILES = {
    "src/tree/Base.js": TREE_BASE,
    "src/tree/Root.js": TREE_ROOT,
    "src/tree/Holder.js": TREE_HOLDER,
    "src/tree/Leaf.js": TREE_LEAF,
    "src/tree/use.js": TREE_USE,
    "src/nodes/shared/Node.js": NODE,
    "src/nodes/Text.js": TEXT,
    "src/nodes/Comment.js": COMMENT,
    "src/nodes/Element.js": ELEMENT,
    "src/nodes/Slot.js": SLOT,
    "src/nodes/interfaces.d.ts": INTERFACES,
    "src/use.js": USE,
    "src/Branch.js": BRANCH,
    "src/vars.d.ts": VARS,
    "src/Renderer.js": RENDERER,
    "src/Rule.js": RULE,
    "src/text.js": TEXT_USE,
    "src/compile.d.ts": COMPILE_TYPES,
    "src/hash.js": HASH,
    "src/Compiler.js": COMPILER,
}


@pytest.fixture
def nav(runtime: Runtime, tmp_path: Path) -> CodeNavService:
    register_local_repo(runtime, make_repo(tmp_path / "nodes", FILES), REPO)
    return runtime.get(CodeNavService)


def definition(nav: CodeNavService, path: str, symbol: str) -> tuple[str, int]:
    top = nav.go_to_definition(INTERNAL, REPO, path, symbol).candidates[0]
    return top.path, top.line


def references(nav: CodeNavService, path: str, symbol: str) -> set[tuple[str, int]]:
    found = nav.find_references(INTERNAL, REPO, path, symbol, limit=100)
    if found.text_matches:  # mentions by name only, offered when no reference is found
        return set()
    return {(f.path, line) for f in found.files for line, _, _ in f.lines}


def test_a_union_member_is_a_reference_to_each_types_member(nav: CodeNavService) -> None:
    # `node.type` on an INode: Slot declares its own, the other classes inherit Node's.
    assert ("src/use.js", 5) in references(nav, "src/nodes/Slot.js", "Slot.type")
    assert ("src/use.js", 5) in references(nav, "src/nodes/shared/Node.js", "Node.type")
    # Without a test that guards it, `node.data` is Text's and Comment's.
    assert ("src/use.js", 15) in references(nav, "src/nodes/Text.js", "Text.data")
    assert ("src/use.js", 15) in references(nav, "src/nodes/Comment.js", "Comment.data")


def test_a_union_is_narrowed_by_the_tests_that_guard_the_use(nav: CodeNavService) -> None:
    text = references(nav, "src/nodes/Text.js", "Text.data")
    comment = references(nav, "src/nodes/Comment.js", "Comment.data")
    # `if (node.type === 'Text') {` around the use; `instanceof Text ?` on its line.
    assert {("src/use.js", 6), ("src/use.js", 9)} <= text
    assert not {("src/use.js", 6), ("src/use.js", 9)} & comment
    # `node.type === 'Comment' && node.data`, `if (node.type === 'Comment') return ...(node.data)` and a `while`
    # condition over several lines.
    assert {("src/use.js", 8), ("src/use.js", 10), ("src/use.js", 25)} <= comment
    assert not {("src/use.js", 8), ("src/use.js", 10), ("src/use.js", 25)} & text


def test_object_properties_typed_by_their_context(nav: CodeNavService) -> None:
    assert {("src/Renderer.js", 15), ("src/Renderer.js", 20)} <= references(nav, "src/Branch.js", "Branch.condition")
    assert ("src/Renderer.js", 16) in references(nav, "src/Branch.js", "Branch.dynamic")
    assert {("src/Renderer.js", 17), ("src/Renderer.js", 18)} <= references(nav, "src/vars.d.ts", "Var.writable")


def test_an_object_nothing_types_is_not_counted(nav: CodeNavService) -> None:
    # `make({ condition: 1, writable: 2 })`: `make` is an untyped parameter, so the keys are the object's own.
    assert ("src/Renderer.js", 25) not in references(nav, "src/Branch.js", "Branch.condition")
    assert ("src/Renderer.js", 25) not in references(nav, "src/vars.d.ts", "Var.writable")


def test_array_methods_and_their_chains_give_elements(nav: CodeNavService) -> None:
    found = references(nav, "src/Branch.js", "Branch.condition")
    assert {("src/Renderer.js", 31), ("src/Renderer.js", 32)} <= found
    assert not {("src/Renderer.js", 31), ("src/Renderer.js", 32)} & references(nav, "src/Rule.js", "Rule.condition")


def test_returned_assigned_and_parameter_objects(nav: CodeNavService) -> None:
    # A pattern parameter takes the `@param` in its place; an assigned object the variable's `@type`.
    assert {("src/Compiler.js", 21), ("src/Compiler.js", 28)} <= references(nav, "src/compile.d.ts", "Source.filename")
    # go_to_definition of a bare name the file writes only as a property: `return { js }` under `@returns {Result}`.
    assert definition(nav, "src/Compiler.js", "js") == ("src/compile.d.ts", 10)


def test_definitions_read_through_narrowing_and_scopes(nav: CodeNavService) -> None:
    # `node.type === 'Text' && node.data`: Text's, though the union's Comment has a `data` too.
    assert definition(nav, "src/text.js", "node.data") == ("src/nodes/Text.js", 6)
    # A bare `hash()` in a method named `hash` calls the import, never the method.
    assert definition(nav, "src/Compiler.js", "hash") == ("src/hash.js", 1)
    # `content: { start }` is the inline type's member: Style's `start` is the one Base declares.
    assert definition(nav, "src/Compiler.js", "this.style.start") == ("src/compile.d.ts", 2)


def test_a_base_template_parameter_is_the_subclass_argument_else_its_default(nav: CodeNavService) -> None:
    holder = references(nav, "src/tree/Holder.js", "Holder.label")
    root = references(nav, "src/tree/Root.js", "Root.label")
    assert ("src/tree/use.js", 3) in holder
    assert ("src/tree/use.js", 3) not in root
    assert ("src/tree/use.js", 8) in root
    assert ("src/tree/use.js", 8) not in holder
