"""CodeNavService over real git repositories: resolution order, languages, other repositories, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user
from tests.gitfixtures import make_repo, register_local_repo

PY = {
    "pkg/__init__.py": "from .impl import exported\n",
    "pkg/impl.py": "def exported():\n    return 1\n\n\nclass Config:\n    def load(self):\n        return exported()\n",
    "pkg/util.py": "def helper():\n    return 2\n",
    "app/main.py": (
        "import pkg.util\nfrom pkg import exported\nfrom pkg.impl import Config as Cfg\n\n\n"
        "def helper():\n    return 3\n\n\ndef run():\n    Cfg().load()\n    pkg.util.helper()\n"
        "    return exported() + helper()\n"
    ),
    "docs/notes.txt": "helper is documented here\n",
}
GO_LIB = {
    "go.mod": "module example.com/acme/lib\n\ngo 1.22\n",
    "mathx/square.go": "package mathx\n\n// Square squares.\nfunc Square(x int) int {\n\treturn x * x\n}\n",
}
GO_APP = {
    "go.mod": "module example.com/acme/app\n\nrequire example.com/acme/lib v1.0.0\n",
    "cmd/main.go": (
        'package main\n\nimport (\n\t"example.com/acme/app/internal/geo"\n\t"example.com/acme/lib/mathx"\n)\n\n'
        "func main() {\n\t_ = mathx.Square(geo.Side)\n\t_ = local()\n}\n"
    ),
    "cmd/local.go": "package main\n\nfunc local() int { return 1 }\n",
    "internal/geo/geo.go": "package geo\n\nconst Side = 3\n",
}
TS = {
    "tsconfig.json": (
        '{\n  // comments are allowed here\n  "compilerOptions": {"baseUrl": ".", "paths": {"@/*": ["src/*"]}}\n}\n'
    ),
    "src/shapes/index.ts": 'export { Circle } from "./circle";\n',
    "src/shapes/circle.ts": "export class Circle {\n  area(): number { return 1; }\n}\n",
    "src/config.ts": "export const DEFAULTS = { size: 1 };\n",
    "src/app.ts": (
        'import { Circle } from "./shapes/circle";\nimport { DEFAULTS } from "@/config";\n\n'
        "export function main(): number {\n  return new Circle().area() + DEFAULTS.size;\n}\n"
    ),
    "web/legacy.js": 'const { main } = require("../src/app");\nmain();\n',
}
JAVA = {
    "src/main/java/com/acme/util/Helper.java": (
        "package com.acme.util;\n\npublic class Helper {\n  public static int square(int x) { return x * x; }\n}\n"
    ),
    "src/main/java/com/acme/app/Main.java": (
        "package com.acme.app;\n\nimport com.acme.util.Helper;\n\npublic class Main {\n"
        "  public static void main(String[] a) { Helper.square(Other.VALUE); }\n}\n"
    ),
    "src/main/java/com/acme/app/Other.java": (
        "package com.acme.app;\n\nclass Other {\n  static final int VALUE = 2;\n}\n"
    ),
}


@pytest.fixture
def nav(runtime: Runtime, tmp_path: Path) -> CodeNavService:
    for name, files in (
        ("acme/py", PY),
        ("acme/lib", GO_LIB),
        ("acme/app", GO_APP),
        ("acme/ts", TS),
        ("acme/java", JAVA),
    ):
        register_local_repo(runtime, make_repo(tmp_path / name.replace("/", "-"), files), name)
    return runtime.get(CodeNavService)


def where(
    nav: CodeNavService, repo: str, path: str, symbol: str, actor: Actor = INTERNAL
) -> list[tuple[str, str, int, str]]:
    found = nav.go_to_definition(actor, repo, path, symbol)
    return [(d.repo, d.path, d.line, d.how) for d in found.candidates]


def test_python_resolution_order(nav: CodeNavService) -> None:
    # Same file first: app/main.py defines its own helper.
    assert where(nav, "acme/py", "app/main.py", "helper")[0] == ("acme/py", "app/main.py", 6, "syntactic")
    # A module attribute goes through the import, not to the same-file helper.
    assert where(nav, "acme/py", "app/main.py", "pkg.util.helper")[0] == ("acme/py", "pkg/util.py", 1, "syntactic")
    # A package re-export (`from .impl import exported` in __init__.py) is followed.
    assert where(nav, "acme/py", "app/main.py", "exported")[0] == ("acme/py", "pkg/impl.py", 1, "syntactic")
    # An aliased class and its method.
    assert where(nav, "acme/py", "app/main.py", "Cfg")[0][1:3] == ("pkg/impl.py", 5)
    assert where(nav, "acme/py", "app/main.py", "Cfg.load")[0][1:3] == ("pkg/impl.py", 6)
    answer = nav.go_to_definition(INTERNAL, "acme/py", "app/main.py", "exported")
    assert answer.candidates[0].kind == "function"
    assert answer.candidates[0].snippet[0] == (1, "def exported():")


def test_go_packages_and_other_repositories(nav: CodeNavService) -> None:
    assert where(nav, "acme/app", "cmd/main.go", "local")[0] == ("acme/app", "cmd/local.go", 3, "syntactic")
    assert where(nav, "acme/app", "cmd/main.go", "geo.Side")[0] == ("acme/app", "internal/geo/geo.go", 3, "syntactic")
    # example.com/acme/lib is another indexed repository's go.mod module path.
    found = nav.go_to_definition(INTERNAL, "acme/app", "cmd/main.go", "mathx.Square")
    assert (found.candidates[0].repo, found.candidates[0].path, found.candidates[0].line) == (
        "acme/lib",
        "mathx/square.go",
        4,
    )
    assert "provided by repository acme/lib" in found.candidates[0].reason
    # ...and its references include the other repository's use.
    refs = nav.find_references(INTERNAL, "acme/lib", "mathx/square.go", "Square")
    assert [(f.repo, f.path, f.scope) for f in refs.files] == [("acme/app", "cmd/main.go", "other repository")]


def test_typescript_paths_index_files_and_require(nav: CodeNavService) -> None:
    assert where(nav, "acme/ts", "src/app.ts", "Circle")[0][1:3] == ("src/shapes/circle.ts", 1)
    assert where(nav, "acme/ts", "src/app.ts", "DEFAULTS")[0][1:3] == ("src/config.ts", 1)
    assert where(nav, "acme/ts", "web/legacy.js", "main")[0][1:3] == ("src/app.ts", 4)
    refs = nav.find_references(INTERNAL, "acme/ts", "src/shapes/circle.ts", "Circle")
    assert {f.path for f in refs.files} == {"src/app.ts", "src/shapes/index.ts"}


def test_java_imports_and_packages(nav: CodeNavService) -> None:
    main = "src/main/java/com/acme/app/Main.java"
    assert where(nav, "acme/java", main, "Helper.square")[0][1:3] == ("src/main/java/com/acme/util/Helper.java", 4)
    assert where(nav, "acme/java", main, "Other")[0][1:3] == ("src/main/java/com/acme/app/Other.java", 3)


def test_references_grouped_ranked_and_limited(nav: CodeNavService) -> None:
    refs = nav.find_references(INTERNAL, "acme/py", "pkg/impl.py", "exported")
    assert [(f.path, f.scope) for f in refs.files] == [
        ("pkg/impl.py", "same file"),
        ("app/main.py", "same repository"),
        ("pkg/__init__.py", "same repository"),
    ]
    assert [line for line, _, _ in refs.files[0].lines] == [7]
    assert refs.total == 4
    limited = nav.find_references(INTERNAL, "acme/py", "pkg/impl.py", "exported", limit=2)
    assert limited.shown == 2
    assert "2 more references not shown" in limited.notes[-1]


def test_bad_input(nav: CodeNavService, runtime: Runtime, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"symbol 'exportd' not found in pkg/impl\.py") as missing_symbol:
        nav.find_references(INTERNAL, "acme/py", "pkg/impl.py", "exportd")
    assert "exported" in (missing_symbol.value.hint or "")
    with pytest.raises(NotFound, match=r"file 'pkg/nope\.py' not found"):
        nav.go_to_definition(INTERNAL, "acme/py", "pkg/nope.py", "x")
    with pytest.raises(InvalidInput, match="'pkg' is a directory"):
        nav.go_to_definition(INTERNAL, "acme/py", "pkg", "x")
    with pytest.raises(NotFound, match="revision 'nope' not found"):
        nav.go_to_definition(INTERNAL, "acme/py", "app/main.py", "helper", revision="nope")
    with pytest.raises(InvalidInput, match="invalid symbol"):
        nav.go_to_definition(INTERNAL, "acme/py", "app/main.py", "two words")
    # Unsupported language: search-based by name, and said so.
    text = nav.go_to_definition(INTERNAL, "acme/py", "docs/notes.txt", "helper")
    assert text.candidates[0].how == "search-based"
    assert "not in a language codenav parses" in text.notes[-1]
    # A private repository the user may not read is exactly a missing one.
    register_local_repo(
        runtime, make_repo(tmp_path / "secret", {"s.py": "def s():\n    pass\n"}), "acme/secret", private=True
    )
    bob = actor_of_user(runtime, make_user(runtime, "bob"))
    with pytest.raises(NotFound) as hidden:
        nav.go_to_definition(bob, "acme/secret", "s.py", "s")
    with pytest.raises(NotFound) as absent:
        nav.go_to_definition(bob, "acme/absent", "s.py", "s")
    assert hidden.value.message.replace("secret", "X") == absent.value.message.replace("absent", "X")
    assert hidden.value.hint == absent.value.hint


def test_index_is_built_once_per_revision(nav: CodeNavService, runtime: Runtime) -> None:
    nav.go_to_definition(INTERNAL, "acme/py", "app/main.py", "helper")
    files = list(nav.root.rglob("*.sqlite"))
    assert len(files) == 1
    stamp = files[0].stat().st_mtime_ns
    nav.find_references(INTERNAL, "acme/py", "pkg/util.py", "helper")
    assert files[0].stat().st_mtime_ns == stamp


MEMBERS = {
    "shop/cart.py": (
        "class Cart:\n"
        "    def total(self):\n"
        "        return 1\n\n"
        "    def show(self):\n"
        "        return self.total()\n\n\n"
        "class Invoice:\n"
        "    def total(self):\n"
        "        return 2\n\n"
        "    def show(self):\n"
        "        return self.total()\n\n\n"
        "class BigCart(Cart):\n"
        "    def more(self):\n"
        "        return self.total() + Cart.total(self) + Invoice.total(self)\n\n\n"
        "def total(items):\n"
        "    return len(items)\n"
    ),
    "shop/use.py": (
        "import shop.cart\nfrom shop import cart as c\nfrom shop.cart import Cart\n\n\n"
        "def run(thing, items):\n"
        "    total = 0  # a local that shadows nothing imported\n"
        "    return thing.total() + shop.cart.total(items) + c.total(items) + Cart().total() + total\n"
    ),
    "shop/limits.py": "LIMIT = 1\nLIMIT = 2\n\n\ndef check(n):\n    return n < LIMIT\n",
}


def test_python_members_and_module_names(runtime: Runtime, tmp_path: Path) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "shop", MEMBERS), "acme/shop")
    nav = runtime.get(CodeNavService)

    def refs(symbol: str) -> list[tuple[str, int, int]]:
        found = nav.find_references(INTERNAL, "acme/shop", "shop/cart.py", symbol, limit=100)
        return [(f.path, line, column) for f in found.files for line, column, _ in f.lines]

    # Cart.total: self.total() in Cart and its subclass, Cart.total, and `Cart().total()` on an instance just built;
    # not Invoice's own self.total() nor Invoice.total, and not `thing.total()` on an object of unknown type
    # (another class defines total too).
    assert refs("Cart.total") == [
        ("shop/cart.py", 6, 21),
        ("shop/cart.py", 19, 21),
        ("shop/cart.py", 19, 36),
        ("shop/use.py", 8, 77),
    ]
    # The module function: reached through the module's names only (`shop.cart.total`, `c.total`), never as a
    # member of some object, and the importer's local `total` is not it.
    assert refs("total") == [("shop/use.py", 8, 38), ("shop/use.py", 8, 55)]
    # The last module-level assignment is the one a function sees.
    limit = nav.go_to_definition(INTERNAL, "acme/shop", "shop/limits.py", "LIMIT").candidates[0]
    assert (limit.path, limit.line) == ("shop/limits.py", 2)
    # A bare name in Python never means a method: `total` used in cart.py is the module function.
    assert nav.go_to_definition(INTERNAL, "acme/shop", "shop/cart.py", "total").candidates[0].line == 22


def test_python_builtin_member_names_count_only_through_self(runtime: Runtime, tmp_path: Path) -> None:
    files = {
        "store.py": "class Store:\n    def items(self):\n        return []\n\n    def count(self):\n"
        "        return len(self.items())\n",
        "use.py": "from store import Store\n\n\ndef run(d):\n    return list(d.items()) + Store().items()\n",
    }
    register_local_repo(runtime, make_repo(tmp_path / "store", files), "acme/store")
    found = runtime.get(CodeNavService).find_references(INTERNAL, "acme/store", "store.py", "Store.items")
    # `d.items()` is most likely a dict's; the class's own `self.items()` is certain, and so is `Store().items()`.
    assert [(f.path, [line for line, _, _ in f.lines]) for f in found.files] == [("store.py", [6]), ("use.py", [5])]


def test_c_include_resolved_by_file_name(runtime: Runtime, tmp_path: Path) -> None:
    # `#include <linux/slab_def.h>` ends the path of the header that defines the name; a header whose name
    # merely ends the same way (`xslab_def.h`), or the same name under another folder, is not what is included.
    files = {
        "include/linux/slab_def.h": "struct kmem_cache { int size; };\nstatic inline void kfree(void *p) { }\n",
        "include/linux/xslab_def.h": "static inline void kfree(void *p) { }\n",
        "tools/slab_def.h": "static inline void kfree(void *p) { }\n",
        "mm/use.c": "#include <linux/slab_def.h>\n\nint run(void *p) {\n  kfree(p);\n  return 0;\n}\n",
    }
    register_local_repo(runtime, make_repo(tmp_path / "kernel", files), "acme/kernel")
    nav = runtime.get(CodeNavService)
    found = nav.go_to_definition(INTERNAL, "acme/kernel", "mm/use.c", "kfree")
    assert [(d.path, d.line, d.reason) for d in found.candidates] == [("include/linux/slab_def.h", 2, "via #include")]


def test_python_override_hierarchy_and_class_body_names(runtime: Runtime, tmp_path: Path) -> None:
    files = {
        "log/base.py": (
            "class Handler:\n"  # 1
            "    def close(self):\n"
            "        pass\n"
            "\n"
            "    def get_name(self):\n"  # 5
            "        return 1\n"
            "\n"
            "    name = property(get_name)\n"
            "\n"
            "\n"  # 10
            "class Other:\n"
            "    def close(self):\n"
            "        pass\n"
            "\n"
            "    def run(self):\n"  # 15
            "        self.close()\n"
        ),
        "log/handlers.py": (
            "import log.base\n"  # 1
            "\n"
            "\n"
            "class Socket(log.base.Handler):\n"
            "    def close(self):\n"  # 5
            "        log.base.Handler.close(self)\n"
            "\n"
            "\n"
            "class Memory(log.base.Handler):\n"
            "    def flush(self):\n"  # 10
            "        self.close()\n"
        ),
    }
    register_local_repo(runtime, make_repo(tmp_path / "log", files), "acme/log")
    nav = runtime.get(CodeNavService)

    def refs(path: str, symbol: str) -> list[tuple[str, int]]:
        found = nav.find_references(INTERNAL, "acme/log", path, symbol, limit=100)
        return [(f.path, line) for f in found.files for line, _, _ in f.lines]

    # Socket.close overrides Handler.close: the base call inside it and `self.close()` in a sibling subclass
    # (which may dispatch to it) count; Other's own `self.close()` does not.
    assert refs("log/handlers.py", "Socket.close") == [("log/handlers.py", 6), ("log/handlers.py", 11)]
    assert refs("log/base.py", "Other.close") == [("log/base.py", 16)]
    # A method named bare in its own class body (`property(get_name)`).
    assert refs("log/base.py", "Handler.get_name") == [("log/base.py", 8)]


def test_qualified_name_matches_its_class_not_a_longer_name(runtime: Runtime, tmp_path: Path) -> None:
    # `Filter.filter` is the method of Filter, not the parameter `filter` of `Filterer.addFilter` (whose container
    # merely ends in "Filter"): the parameter's uses are not its references.
    files = {
        "filters.py": (
            "class Filter:\n"
            "    def filter(self, record):\n"
            "        return True\n"
            "\n"
            "\n"
            "class Filterer:\n"
            "    def addFilter(self, filter):\n"
            "        self.filters = [filter]\n"
            "\n"
            "    def check(self, record):\n"
            "        return Filter.filter(self, record)\n"
        ),
    }
    register_local_repo(runtime, make_repo(tmp_path / "filters", files), "acme/filters")
    found = runtime.get(CodeNavService).find_references(INTERNAL, "acme/filters", "filters.py", "Filter.filter")
    assert found.definition.line == 2
    assert [(f.path, [line for line, _, _ in f.lines]) for f in found.files] == [("filters.py", [11])]


def test_c_references_skip_members_and_text_matches_find_whole_words(runtime: Runtime, tmp_path: Path) -> None:
    # A top-level C function is never reached as `x.name`/`x->name` (a struct member of the same name); a name
    # without identifier references falls back to its whole-word mentions (not `REG_Ax`, `xREG_A`, `$REG_A`).
    files = {
        "lib/flush.c": "int flush(int n) { return n; }\n",
        "drv/use.c": (
            "struct ops { int (*flush)(int); };\nint run(struct ops *o) {\n  o->flush(1);\n  return flush(2);\n}\n"
        ),
        "regs.h": (
            "#define REG_A 1\n#define REG_B 2\n/* REG_A is the first */\n/* REG_Ax xREG_A $REG_A */\n"
            "/* é REG_A, REG_A */\n"
        ),
    }
    register_local_repo(runtime, make_repo(tmp_path / "kernel", files), "acme/kernel")
    nav = runtime.get(CodeNavService)
    found = nav.find_references(INTERNAL, "acme/kernel", "lib/flush.c", "flush")
    assert [(f.path, [line for line, *_ in f.lines]) for f in found.files] == [("drv/use.c", [4])]
    assert not found.text_matches
    mentions = nav.find_references(INTERNAL, "acme/kernel", "regs.h", "REG_A")
    assert mentions.text_matches
    assert [(f.path, [(line, col) for line, col, _ in f.lines]) for f in mentions.files] == [
        ("regs.h", [(3, 4), (5, 6), (5, 13)])
    ]


def test_paths_naming_are_the_files_of_the_occurrences(runtime: Runtime, tmp_path: Path) -> None:
    files = {
        "a.c": "#define ONLY_DEFINED 1\nint shared(void) { return ONLY_DEFINED; }\n",
        "b.c": "int shared(void);\nint g(void) { return shared(); }\n",
        "c.h": "#define ONLY_DEFINED 2\n",
    }
    register_local_repo(runtime, make_repo(tmp_path / "k", files), "acme/k")
    nav = runtime.get(CodeNavService)
    repos = nav.repos
    commit = repos.resolve(INTERNAL, "acme/k").commit
    index = nav.index_revision(repos.get(INTERNAL, "acme/k"), commit)
    try:
        for name in ("shared", "ONLY_DEFINED", "g", "missing"):
            assert index.paths_naming(name) == set(index.occurrences(name)), name
        assert [s.name for s in index.symbols_in("a.c", "shared")] == ["shared"]
        assert index.symbols_in("a.c", "g") == []
    finally:
        index.close()
