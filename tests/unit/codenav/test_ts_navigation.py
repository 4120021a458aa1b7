"""TypeScript/JavaScript navigation rules on a real git repository shaped like a library with barrels.

The layout follows what real projects do (mobx's `internal.ts`, a package `index.ts`): modules import each
other's names from a barrel of `export * from` lines, the public entry point re-exports from that barrel, and a
`global.d.ts` declares build-time globals.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.codenav.extract import extract
from codewell.codenav.imports import parse_imports
from codewell.codenav.navigation import names_class, receiver_name
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.gitfixtures import make_repo, register_local_repo

REPO = "acme/observe"
FILES = {
    "src/global.d.ts": "declare const __DEV__: boolean\ndeclare function report(message: string): void\n",
    "src/internal.ts": (
        "// Load order matters: utilities first.\n"
        'export * from "./utils/utils"\n'
        'export * from "./core"\n'
        'export * from "./api/observable"\n'
    ),
    "src/core/index.ts": 'export * from "./atom"\nexport { Kind } from "./kind"\n',
    "src/core/kind.ts": "export const enum Kind {\n    Plain,\n    Deep\n}\n",
    "src/core/atom.ts": (
        'import { die, objectPrototype, type Lambda } from "../internal"\n'
        "\n"
        "export class Atom {\n"
        "    observers_ = new Set<Lambda>()\n"
        "    constructor(public name_: string) {}\n"
        "    reportObserved(): boolean {\n"
        "        if (__DEV__ && !this.name_) die(objectPrototype.toString())\n"
        "        return this.observers_.size > 0\n"
        "    }\n"
        "}\n"
        "\n"
        "export function createAtom(name: string): Atom {\n"
        "    return new Atom(name)\n"
        "}\n"
    ),
    "src/core/derivation.ts": (
        'import { Atom } from "./atom"\n'
        "\n"
        "export class Derivation {\n"
        "    reportObserved(): boolean {\n"
        "        return false\n"
        "    }\n"
        "}\n"
        "\n"
        "export function track(derivation: Derivation, atom: Atom): boolean {\n"
        "    const mine = derivation.reportObserved()\n"
        "    return mine || atom.reportObserved()\n"
        "}\n"
        "\n"
        "export function sizes(track: Track, atom: Atom): number[] {\n"
        "    const own = track.length\n"
        "    return [own, atom.name_.length]\n"
        "}\n"
        "\n"
        "export class Track {\n"
        "    length = 0\n"
        "}\n"
    ),
    "src/core/computed.ts": (
        'import { Atom } from "./atom"\n'
        "\n"
        "export class ComputedValue extends Atom {\n"
        "    get value(): boolean {\n"
        "        return this.reportObserved()\n"
        "    }\n"
        "}\n"
    ),
    "src/utils/utils.ts": (
        "export type Lambda = () => void\n"
        "export const objectPrototype = Object.prototype\n"
        "\n"
        "export function die(message: string): never {\n"
        "    throw new Error(message)\n"
        "}\n"
    ),
    "src/api/observable.ts": (
        'import { Atom, Kind, createAtom } from "../internal"\n'
        "\n"
        "export interface IObservableFactory {\n"
        "    kind: Kind\n"
        "    // call signatures on their own lines, without `;` (the grammar needs help there)\n"
        "    <T>(value: T): T\n"
        "    <T>(value: T, deep: boolean): T\n"
        "}\n"
        "\n"
        "export function observable(deep: boolean): Atom {\n"
        "    const atom = createAtom(deep ? 'deep' : 'plain')\n"
        "    atom.reportObserved()\n"
        "    return deep ? atom : new Atom(String(Kind.Deep))\n"
        "}\n"
    ),
    "src/index.ts": 'export { Atom, createAtom, observable, Kind } from "./internal"\n',
    "src/errors.js": (
        "export default {\n"
        "    invalid_atom: (name) => ({ code: 'invalid-atom', message: name }),\n"
        "    missing: { code: 'missing' }\n"
        "}\n"
    ),
    "src/store.js": (
        'import { createAtom } from "./index"\n'
        'import errors from "./errors.js"\n'
        "\n"
        "export default class ObservableStore {\n"
        "    atom = createAtom('store')\n"
        "    fail() { throw errors.invalid_atom('store') }\n"
        "}\n"
    ),
    "src/main.js": 'import Store from "./store.js"\n\nexport const store = new Store()\n',
    "src/app.ts": (
        'import { createAtom, Kind } from "./index"\n'
        'import * as mobx from "./internal"\n'
        "\n"
        "export const first = createAtom('first')\n"
        "export const second = mobx.createAtom(String(Kind.Plain))\n"
        "if (__DEV__) report('ready')\n"
    ),
}


@pytest.fixture
def nav(runtime: Runtime, tmp_path: Path) -> CodeNavService:
    register_local_repo(runtime, make_repo(tmp_path / "observe", FILES), REPO)
    return runtime.get(CodeNavService)


def definition(nav: CodeNavService, path: str, symbol: str) -> tuple[str, int]:
    top = nav.go_to_definition(INTERNAL, REPO, path, symbol).candidates[0]
    return top.path, top.line


def references(nav: CodeNavService, path: str, symbol: str) -> set[tuple[str, int]]:
    found = nav.find_references(INTERNAL, REPO, path, symbol, limit=100)
    assert not found.text_matches
    return {(f.path, line) for f in found.files for line, _, _ in f.lines}


def test_definitions_through_export_star_barrels(nav: CodeNavService) -> None:
    # app.ts → index.ts (`export { createAtom } from "./internal"`) → internal.ts (`export * from "./core"`)
    # → core/index.ts (`export * from "./atom"`) → core/atom.ts.
    assert definition(nav, "src/app.ts", "createAtom") == ("src/core/atom.ts", 12)
    answer = nav.go_to_definition(INTERNAL, REPO, "src/app.ts", "createAtom")
    assert answer.candidates[0].how == "syntactic"
    assert "re-exported" in answer.candidates[0].reason
    # `import * as mobx from "./internal"` then `mobx.createAtom`.
    assert definition(nav, "src/app.ts", "mobx.createAtom") == ("src/core/atom.ts", 12)
    # A named re-export of a sibling module (`export { Kind } from "./kind"`), reached through two barrels.
    assert definition(nav, "src/app.ts", "Kind") == ("src/core/kind.ts", 1)
    # A module importing from the barrel that re-exports it (import cycles through barrels are the norm).
    assert definition(nav, "src/core/atom.ts", "die") == ("src/utils/utils.ts", 4)
    assert definition(nav, "src/core/atom.ts", "objectPrototype") == ("src/utils/utils.ts", 2)
    assert definition(nav, "src/index.ts", "observable") == ("src/api/observable.ts", 10)
    # A default import names the default export whatever the local name (`import Store` of `ObservableStore`).
    answer = nav.go_to_definition(INTERNAL, REPO, "src/main.js", "Store")
    assert (answer.candidates[0].path, answer.candidates[0].line, answer.candidates[0].name) == (
        "src/store.js",
        4,
        "ObservableStore",
    )
    assert answer.candidates[0].how == "syntactic"
    # A member of a default-exported object, through the default import's local name.
    assert definition(nav, "src/store.js", "errors.invalid_atom") == ("src/errors.js", 2)
    assert references(nav, "src/errors.js", "invalid_atom") == {("src/store.js", 6)}
    # JavaScript importing from a TypeScript barrel.
    assert definition(nav, "src/store.js", "createAtom") == ("src/core/atom.ts", 12)


def test_references_through_barrels(nav: CodeNavService) -> None:
    assert references(nav, "src/core/atom.ts", "createAtom") == {
        ("src/api/observable.ts", 1),
        ("src/api/observable.ts", 11),
        ("src/index.ts", 1),
        ("src/app.ts", 1),
        ("src/app.ts", 4),
        ("src/app.ts", 5),  # mobx.createAtom, through the namespace import of the barrel
        ("src/store.js", 1),
        ("src/store.js", 5),
    }
    assert references(nav, "src/utils/utils.ts", "objectPrototype") == {
        ("src/core/atom.ts", 1),
        ("src/core/atom.ts", 7),
    }
    # A file that imports other names from the barrel does not see this one.
    assert ("src/api/observable.ts", 1) not in references(nav, "src/utils/utils.ts", "die")


def test_members_enum_members_and_declared_globals(nav: CodeNavService) -> None:
    # A method is reached through objects in any file: `atom.reportObserved()` in api/observable.ts. Another class
    # defines a method of that name too, so only receivers named like the class (`atom`, not `derivation`) count.
    assert references(nav, "src/core/atom.ts", "reportObserved") == {
        ("src/api/observable.ts", 12),
        ("src/core/derivation.ts", 11),
        ("src/core/computed.ts", 5),  # this.reportObserved() in a subclass
    }
    # ...and go_to_definition of `this.reportObserved` there finds it up the `extends` chain.
    inherited = nav.go_to_definition(INTERNAL, REPO, "src/core/computed.ts", "this.reportObserved").candidates[0]
    assert (inherited.path, inherited.line, inherited.how, inherited.reason) == (
        "src/core/atom.ts",
        6,
        "syntactic",
        "inherited from Atom",
    )
    assert references(nav, "src/core/derivation.ts", "reportObserved") == {("src/core/derivation.ts", 10)}
    # A member named like a built-in's (`length` of arrays and strings) counts only where the receiver says so.
    assert references(nav, "src/core/derivation.ts", "Track.length") == {("src/core/derivation.ts", 15)}
    # go_to_definition likewise prefers the receiver's class over the same file's method of that name.
    answer = nav.go_to_definition(INTERNAL, REPO, "src/core/derivation.ts", "atom.reportObserved")
    assert (answer.candidates[0].path, answer.candidates[0].line, answer.candidates[0].how) == (
        "src/core/atom.ts",
        6,
        "search-based",
    )
    assert definition(nav, "src/core/derivation.ts", "derivation.reportObserved") == ("src/core/derivation.ts", 4)
    # Enum members as `Kind.Deep`, in files that import the enum through barrels.
    assert references(nav, "src/core/kind.ts", "Deep") == {("src/api/observable.ts", 13)}
    assert references(nav, "src/core/kind.ts", "Plain") == {("src/app.ts", 5)}
    # `declare const` in a declaration file without imports is a global every file sees.
    assert definition(nav, "src/app.ts", "__DEV__") == ("src/global.d.ts", 1)
    assert references(nav, "src/global.d.ts", "__DEV__") == {("src/core/atom.ts", 7), ("src/app.ts", 6)}
    assert references(nav, "src/global.d.ts", "report") == {("src/app.ts", 6)}


def test_interface_call_signature_lines_keep_the_rest_of_the_file() -> None:
    source = FILES["src/api/observable.ts"].encode()
    names = {(s.name, s.kind) for s in extract("src/api/observable.ts", source).symbols}
    assert {("IObservableFactory", "interface"), ("kind", "field"), ("observable", "function")} <= names
    # The retry changes no offset: occurrences sit where the source has them.
    lines = source.decode().split("\n")
    for occurrence in extract("src/api/observable.ts", source).occurrences:
        start = occurrence.column - 1
        assert lines[occurrence.line - 1][start : start + len(occurrence.name)] == occurrence.name


def test_import_names_and_long_export_lists() -> None:
    bound = parse_imports("typescript", 'import { type Lambda, objectPrototype, type as kind } from "./utils"', 1)
    assert [(i.name, i.alias) for i in bound] == [
        ("Lambda", "Lambda"),
        ("objectPrototype", "objectPrototype"),
        ("type", "kind"),
    ]
    names = [f"name{n:03}" for n in range(600)]  # ~5,000 characters before the module string
    statement = "export {\n    " + ",\n    ".join(names) + '\n} from "./internal"'
    exported = parse_imports("typescript", statement, 1)
    assert [i.name for i in exported] == names
    assert {i.module for i in exported} == {"./internal"}
    assert parse_imports("javascript", 'export * from "./core"', 3) == [
        type(exported[0])("./core", "*", "", 3),
    ]


def test_receivers_named_like_classes_and_interfaces() -> None:
    assert names_class(receiver_name("atom"), "Atom")
    assert names_class(receiver_name("this.block_"[5:]), "Block")
    assert names_class(receiver_name("derivation"), "IDerivation")  # TypeScript's interface prefix
    assert not names_class(receiver_name("deal"), "Ideal")  # `Ideal` is no interface prefix
    assert not names_class(receiver_name("node"), "Atom")
    assert not names_class(receiver_name("_"), "I")


def test_super_this_and_declarations_above(runtime: Runtime, tmp_path: Path) -> None:
    files = {
        "src/base.js": "export class Base {\n  destroy() {}\n}\n",
        "src/dev.js": (
            "import { Base } from './base.js';\n"  # 1
            "\n"
            "export class Dev extends Base {\n"
            "  destroy() {\n"
            "    super.destroy();\n"  # 5
            "  }\n"
            "  check() {\n"
            "    return this.destroy();\n"
            "  }\n"
            "}\n"  # 10
            "\n"
            "export function helper() {\n"
            "  const destroy = () => 1;\n"
            "  return destroy();\n"
            "}\n"  # 15
        ),
        "src/types.d.ts": "export interface Node {\n  start: number;\n}\n",
        "src/parse/state/tag.js": "export function tag() {\n  return { start: 1 };\n}\n",
        "lib/other/anim.js": "export function start() {}\n",
    }
    register_local_repo(runtime, make_repo(tmp_path / "dev", files), "acme/dev")
    nav = runtime.get(CodeNavService)

    def top(path: str, symbol: str) -> tuple[str, int]:
        found = nav.go_to_definition(INTERNAL, "acme/dev", path, symbol).candidates[0]
        return found.path, found.line

    # `super.x` is the base class's member, not the override; `this.x` the class's member, not a function that
    # another function of the file declares (later in the file).
    assert top("src/dev.js", "super.destroy") == ("src/base.js", 2)
    assert top("src/dev.js", "this.destroy") == ("src/dev.js", 4)
    # Matched by name only: the declaration file of a folder above the file (one program with its JavaScript),
    # before a function of the same name in an unrelated folder.
    assert top("src/parse/state/tag.js", "start") == ("src/types.d.ts", 2)


def test_this_member_of_a_base_class_reached_through_imports(runtime: Runtime, tmp_path: Path) -> None:
    files = {
        "src/attr.js": (
            "export class BaseAttr {\n"  # 1
            "  /** @type {number} */\n"
            "  node;\n"
            "}\n"
            "\n"  # 5
            "export default class Attr extends BaseAttr {}\n"
        ),
        "src/style.js": (
            "import Attr from './attr.js';\n"  # 1
            "\n"
            "export default class StyleAttr extends Attr {\n"
            "  render() {\n"
            "    return this.node;\n"  # 5
            "  }\n"
            "}\n"
        ),
        "src/other.js": "export class Other {\n  node;\n  run() {\n    return this.node;\n  }\n}\n",
    }
    register_local_repo(runtime, make_repo(tmp_path / "attrs", files), "acme/attrs")
    found = runtime.get(CodeNavService).find_references(INTERNAL, "acme/attrs", "src/attr.js", "BaseAttr.node")
    # Two classes define `node`, so `this.node` counts where the enclosing class extends BaseAttr: StyleAttr does,
    # through Attr (a default import, then a class of that file); Other does not.
    assert [(f.path, [line for line, _, _ in f.lines]) for f in found.files] == [("src/style.js", [5])]
