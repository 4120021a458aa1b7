"""Accounts benchmark: what authentication adds to a request, and the cost of a password check.

Over real HTTP (uvicorn on loopback, one keep-alive client), in the same run:
  baseline    GET /healthz (the middleware runs, no credential to resolve)
  token       GET /.api/users/me with `Authorization: token cwp_...` (hash lookup + user join)
  session     GET /.api/users/me with the session cookie (signature check + session/user join)
  bad scheme  GET /healthz with `Authorization: Basic ...` (ignored, one audit row written)
and, at the service level, resolving a token / a session vs the cheapest database round trip (SELECT 1),
and argon2id verification (one sign-in attempt) vs a SHA-256 token digest.
Run: python bench/accounts_bench.py [--requests 500]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx2 as httpx
import uvicorn
from sqlalchemy import text

from codewell.accounts.passwords import hash_password, verify_password
from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.app import create_app
from codewell.auth.service import AuthService, ClientInfo
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.http.sessions import SESSION_COOKIE
from codewell.runtime import Runtime

RESULTS = Path(__file__).parent / ".results"


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def serve(runtime: Runtime) -> tuple[str, uvicorn.Server, threading.Thread]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(create_app(runtime, background=False), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, thread


def timed_requests(client: httpx.Client, url: str, n: int, **kwargs: object) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        response = client.get(url, **kwargs)  # type: ignore[arg-type]
        samples.append(time.perf_counter() - start)
        assert response.status_code == 200, response.text
    return samples


def service_loop(n: int, call: Callable[[], object]) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def _select_one(runtime: Runtime) -> None:
    with runtime.db.session() as session:
        session.execute(text("SELECT 1"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        runtime = Runtime.open(Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db"))
        runtime.db.upgrade()
        user = runtime.get(AccountService).create_user(INTERNAL, "bench", password="a long bench password")
        raw, _ = runtime.get(TokenService).create_token(INTERNAL, user.id, "bench", ["user:all"], None)
        cookie, _ = runtime.get(AuthService).start_session(user, ClientInfo())
        base, server, thread = serve(runtime)
        n = args.requests
        with httpx.Client(base_url=base) as client:
            timed_requests(client, "/healthz", 50)  # warm up
            baseline = timed_requests(client, "/healthz", n)
            token = timed_requests(client, "/.api/users/me", n, headers={"Authorization": f"token {raw}"})
            session = timed_requests(client, "/.api/users/me", n, cookies={SESSION_COOKIE: cookie})
            ignored = timed_requests(client, "/healthz", n, headers={"Authorization": "Basic eDp5"})
        server.should_exit = True
        thread.join(timeout=10)
        auth = runtime.get(AuthService)
        select_one = service_loop(n, lambda: _select_one(runtime))
        token_resolve = service_loop(n, lambda: auth.authenticate_header(f"token {raw}", ClientInfo()))
        session_resolve = service_loop(n, lambda: auth.session_actor(cookie))
        stored = hash_password("a long bench password")
        argon = [0.0] * 5
        for i in range(5):
            start = time.perf_counter()
            verify_password(stored, "wrong password")
            argon[i] = time.perf_counter() - start
        token_bytes = secrets.token_bytes(20)
        start = time.perf_counter()
        for _ in range(10000):
            hashlib.sha256(token_bytes).digest()
        sha = (time.perf_counter() - start) / 10000
        runtime.close()
    result = {
        "requests": n,
        "healthz_p50_ms": p50_ms(baseline),
        "token_p50_ms": p50_ms(token),
        "session_p50_ms": p50_ms(session),
        "unknown_scheme_p50_ms": p50_ms(ignored),
        "token_vs_baseline": round(statistics.median(token) / statistics.median(baseline), 2),
        "session_vs_baseline": round(statistics.median(session) / statistics.median(baseline), 2),
        "unknown_scheme_vs_baseline": round(statistics.median(ignored) / statistics.median(baseline), 2),
        "select1_p50_ms": p50_ms(select_one),
        "token_resolve_p50_ms": p50_ms(token_resolve),
        "session_resolve_p50_ms": p50_ms(session_resolve),
        "token_resolve_vs_select1": round(statistics.median(token_resolve) / statistics.median(select_one), 2),
        "session_resolve_vs_select1": round(statistics.median(session_resolve) / statistics.median(select_one), 2),
        "argon2_verify_ms": p50_ms(argon),
        "argon2_vs_sha256": round(statistics.median(argon) / sha),
    }
    for key, value in result.items():
        print(f"{key:28} {value}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "accounts.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
