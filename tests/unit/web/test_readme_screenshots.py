"""The README's screenshots (issue #32): every image it shows is committed under docs/screenshots/, a 1280x800 PNG
small enough for a README (scripts/screenshots.py makes them and checks the size too), every PNG there is shown,
and the README still opens with its two commands."""

from __future__ import annotations

import re
import struct
from pathlib import Path

ROOT = Path(__file__).parents[3]
README = ROOT / "README.md"
SHOTS = ROOT / "docs" / "screenshots"
MAX_BYTES = 240_000


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def test_the_readme_shows_every_committed_screenshot_and_each_is_small() -> None:
    text = README.read_text(encoding="utf-8")
    shown = re.findall(r"\]\((docs/screenshots/[^)]+\.png)\)", text)
    assert len(shown) >= 6
    assert sorted(set(shown)) == sorted(f"docs/screenshots/{p.name}" for p in SHOTS.glob("*.png"))
    for name in shown:
        path = ROOT / name
        assert _png_size(path) == (1280, 800), name
        assert path.stat().st_size <= MAX_BYTES, f"{name}: {path.stat().st_size} bytes"


def test_the_readme_opens_with_its_two_commands_before_the_screenshots() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.index("```bash\n")
    commands = text[block:].split("\n")[1:3]
    assert [c.split()[0] for c in commands] == ["./scripts/serve", "./scripts/test"]
    assert block < text.index("## Screenshots")
