"""What the browser tests share: Debian's chromium with the flags this closed network needs, and the whole app
served over real HTTP on loopback in a thread of the test process."""

from __future__ import annotations

import contextlib
import hashlib
import socket
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from codewell.app import create_app
from codewell.runtime import Runtime

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags chromium keeps trying hosts this machine cannot reach.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve_app(runtime: Runtime, port: int | None = None) -> Iterator[str]:
    """Serve the app (no background loops) until the block ends; yields its base URL."""
    port = port or free_port()
    config = uvicorn.Config(create_app(runtime, background=False), host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# axe-core, the accessibility engine, from the npm registry at a pinned version (the tarball's SHA-256 checked),
# cached under tests/.artifacts/ (git-ignored).
AXE_VERSION = "4.10.3"
AXE_TARBALL_SHA256 = "0f2b4d7dcdf7d1219df8d1959ad68e565f51d14c3f0d88bb71cd59abeb956292"
ARTIFACTS = Path(__file__).parent / ".artifacts"


def serious_violations(tab: Any, axe: str) -> list[str]:
    """axe-core's serious and critical violations on `tab`'s page ("id (impact): first target"); `axe` is
    `axe_source()`, injected through the devtools protocol (the page's CSP does not apply)."""
    tab.evaluate(axe)
    result = tab.evaluate("axe.run(document, {resultTypes: ['violations']})")
    assert result["testEngine"]["version"] == AXE_VERSION
    return [
        f"{v['id']} ({v['impact']}): {v['nodes'][0]['target']}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def axe_source() -> str:
    """axe.min.js of axe-core AXE_VERSION, fetched once with `npm pack` (the test command installs npm; a failed
    fetch fails the test rather than skipping it)."""
    target = ARTIFACTS / f"axe-core-{AXE_VERSION}" / "axe.min.js"
    if not target.exists():
        work = ARTIFACTS / "npm"
        work.mkdir(parents=True, exist_ok=True)
        fetched = subprocess.run(
            ["npm", "pack", f"axe-core@{AXE_VERSION}", "--silent"],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        if fetched.returncode != 0:
            raise AssertionError(f"npm could not fetch axe-core@{AXE_VERSION}: {fetched.stderr.strip()[-500:]}")
        tarball = work / f"axe-core-{AXE_VERSION}.tgz"
        if hashlib.sha256(tarball.read_bytes()).hexdigest() != AXE_TARBALL_SHA256:
            raise AssertionError(f"{tarball} does not have the pinned SHA-256")
        with tarfile.open(tarball) as archive:
            member = archive.extractfile("package/axe.min.js")
            assert member is not None
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(member.read())
    return target.read_text(encoding="utf-8")


def watch_console(tab: Page) -> list[str]:
    """The messages `tab` logs to its console, collected as they come (CSP violations show up there)."""
    messages: list[str] = []

    def collect(message: ConsoleMessage) -> None:
        messages.append(message.text)

    tab.on("console", collect)
    return messages


def sign_in(tab: Page, site: str, username: str, password: str) -> None:
    """Sign in through the sign-in form, as a person does, and wait for the page it leads to."""
    tab.goto(f"{site}/sign-in")
    tab.fill("#username", username)
    tab.fill("#password", password)
    with tab.expect_navigation():
        tab.click("button[type=submit]")


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's chromium, headless, closed on the way out."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def signed_in_tab(site: str, username: str, password: str) -> Iterator[tuple[Page, list[str]]]:
    """A tab signed in through the form, and the messages its console logs (CSP violations show up there)."""
    with chromium() as browser:
        tab = browser.new_page()
        console = watch_console(tab)
        sign_in(tab, site, username, password)
        yield tab, console
