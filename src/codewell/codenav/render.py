"""Text and JSON renderings of codenav answers, in the search block format (`# repo – path`, `N: line`)."""

from __future__ import annotations

from typing import Any

from codewell.codenav.results import Definition, Definitions, References

__all__ = ["definitions_json", "definitions_text", "references_json", "references_text"]


def _what(d: Definition) -> str:
    qualified = f"{d.container}.{d.name}" if d.container else d.name
    return f"{d.kind} {qualified}"


def _definition_block(d: Definition) -> str:
    lines = [f"# {d.repo} – {d.path}", f"({_what(d)} · {d.how}: {d.reason} · commit {d.commit})"]
    lines += [f"{number}: {text}" for number, text in d.snippet]
    return "\n".join(lines)


def definitions_text(result: Definitions) -> str:
    blocks = [*result.notes, *(_definition_block(d) for d in result.candidates)]
    return "\n\n".join(blocks)


def _definition_json(d: Definition) -> dict[str, Any]:
    return {
        "repo": d.repo,
        "path": d.path,
        "commit": d.commit,
        "language": d.language,
        "name": d.name,
        "kind": d.kind,
        "container": d.container,
        "range": {"startLine": d.line, "startColumn": d.column, "endLine": d.end_line, "endColumn": d.end_column},
        "definitionLines": {"start": d.def_line, "end": d.def_end_line},
        "how": d.how,
        "reason": d.reason,
    }


def definitions_json(result: Definitions) -> dict[str, Any]:
    return {
        "repo": result.repo,
        "path": result.path,
        "symbol": result.symbol,
        "commit": result.commit,
        "definitions": [_definition_json(d) for d in result.candidates],
        "notes": result.notes,
    }


def references_text(result: References) -> str:
    d = result.definition
    head = (
        f"{result.total} reference{'s' if result.total != 1 else ''} to {_what(d)} "
        f"(defined at {d.path}:{d.line}; {result.how})"
    )
    if not result.files:
        head = f"No references to {_what(d)} (defined at {d.path}:{d.line}) in files that can see it."
    blocks = [head]
    for f in result.files:
        more = f" ({f.total - len(f.lines)} more in this file)" if f.total > len(f.lines) else ""
        body = "\n".join(f"{line}: {text}" for line, _column, text in f.lines)
        blocks.append(f"# {f.repo} – {f.path}\n({f.scope}{more})\n{body}")
    blocks += result.notes
    return "\n\n".join(blocks)


def references_json(result: References) -> dict[str, Any]:
    return {
        "repo": result.repo,
        "path": result.path,
        "symbol": result.symbol,
        "commit": result.commit,
        "definition": _definition_json(result.definition),
        "how": result.how,
        "total": result.total,
        "shown": result.shown,
        "hasMoreResults": result.total > result.shown,
        "textMatches": result.text_matches,
        "files": [
            {
                "repo": f.repo,
                "path": f.path,
                "commit": f.commit,
                "scope": f.scope,
                "total": f.total,
                "references": [{"line": line, "column": column, "text": text} for line, column, text in f.lines],
            }
            for f in result.files
        ],
        "notes": result.notes,
    }
