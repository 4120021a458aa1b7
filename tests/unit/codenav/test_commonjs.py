"""JavaScript navigation through CommonJS modules, on a real git repository shaped like express.

Every `require` form binds something codenav follows to its definition: `var f = require('./m').f`,
`const { a, b: c } = require('./m')`, `var m = require('./m'); m.name(...)`, `var X = require('./m')` with
`module.exports = X`, `require('./dir')` for dir/index.js; and every export form: `exports.name = ...`,
`module.exports.name = ...`, `module.exports = { name, other: local }`, `module.exports = require('./other')`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.codenav.commonjs import Binding, default_export, member_export
from codewell.codenav.imports import Import, parse_imports
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.gitfixtures import make_repo, register_local_repo

REPO = "acme/serve"
FILES = {
    "index.js": "'use strict';\n\nmodule.exports = require('./lib/serve');\n",
    "lib/utils.js": (
        "'use strict';\n"  # 1
        "\n"
        "exports.compileETag = function(val) {\n"
        "  return val;\n"
        "};\n"  # 5
        "\n"
        "exports.etag = createGenerator({ weak: false });\n"
        "\n"
        "function createGenerator(options) {\n"
        "  return function generateETag(body) { return options; };\n"  # 10
        "}\n"
        "\n"
        "function normalizeType(type) {\n"
        "  return type;\n"
        "}\n"  # 15
        "\n"
        "module.exports.normalizeType = normalizeType;\n"
    ),
    "lib/helpers.js": (
        "function flatten(list) {\n"  # 1
        "  return list;\n"
        "}\n"
        "\n"
        "function merge(a, b) {\n"  # 5
        "  return a;\n"
        "}\n"
        "\n"
        "module.exports = {\n"
        "  flatten,\n"  # 10
        "  mergeAll: merge,\n"
        "};\n"
    ),
    "lib/router/index.js": (
        "var Layer = require('./layer');\n"  # 1
        "\n"
        "var proto = module.exports = function(options) {\n"
        "  return new Layer(options);\n"
        "};\n"  # 5
    ),
    "lib/router/layer.js": (
        "module.exports = Layer;\n"  # 1
        "\n"
        "function Layer(path) {\n"
        "  this.path = path;\n"
        "}\n"  # 5
    ),
    "lib/gate.js": "var Gate = require('./router/layer');\n\nmodule.exports = new Gate('/');\n",
    "lib/es/Wrapper.js": "export default class IfBlockWrapper {\n  render() {}\n}\n",
    "lib/es/Fragment.js": (
        "import IfBlock from './Wrapper.js';\n"  # 1
        "\n"
        "const wrappers = {\n"
        "  IfBlock,\n"
        "};\n"  # 5
        "export const made = new IfBlock();\n"
    ),
    "lib/request.js": (
        "var req = Object.create({});\n"  # 1
        "\n"
        "module.exports = req\n"
    ),
    "lib/serve.js": (
        "'use strict';\n"  # 1
        "\n"
        "var compileETag = require('./utils').compileETag;\n"
        "var utils = require('./utils');\n"
        "const { flatten, mergeAll: merged } = require('./helpers');\n"  # 5
        "var Router = require('./router');\n"
        "var req = require('./request');\n"
        "\n"
        "exports = module.exports = createServer;\n"
        "\n"  # 10
        "function createServer() {\n"
        "  var fn = compileETag(true);\n"
        "  var tag = utils.etag('body');\n"
        "  var type = utils.normalizeType('html');\n"
        "  flatten([merged([], [])]);\n"  # 15
        "  return new Router({ fn: fn, tag: tag, type: type });\n"
        "}\n"
        "\n"
        "exports.request = req;\n"
        "exports.Router = Router;\n"  # 20
    ),
}


@pytest.fixture
def nav(runtime: Runtime, tmp_path: Path) -> CodeNavService:
    register_local_repo(runtime, make_repo(tmp_path / "serve", FILES), REPO)
    return runtime.get(CodeNavService)


def top(nav: CodeNavService, path: str, symbol: str) -> tuple[str, int]:
    found = nav.go_to_definition(INTERNAL, REPO, path, symbol).candidates[0]
    return found.path, found.line


def refs(nav: CodeNavService, path: str, symbol: str) -> list[tuple[str, int]]:
    found = nav.find_references(INTERNAL, REPO, path, symbol, limit=100)
    assert not found.text_matches
    return [(f.path, line) for f in found.files for line, _, _ in f.lines]


def test_require_forms_lead_to_the_definition(nav: CodeNavService) -> None:
    # `var f = require('./m').f` and `exports.f = function`: the function, not the local alias on line 3.
    assert top(nav, "lib/serve.js", "compileETag") == ("lib/utils.js", 3)
    # `var m = require('./m'); m.name(...)`: `exports.name = value` and `module.exports.name = local`.
    assert top(nav, "lib/serve.js", "utils.normalizeType") == ("lib/utils.js", 13)
    # `const { a, b: c } = require('./m')` with `module.exports = { a, b: local }`.
    assert top(nav, "lib/serve.js", "flatten") == ("lib/helpers.js", 1)
    assert top(nav, "lib/serve.js", "merged") == ("lib/helpers.js", 5)
    # `require('./router')` is router/index.js, whose value is `var proto = module.exports = function ...`.
    assert top(nav, "lib/serve.js", "Router") == ("lib/router/index.js", 3)
    # `var X = require('./m')` with `module.exports = X`: the module's value, declared after the assignment.
    assert top(nav, "lib/router/index.js", "Layer") == ("lib/router/layer.js", 3)
    assert top(nav, "lib/serve.js", "req") == ("lib/request.js", 1)


def test_exports_of_the_file_itself_are_followed(nav: CodeNavService) -> None:
    # `exports.request = req` where req is required: request.js's value.
    assert top(nav, "lib/serve.js", "exports.request") == ("lib/request.js", 1)
    assert top(nav, "lib/serve.js", "exports.Router") == ("lib/router/index.js", 3)
    # `exports.compileETag = function` is a definition of the file itself.
    assert top(nav, "lib/utils.js", "exports.compileETag") == ("lib/utils.js", 3)


def test_references_reach_the_files_that_require_the_module(nav: CodeNavService) -> None:
    # The production use through `var compileETag = require('./utils').compileETag` (the express case);
    # the `require` line binding the name counts, as an import does.
    assert refs(nav, "lib/utils.js", "compileETag") == [("lib/serve.js", 3), ("lib/serve.js", 12)]
    # `module.exports = Layer` makes `var Layer = require('./layer')` the same function under its own name, and
    # `var Gate = require(...)` under another (its uses count, not the `var` declaring it).
    assert refs(nav, "lib/router/layer.js", "Layer") == [
        ("lib/router/layer.js", 1),
        ("lib/gate.js", 3),
        ("lib/router/index.js", 4),
    ]
    # An ES default export imported under another name: the import binding and every use of the local name.
    assert refs(nav, "lib/es/Wrapper.js", "IfBlockWrapper") == [
        ("lib/es/Fragment.js", 1),
        ("lib/es/Fragment.js", 4),
        ("lib/es/Fragment.js", 6),
    ]
    # `var req = require('./request')` then `exports.request = req`.
    assert refs(nav, "lib/request.js", "req") == [("lib/request.js", 3), ("lib/serve.js", 19)]


def test_commonjs_assignments_read_from_the_text() -> None:
    lines = FILES["lib/serve.js"].split("\n")
    assert default_export(lines) == Binding(name="createServer")
    assert member_export(lines, "request") == Binding(name="req")
    assert member_export(lines, "missing") is None
    assert default_export(FILES["index.js"].split("\n")) == Binding(module="./lib/serve")
    assert default_export(FILES["lib/router/index.js"].split("\n")) == Binding(name="proto", variable=True)
    assert default_export(["module.exports = function query(options) {"]) == Binding(name="query")
    helpers = FILES["lib/helpers.js"].split("\n")
    assert member_export(helpers, "mergeAll") == Binding(name="merge")
    assert member_export(helpers, "merge") is None
    assert member_export(["module.exports = { a, b: c };"], "b") == Binding(name="c")
    assert member_export(["exports.query = require('./middleware/query');"], "query") == Binding(
        module="./middleware/query"
    )
    assert member_export(["exports.json = require('body').json"], "json") == Binding(module="body", member="json")
    # Indented (conditional) assignments and functions defined in place are not bindings to follow.
    assert default_export(["if (x) {", "  module.exports = other", "}"]) is None
    assert member_export(["exports.f = function (a) {"], "f") is None


def test_require_member_imports() -> None:
    assert parse_imports("javascript", "var compileETag = require('./utils').compileETag;", 3) == [
        Import("./utils", "compileETag", "compileETag", 3)
    ]
    assert parse_imports("javascript", "var utils = require('./utils');", 4) == [Import("./utils", "", "utils", 4)]
    assert parse_imports("javascript", "const { a, b: c } = require('./m')", 5) == [
        Import("./m", "a", "a", 5),
        Import("./m", "b", "c", 5),
    ]
