"""Where an import points: the files of a revision that a module spelling names, language by language.

Python: relative (`.mod`, `..pkg`) from the importing file's package, absolute from the root or a source
root (`src/`, any folder ending in the module path), `pkg/__init__.py` for packages. Go: the directory of the
import path below a go.mod module path. JavaScript/TypeScript: relative paths with the usual extensions and
`index` files, and tsconfig `paths`/`baseUrl`. Java/Kotlin: the package folder and the class file. C/C++:
`#include "x.h"` next to the file, then anywhere (a hint only). Rust, Ruby, PHP: file-name conventions.
"""

from __future__ import annotations

import json
import posixpath

from codewell.codenav.store import Indexed

__all__ = ["module_files", "python_module_name"]

_JS_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs")


def _dir(path: str) -> str:
    return posixpath.dirname(path)


def _existing(index: Indexed, candidates: list[str]) -> list[str]:
    return [c for c in dict.fromkeys(posixpath.normpath(c) for c in candidates) if index.exists(c)]


def python_module_name(path: str) -> str:
    """The dotted module a Python file is imported as (source roots such as `src/` dropped)."""
    stem = path.removesuffix(".py").removesuffix(".pyi").removesuffix("/__init__")
    parts = stem.split("/")
    for root in ("src", "lib", "python"):
        if root in parts[:-1]:
            parts = parts[parts.index(root) + 1 :]
    return ".".join(parts)


def _python(index: Indexed, from_path: str, module: str) -> list[str]:
    if module.startswith("."):
        level = len(module) - len(module.lstrip("."))
        base = _dir(from_path)
        for _ in range(level - 1):
            base = _dir(base)
        rest = module[level:].replace(".", "/")
        stem = posixpath.join(base, rest) if rest else base
        return _existing(index, [f"{stem}.py", f"{stem}/__init__.py", f"{stem}.pyi", f"{stem}/__init__.pyi"])
    stem = module.replace(".", "/")
    exact = _existing(index, [f"{stem}.py", f"{stem}/__init__.py", f"{stem}.pyi"])
    if exact:
        return exact
    return index.paths_like([f"{stem}.py", f"{stem}/__init__.py"])


def _go(index: Indexed, module: str) -> list[str]:
    for directory, path in sorted(index.go_modules(), key=lambda m: -len(m[1])):
        if module == path or module.startswith(path + "/"):
            rest = module[len(path) :].lstrip("/")
            folder = posixpath.join(directory, rest) if directory else rest
            return [p for p in index.files_in_dir(folder, "go") if not p.endswith("_test.go")]
    return []


def _js_candidates(stem: str) -> list[str]:
    if stem.endswith(_JS_EXTENSIONS):
        # `./util.js` may name `util.ts` (TypeScript's ESM convention).
        base = stem.rsplit(".", 1)[0]
        return [stem, *(base + ext for ext in _JS_EXTENSIONS)]
    return [stem + ext for ext in _JS_EXTENSIONS] + [f"{stem}/index{ext}" for ext in _JS_EXTENSIONS]


def _javascript(index: Indexed, from_path: str, module: str) -> list[str]:
    if module.startswith("."):
        return _existing(index, _js_candidates(posixpath.join(_dir(from_path), module)))
    config = json.loads(index.meta("tsconfig") or "{}")
    base_url = str(config.get("baseUrl") or "").removeprefix("./")
    paths = config.get("paths") or {}
    for pattern, targets in paths.items() if isinstance(paths, dict) else ():
        prefix = pattern.removesuffix("*")
        if not (module == pattern or (pattern.endswith("*") and module.startswith(prefix))):
            continue
        rest = module[len(prefix) :] if pattern.endswith("*") else ""
        for target in targets if isinstance(targets, list) else ():
            stem = posixpath.join(base_url, str(target).replace("*", rest))
            found = _existing(index, _js_candidates(stem))
            if found:
                return found
    if base_url:
        return _existing(index, _js_candidates(posixpath.join(base_url, module)))
    return []


def _jvm(index: Indexed, module: str, name: str, queries: str) -> list[str]:
    folder = module.replace(".", "/")
    extension = ".java" if queries == "java" else ".kt"
    if name and name != "*":
        found = index.paths_like([f"{folder}/{name}{extension}"])
        if found:
            return found
    return index.files_in_package(module, queries)


def module_files(index: Indexed, from_path: str, queries: str, module: str, name: str = "") -> list[str]:
    """Files of the revision that `module` (as imported from `from_path`) names; [] when none are here."""
    if queries == "python":
        return _python(index, from_path, module)
    if queries == "go":
        return _go(index, module)
    if queries in ("javascript", "typescript"):
        return _javascript(index, from_path, module)
    if queries in ("java", "kotlin"):
        return _jvm(index, module, name, queries)
    if queries in ("c", "cpp"):
        if module.startswith("<"):
            return index.paths_like([module.strip("<>")])
        return _existing(index, [posixpath.join(_dir(from_path), module)]) or index.paths_like([module])
    if queries == "rust":
        parts = [p for p in module.split("::") if p not in ("crate", "self", "super")]
        if not parts:
            return []
        stem = "/".join(parts)
        return index.paths_like([f"{stem}.rs", f"{stem}/mod.rs"])
    if queries == "ruby":
        stem = module.removesuffix(".rb")
        if stem.startswith("."):
            return _existing(index, [posixpath.join(_dir(from_path), stem) + ".rb"])
        return index.paths_like([f"{stem}.rb"])
    if queries == "php":
        if module.endswith(".php"):
            return _existing(index, [posixpath.join(_dir(from_path), module)]) or index.paths_like([module])
        return index.paths_like([f"{name}.php"]) if name else []
    return []
