"""Ranking through REST: a file defining the searched name sorts before files that only call it."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

from codewell.runtime import Runtime


def test_definition_sorts_before_many_calls(tmp_path: Path, runtime: Runtime, client: TestClient) -> None:
    calls = "".join(f"\tfrobnicate({i});\n" for i in range(5))
    repo = make_repo(
        tmp_path / "frob",
        {
            # Index order is by path, and the caller has more matching lines: only the definition bonus
            # can put lib/widget.c first.
            "a/caller.c": f"#include <widget.h>\n\nvoid run(void)\n{{\n{calls}}}\n",
            "lib/widget.c": "// the widget\nint\nfrobnicate(int times)\n{\n\treturn times;\n}\n",
            "b/notes.c": "/* frobnicate() is called by run() */\n",
        },
    )
    register_local_repo(runtime, repo, "local/frob")  # the sync listener indexes it
    headers = auth_headers(make_token(runtime, make_user(runtime, "reader")))

    response = client.get("/.api/search", params={"q": "frobnicate"}, headers=headers)

    assert response.status_code == 200, response.text
    files = response.json()["files"]
    assert [f["path"] for f in files] == ["lib/widget.c", "a/caller.c", "b/notes.c"]
    assert [m["lineNumber"] for m in files[1]["lineMatches"]] == [5, 6, 7, 8, 9]  # lines stay in line order
    assert files[0]["lineMatches"] == [{"lineNumber": 3, "line": "frobnicate(int times)", "ranges": [[0, 10]]}]
