"""A searcher replica's framed answer (search/wire.py) over its real internal API: the REST answer the web tier
builds from it, copying the lines as they came, is the answer one process gives over the same index."""

from __future__ import annotations

from pathlib import Path

import orjson
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from codewell.search.cluster import INTERNAL_PREFIX, internal_token
from codewell.search.replica import replica_app
from codewell.search.service import SearchService
from codewell.search.wire import FRAME_VERSION, FRAMED_MEDIA_TYPE, decode_answer, decode_results, encode_actor
from tests.gitfixtures import make_repo, register_local_repo


def test_a_framed_page_reads_as_one_process_answers(tmp_path: Path, runtime: Runtime) -> None:
    files = {
        "a.c": "".join(f'int lock_{n}(void) {{ mutex_lock(&m); /* "quoted" \\ é */ }}\n' for n in range(30)),
        "b.c": "void f(void)\n{\n\tmutex_lock(&other);\n}\n",
    }
    repo = register_local_repo(runtime, make_repo(tmp_path / "r", files), "local/r")
    service = runtime.get(SearchService)
    service.index_many([repo])
    client = TestClient(replica_app(runtime, "s1"))
    headers = {"Authorization": f"Bearer {internal_token(runtime.secret_key())}"}
    body = {"actor": encode_actor(INTERNAL), "query": "mutex_lock", "rank": True}

    framed = client.post(INTERNAL_PREFIX + "/search", json={**body, "frame": FRAME_VERSION}, headers=headers)
    assert framed.status_code == 200
    assert framed.headers["content-type"] == FRAMED_MEDIA_TYPE
    plain = client.post(INTERNAL_PREFIX + "/search", json=body, headers=headers)
    assert plain.headers["content-type"] == "application/json"
    # A web tier of the release before (frame 1) is answered plain JSON, which it reads.
    older = client.post(INTERNAL_PREFIX + "/search", json={**body, "frame": 1}, headers=headers)
    assert older.headers["content-type"] == "application/json"
    assert older.content == plain.content

    local = service.search(INTERNAL, "mutex_lock").to_json()
    for response in (framed, plain):
        results, repo_ids, held = decode_results(decode_answer(response.headers["content-type"], response.content))
        assert repo_ids == [repo.id] * len(results.files)
        assert held.tolist() == [repo.id]
        rest = orjson.loads(orjson.dumps(results.to_json(fragments=True)))
        assert rest["files"] == local["files"]
        assert rest["matchCount"] == local["matchCount"] == 31

    # Without the internal credential the replica answers nothing, framed or not.
    refused = client.post(INTERNAL_PREFIX + "/search", json={**body, "frame": FRAME_VERSION})
    assert refused.status_code == 401
