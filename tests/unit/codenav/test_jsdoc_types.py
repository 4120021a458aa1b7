"""JavaScript receivers typed the ways TypeScript's checker reads a JSDoc-typed project (codenav/jsdoc.py), on a real
git repository shaped like a template compiler's renderer: wrapper classes with a base class in another module,
fields typed by plain class names, `@typedef` aliases, arrays and nullable fields, variables typed only by what they
are built from or assigned, and a `Component` class whose members share every name, so that an answer by name alone
would be a guess.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.gitfixtures import make_repo, register_local_repo

REPO = "acme/render"
INTERFACES = (
    "export interface Options {\n"
    "    dev: boolean;\n"  # 2
    "    name: string;\n"  # 3
    "}\n"
)
COMPONENT = (  # the same member names on an unrelated class: what the name alone cannot tell apart
    "export default class Component {\n"
    "    renderer;\n"  # 2
    "    parent;\n"  # 3
    "    options;\n"  # 4
    "    get_unique_name(name) {\n"  # 5
    "        return name\n"
    "    }\n"
    "    is_dom_node() {\n"  # 8
    "        return false\n"
    "    }\n"
    "    child() {\n"  # 11
    "        return this\n"
    "    }\n"
    "}\n"
)
BLOCK = (
    "export default class Block {\n"
    "    /** @type {Block} */\n"
    "    parent;\n"  # 3: typed by its own class's plain name
    "\n"
    "    /** @type {Block | null} */\n"
    "    next = null;\n"  # 6: that or nothing
    "\n"
    "    /** @param {string} name */\n"
    "    get_unique_name(name) {\n"  # 9
    "        return name\n"
    "    }\n"
    "\n"
    "    /** @returns {Block} */\n"
    "    child() {\n"  # 14
    "        return new Block()\n"
    "    }\n"
    "}\n"
    "\n"
    "/**\n"
    " * @param {string} name\n"
    " * @returns {Block}\n"
    " */\n"
    "export function create_block(name) {\n"  # 23
    "    return new Block()\n"
    "}\n"
)
RENDERER = (
    "import Block from './Block.js';\n"
    "\n"
    "/**\n"
    " * @typedef {import('./interfaces.js').Options\n"
    " *     | null} Options\n"
    " */\n"
    "export default class Renderer {\n"
    "    /** @type {Options} */\n"
    "    options;\n"  # 9: a `@typedef` of the file, over two lines
    "\n"
    "    /** @type {Block[]} */\n"
    "    blocks = [];\n"  # 12: an imported class's array
    "\n"
    "    /** @param {Block} block */\n"
    "    add(block) {\n"
    "        this.blocks.push(block.child());\n"  # 16
    "    }\n"
    "\n"
    "    names() {\n"
    "        for (const b of this.blocks) {\n"
    "            b.get_unique_name('x');\n"  # 21: an element of `Block[]`
    "        }\n"
    "        return this.blocks\n"
    "            .map((item) => item.parent);\n"  # 24: a callback's element, the array on the line above
    "    }\n"
    "}\n"
)
WRAPPER = (
    "export default class Wrapper {\n"
    "    /** @type {import('../../Renderer.js').default} */\n"
    "    renderer;\n"  # 3
    "\n"
    "    /** @type {Wrapper} */\n"
    "    parent;\n"  # 6
    "\n"
    "    /** @type {import('../../Block.js').default} */\n"
    "    block;\n"  # 9
    "\n"
    "    is_dom_node() {\n"  # 11
    "        return false\n"
    "    }\n"
    "}\n"
)
IF_WRAPPER = (
    "import Wrapper from './shared/Wrapper.js';\n"
    "import Block, { create_block } from '../Block.js';\n"
    "\n"
    "export default class IfWrapper extends Wrapper {\n"
    "    render() {\n"
    "        const { renderer } = this;\n"  # 6: `renderer` is this.renderer
    "        const { options } = renderer;\n"  # 7: ... and `options` renderer.options
    "        if (options.dev) this.block.parent.get_unique_name('if');\n"  # 8
    "        const parent = this.parent;\n"  # 9: typed by what it is assigned
    "        const built = new Block();\n"  # 10
    "        const made = create_block('if');\n"  # 11: typed by the function's @returns
    "        const nested = built.child();\n"  # 12: ... and by a method's
    "        const first = /** @type {Block} */ (renderer.blocks[0]);\n"  # 13: a cast
    "        return [\n"
    "            parent.is_dom_node(),\n"  # 15
    "            built.get_unique_name('a'),\n"  # 16
    "            made.get_unique_name('b'),\n"  # 17
    "            nested.get_unique_name('c'),\n"  # 18
    "            first.get_unique_name('d'),\n"  # 19
    "            this.block.next.get_unique_name('e'),\n"  # 20
    "            this.parent.renderer.options.name,\n"  # 21: the field a base in another module types
    "        ];\n"
    "    }\n"
    "}\n"
)
ELSE_WRAPPER = "import Wrapper from './shared/Wrapper.js';\n\nexport default class ElseWrapper extends Wrapper {}\n"
USE = (
    "/**\n"
    " * @param {import('./wrappers/IfWrapper.js').default | import('./wrappers/ElseWrapper.js').default} branch\n"
    " */\n"
    "export function mount(branch) {\n"
    "    return branch.is_dom_node();\n"  # 5: both inherit Wrapper's
    "}\n"
    "\n"
    "/** @param {import('./Block.js').default} node */\n"
    "export function name_block(node) {\n"
    "    return node.get_unique_name('block');\n"  # 10: this `node` is a Block
    "}\n"
    "\n"
    "/** @param {import('./Component.js').default} node */\n"
    "export function name_component(node) {\n"
    "    return node.get_unique_name('component');\n"  # 15: and this one a Component
    "}\n"
    "\n"
    "/** @param {import('./nodes.js').Owner} owner */\n"
    "export function owner_of(owner) {\n"
    "    return owner.parent;\n"  # 20: of the alias's types, only Block has a `parent`
    "}\n"
)
NODES = (  # a type alias of classes the declaration file imports
    "import Block from './Block';\n"
    "import Renderer from './Renderer';\n"
    "\n"
    "export type Owner =\n"
    "    | Block\n"
    "    | Renderer;\n"
)
FILES = {
    "src/interfaces.d.ts": INTERFACES,
    "src/nodes.d.ts": NODES,
    "src/Component.js": COMPONENT,
    "src/Block.js": BLOCK,
    "src/Renderer.js": RENDERER,
    "src/wrappers/shared/Wrapper.js": WRAPPER,
    "src/wrappers/IfWrapper.js": IF_WRAPPER,
    "src/wrappers/ElseWrapper.js": ELSE_WRAPPER,
    "src/use.js": USE,
}
TYPED = "member of its JSDoc type"


@pytest.fixture
def nav(runtime: Runtime, tmp_path: Path) -> CodeNavService:
    register_local_repo(runtime, make_repo(tmp_path / "render", FILES), REPO)
    return runtime.get(CodeNavService)


def definition(nav: CodeNavService, path: str, symbol: str) -> tuple[str, int, str]:
    top = nav.go_to_definition(INTERNAL, REPO, path, symbol).candidates[0]
    return top.path, top.line, top.reason


def references(nav: CodeNavService, path: str, symbol: str) -> set[tuple[str, int]]:
    found = nav.find_references(INTERNAL, REPO, path, symbol, limit=100)
    return {(f.path, line) for f in found.files for line, _, _ in f.lines}


def test_plain_type_names_bind_like_the_checker(nav: CodeNavService) -> None:
    # `@type {Block}` in Block.js: the file's own class.
    assert definition(nav, "src/wrappers/IfWrapper.js", "this.block.parent.get_unique_name") == (
        "src/Block.js",
        9,
        TYPED,
    )
    # `@typedef {import(...).Options | null} Options` (over two lines of the comment), then `@type {Options}`.
    assert definition(nav, "src/Renderer.js", "this.options.dev") == ("src/interfaces.d.ts", 2, TYPED)
    # `@param {Block} block` with Block imported.
    assert definition(nav, "src/Renderer.js", "block.child") == ("src/Block.js", 14, TYPED)


def test_nullable_and_array_types(nav: CodeNavService) -> None:
    # `@type {Block | null}`: the member of Block.
    assert definition(nav, "src/wrappers/IfWrapper.js", "this.block.next.get_unique_name") == ("src/Block.js", 9, TYPED)
    # `@type {Block[]}`: `for (const b of this.blocks)` and `this.blocks\n.map((item) => ...)` take its elements.
    assert definition(nav, "src/Renderer.js", "b.get_unique_name") == ("src/Block.js", 9, TYPED)
    assert definition(nav, "src/Renderer.js", "item.parent") == ("src/Block.js", 3, TYPED)


def test_a_base_class_in_another_module(nav: CodeNavService) -> None:
    # `this.parent` is declared by Wrapper (imported): its `@type {Wrapper}` there, then Wrapper's members.
    assert definition(nav, "src/wrappers/IfWrapper.js", "this.parent.renderer.options.name") == (
        "src/interfaces.d.ts",
        3,
        TYPED,
    )
    # A union of two subclasses that both inherit the member from that base.
    assert definition(nav, "src/use.js", "branch.is_dom_node") == ("src/wrappers/shared/Wrapper.js", 11, TYPED)
    # A `.d.ts` type alias stands for the union it names: Block's `parent` (Renderer has none).
    assert definition(nav, "src/use.js", "owner.parent") == ("src/Block.js", 3, TYPED)


def test_variables_typed_by_what_they_are_built_from(nav: CodeNavService) -> None:
    path = "src/wrappers/IfWrapper.js"
    assert definition(nav, path, "parent.is_dom_node") == ("src/wrappers/shared/Wrapper.js", 11, TYPED)  # = this.parent
    assert definition(nav, path, "built.get_unique_name") == ("src/Block.js", 9, TYPED)  # new Block()
    assert definition(nav, path, "made.get_unique_name") == ("src/Block.js", 9, TYPED)  # a function's @returns
    assert definition(nav, path, "nested.get_unique_name") == ("src/Block.js", 9, TYPED)  # a method's @returns
    assert definition(nav, path, "first.get_unique_name") == ("src/Block.js", 9, TYPED)  # /** @type {Block} */ (...)


def test_destructured_names_are_the_receivers_members(nav: CodeNavService) -> None:
    path = "src/wrappers/IfWrapper.js"
    # `const { renderer } = this`: the bare name is the member the base class declares.
    found = definition(nav, path, "renderer")
    assert found[:2] == ("src/wrappers/shared/Wrapper.js", 3)
    # `const { options } = renderer`, `renderer` itself destructured from `this`: Renderer's field.
    assert definition(nav, path, "options.dev") == ("src/interfaces.d.ts", 2, TYPED)


def test_references_follow_the_binding_each_use_sees(nav: CodeNavService) -> None:
    found = references(nav, "src/Block.js", "Block.get_unique_name")
    # Two functions of use.js call their own `node`'s get_unique_name: a Block's, then a Component's.
    assert ("src/use.js", 10) in found
    assert ("src/use.js", 15) not in found
    assert {
        ("src/Renderer.js", 21),
        ("src/wrappers/IfWrapper.js", 8),
        ("src/wrappers/IfWrapper.js", 16),
        ("src/wrappers/IfWrapper.js", 17),
        ("src/wrappers/IfWrapper.js", 18),
        ("src/wrappers/IfWrapper.js", 19),
        ("src/wrappers/IfWrapper.js", 20),
    } <= found
    assert ("src/use.js", 15) in references(nav, "src/Component.js", "Component.get_unique_name")
    # Wrapper.is_dom_node through a variable assigned `this.parent` and a union of subclasses.
    assert {("src/wrappers/IfWrapper.js", 15), ("src/use.js", 5)} <= references(
        nav, "src/wrappers/shared/Wrapper.js", "Wrapper.is_dom_node"
    )
