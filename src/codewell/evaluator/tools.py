"""MCP tool of the evaluator capability: `evaluator` (run a sandboxed Lua script over search results).

Thin: parse the script, call EvaluatorService with the acting user, render the result as text plus the
same data as structured JSON.
"""

from __future__ import annotations

import json
from typing import Any

from codewell.core.errors import InvalidInput
from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec
from codewell.evaluator.service import EvaluationResult, EvaluatorService

DESCRIPTION = """\
Run a short Lua 5.4 script against code search results and return its value as JSON, plus anything it \
printed. Use it for counting, grouping and cross-checking over many results, e.g. "how many repositories \
still call X, grouped by owner".

Functions available to scripts:
- search(query) -> files, info: keyword_search with the same query syntax and filters (repo:, file:, \
rev:, count:, AND/OR). `files` is a list of {repo, path, commit, language, matches = {{line = 12, text = \
"..."}, ...}}; `info` is {matchCount, limitHit, timedOut, skipped}. Results stop at the query's count \
(add count:1000 for more).
- read_file(repo, path[, startLine, endLine]) -> {content, lines, startLine, endLine, totalLines, \
truncated, binary, commit}.
- print(...) output is returned too. Also: string (no dump), table, math, utf8, os.time/clock/date, \
pairs/ipairs, pcall, coroutine, load (text only).
Errors in search/read_file (bad query, unknown repository) are Lua errors you can catch with pcall.
Returned tables become JSON: sequences {1, 2} are arrays, other tables objects, {} is [].
Limits: about 3 seconds of script time, 64 MB memory, 20 search and 100 read_file calls, 64 KB of \
printed output, 256 KB of result. No file, network or OS access.

Example (count files per repository that mention a function):
  local files = search("oldFunction( count:1000")
  local per_repo = {}
  for _, f in ipairs(files) do per_repo[f.repo] = (per_repo[f.repo] or 0) + 1 end
  return per_repo
Example (group by owner):
  local files, info = search("context.TODO file:.go count:500")
  local owners = {}
  for _, f in ipairs(files) do
    local owner = f.repo:match("^[^/]+/([^/]+)/") or f.repo
    owners[owner] = (owners[owner] or 0) + #f.matches
  end
  return {owners = owners, truncated = info.limitHit}
"""


def _render(result: EvaluationResult) -> str:
    parts: list[str] = []
    if result.error is not None:
        error = result.error
        where = f" at line {error.line}" if error.line else ""
        lines = [f"Script error ({error.kind}){where}: {error.message}"]
        if error.hint:
            lines.append(f"Hint: {error.hint}")
        if len(error.traceback) > 1:
            lines.append("Traceback:\n" + "\n".join(f"  {frame}" for frame in error.traceback))
        parts.append("\n".join(lines))
    else:
        parts.append("Result:\n" + json.dumps(result.value, indent=2, ensure_ascii=False))
    if result.output:
        parts.append("Output:\n" + result.output.rstrip("\n"))
    return "\n\n".join(parts)


def evaluator(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    script = args.get("script")
    if not isinstance(script, str):
        raise InvalidInput("`script` must be a string", hint='pass "script": "return #search(\'foo\')"')
    result = ctx.runtime.get(EvaluatorService).run(ctx.actor, script)
    return ToolResult(_render(result), result.as_dict(), is_error=not result.ok)


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="evaluator",
        description=DESCRIPTION,
        input_schema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "script": {
                    "type": "string",
                    "description": "Lua 5.4 source; its return value is the result. "
                    "Example: \"local files = search('TODO count:100') return #files\".",
                }
            },
            "required": ["script"],
            "additionalProperties": False,
        },
        handler=evaluator,
        endpoints=frozenset({Endpoint.CORE, Endpoint.ALL}),
    )
]
