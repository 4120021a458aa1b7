"""Screenshots of the main pages for the README (docs/screenshots/*.png, 1280x800), taken from a real instance.

It starts `codewell serve --demo` on a fresh temporary data directory (the demo repository is this checkout's
committed source), reads the admin password from the start-up block as a new user would, waits until the demo
is indexed with its symbols, then drives Debian's chromium through Playwright as a person does: the sign-in
page, a search, the file view at the hit's line, the hover card, the references panel, and the site-admin code
host page after a connection was added from its form and tested. Nothing outside the temporary directory is
touched; the server is stopped (SIGTERM) and the directory removed at the end.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots] [--keep-data]

Needs the dev extra (playwright) and /usr/bin/chromium (./scripts/test installs both). Each PNG is checked
against MAX_BYTES so that the README stays light.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
VIEWPORT = {"width": 1280, "height": 800}
MAX_BYTES = 240_000
DEMO = "local/codewell"
QUERY = "read_token(connection)"  # a few hits in the code host service: a search, a file, a symbol to hover
SYMBOL = "read_token"
SYMBOL_FILE = "src/codewell/codehosts/service.py"
RULE = "-" * 72
READY_TIMEOUT_S = 600.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_block(process: subprocess.Popen[str], deadline: float) -> str:
    """The start-up block `codewell serve` prints once it listens (between two rules)."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in process.stdout or ():
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    text = ""
    while text.count(RULE) < 2:
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit(f"codewell serve printed no start-up block:\n{text}")
        with contextlib.suppress(queue.Empty):
            text += lines.get(timeout=0.5)
    return text


@contextlib.contextmanager
def instance(data_dir: Path) -> Iterator[tuple[str, str, str]]:
    """A running `codewell serve --demo`: (base URL, admin password, access token)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEWELL_")}
    command = [sys.executable, "-m", "codewell", "--data-dir", str(data_dir), "serve", "--port", str(port), "--demo"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        block = start_block(process, time.monotonic() + 180)
        password = re.search(r"sign in as admin with password (\S+)", block)
        token = re.search(r"access token: (cwp_[0-9a-f]{40})", block)
        if password is None or token is None:
            raise SystemExit(f"no credentials in the start-up block:\n{block}")
        yield f"http://127.0.0.1:{port}", password.group(1), token.group(1)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def api(site: str, token: str, path: str, params: dict[str, str]) -> dict[str, object]:
    request = urllib.request.Request(
        f"{site}{path}?{urllib.parse.urlencode(params)}", headers={"Authorization": f"token {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def wait_until(what: str, ready: Callable[[], bool]) -> None:
    started = time.monotonic()
    while not ready():
        if time.monotonic() - started > READY_TIMEOUT_S:
            raise SystemExit(f"{what}: not ready after {READY_TIMEOUT_S:.0f} s")
        time.sleep(2)
    print(f"{what}: ready after {time.monotonic() - started:.0f} s", flush=True)


def shoot(tab: Page, out: Path, name: str) -> None:
    path = out / f"{name}.png"
    tab.screenshot(path=str(path))
    size = path.stat().st_size
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {size / 1000:.0f} KB", flush=True)
    if size > MAX_BYTES:
        raise SystemExit(f"{path} is {size} bytes, over {MAX_BYTES}: show less on the page")


def sign_in(tab: Page, site: str, password: str, out: Path) -> None:
    tab.goto(f"{site}/sign-in")
    tab.fill("#username", "admin")
    shoot(tab, out, "sign-in")
    tab.fill("#password", password)
    with tab.expect_navigation():
        tab.click("button[type=submit]")


def reading(tab: Page, site: str, out: Path) -> None:
    """A search, its hit in the file view, the hover card of the symbol there, its references beside the file."""
    tab.goto(f"{site}/search?{urllib.parse.urlencode({'q': QUERY})}")
    expect(tab.locator("main")).to_contain_text(SYMBOL)
    shoot(tab, out, "search")

    with tab.expect_navigation():
        tab.locator(f'main a[href*="{SYMBOL_FILE}?L"]').first.click()
    expect(tab.locator("tr.hit").first).to_be_visible()
    # The first call of the symbol (the hit's next line), in the middle of the window with the hit above it.
    use = tab.locator(f'a.ident[title="Go to definition"]:text-is("{SYMBOL}")').first
    use.evaluate("a => a.closest('tr').scrollIntoView({block: 'center'})")
    shoot(tab, out, "file-view")

    use.hover()
    expect(tab.locator("#hover-card")).to_be_visible()
    expect(tab.locator("#hover-card")).to_contain_text(f"def {SYMBOL}(")
    shoot(tab, out, "hover")

    with tab.expect_navigation():
        use.click()
    tab.locator(f'tr.hit a.ident[title="Find references"]:text-is("{SYMBOL}")').first.click()
    expect(tab.locator("#refs-panel")).to_contain_text(f"References of {SYMBOL}")
    shoot(tab, out, "references")


def code_hosts(tab: Page, site: str, out: Path) -> None:
    """A code host connection added from the admin page, then tested: the probe says what is missing."""
    tab.goto(f"{site}/site-admin/code-hosts")
    tab.select_option("#ch-kind", "github")
    tab.fill("#ch-id", "github-com")
    tab.fill("#ch-name", "GitHub.com")
    tab.fill("#ch-token-env", "GITHUB_TOKEN")
    tab.fill("#ch-scopes", "acme")
    with tab.expect_navigation():
        tab.click("#new-codehost button[type=submit]")
    with tab.expect_navigation():
        tab.click("button[aria-label='Test GitHub.com']")
    expect(tab.locator("#codehost-probe")).to_be_visible()
    shoot(tab, out, "code-hosts")


def pages(site: str, password: str, out: Path) -> None:
    expect.set_options(timeout=60_000)  # a first definition or references lookup on a busy machine
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
        try:
            tab.emulate_media(color_scheme="light")
            sign_in(tab, site, password, out)
            reading(tab, site, out)
            code_hosts(tab, site, out)
            tab.emulate_media(color_scheme="dark")
            tab.goto(f"{site}/search?{urllib.parse.urlencode({'q': 'lang:python def discover'})}")
            expect(tab.locator("main")).to_contain_text("discover")
            shoot(tab, out, "search-dark")
        except Exception:
            # What the page held when a step failed, to see why.
            Path(tempfile.gettempdir(), "codewell-screenshots-failed.html").write_text(tab.content())
            raise
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots", help="Where the PNGs go.")
    parser.add_argument("--keep-data", action="store_true", help="Keep the temporary data directory.")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="codewell-screenshots-"))
    try:
        with instance(data_dir) as (site, password, token):
            print(f"serving {site} from {data_dir}", flush=True)

            def indexed() -> bool:
                found = api(site, token, "/.api/search", {"q": f"repo:^{DEMO}$ {QUERY}"})
                return bool(found.get("match_count") or found.get("matchCount") or found.get("results"))

            def navigable() -> bool:
                found = api(
                    site, token, "/.api/codenav/definition", {"repo": DEMO, "path": SYMBOL_FILE, "symbol": SYMBOL}
                )
                return bool(found.get("definitions"))

            wait_until("search index of the demo", indexed)
            wait_until("symbols of the demo", navigable)
            pages(site, password, args.out)
    finally:
        if args.keep_data:
            print(f"data kept in {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
