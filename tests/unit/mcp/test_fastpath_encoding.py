"""The fast path's JSON encoding: orjson for speed, the same JSON the standard library would produce, and a
fallback for what orjson refuses."""

from __future__ import annotations

import json

from codewell.mcp.fastpath import encode, sse


def test_encoding_round_trips_like_the_standard_library() -> None:
    payload = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": 'naïve → ✓\n\t"q"'}]}}
    data = encode(payload)
    assert json.loads(data) == payload
    assert "naïve → ✓".encode() in data  # UTF-8, not \\u escapes: results are counted in bytes


def test_what_orjson_refuses_is_still_encoded_as_valid_json() -> None:
    huge = {"id": 1, "result": {"n": 2**70, "s": "lone \ud800 surrogate"}}
    data = encode(huge)
    decoded = json.loads(data)
    assert decoded["result"]["n"] == 2**70
    assert decoded["result"]["s"] == "lone \ud800 surrogate"
    data.decode("utf-8")  # valid UTF-8 bytes


def test_sse_frame_is_one_message_event() -> None:
    response = sse({"jsonrpc": "2.0", "id": "a", "result": {}})
    assert response.body == b'event: message\r\ndata: {"jsonrpc":"2.0","id":"a","result":{}}\r\n\r\n'
    assert response.media_type == "text/event-stream"
