"""A plan report in a real browser: Debian's chromium, headless, loads the page, runs its
script, and gives back the DOM after it ran, every console message (an uncaught error is one)
and a screenshot.

Also the script behind `make screenshot`: `python -m tests.report.browser OUT.png` writes the
README's picture of `gpuplace --machine 4xK520 plan examples/big_model.yaml --strategy balanced
--format html`.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome")
# `[...:INFO:CONSOLE:12] "message", source: file:///... (12)`
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\] (.*)$")
TIMEOUT = 120  # seconds for one load: a cold start on a busy 2-core machine takes a few
MISSING = (
    "no chromium: `make test` installs Debian's (apt-get install chromium) when run as root; "
    "else install it, or set GPUPLACE_CHROMIUM to a Chromium or Chrome binary"
)


def find_chromium() -> str | None:
    """GPUPLACE_CHROMIUM, else the first of NAMES on PATH (None: no browser here)."""
    given = os.environ.get("GPUPLACE_CHROMIUM")
    if given:
        return given
    return next((p for p in map(shutil.which, NAMES) if p), None)


@dataclass(frozen=True)
class Loaded:
    dom: str  # the document after its scripts ran
    console: list[str]  # every console message (the page logs none: each is a failure)
    png: bytes  # the screenshot


def load(page: Path, chromium: str, size: tuple[int, int] = (1200, 900)) -> Loaded:
    """Open `page` in headless chromium at `size` (width, height) with a profile of its own."""
    with tempfile.TemporaryDirectory(prefix="gpuplace-chromium-") as tmp:
        shot = Path(tmp) / "shot.png"
        done = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--disable-extensions", "--mute-audio",
             f"--user-data-dir={tmp}/profile", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=3000", "--force-device-scale-factor=1",
             f"--window-size={size[0]},{size[1]}", f"--screenshot={shot}", "--dump-dom",
             page.resolve().as_uri()],
            capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
        console = [m.group(1) for line in done.stderr.splitlines() if (m := CONSOLE.search(line))]
        return Loaded(done.stdout, console, shot.read_bytes())


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header; AssertionError when it is not a PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def screenshot(out: Path, size: tuple[int, int] = (1280, 860)) -> None:
    """The README's picture: the big model on four K520s, TensorFlow's placement beside balanced."""
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit(MISSING)
    with tempfile.TemporaryDirectory(prefix="gpuplace-shot-") as tmp:
        page = Path(tmp) / "plan.html"
        subprocess.run(
            [sys.executable, "-m", "gpuplace", "--machine", "4xK520", "plan",
             "examples/big_model.yaml", "--strategy", "balanced", "--format", "html",
             "-o", str(page)],
            check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip  # exit 1: TensorFlow's placement runs out of memory, as the page shows
        loaded = load(page, chromium, size)
    assert not loaded.console, loaded.console
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(loaded.png)
    print(f"{out}: {png_size(loaded.png)[0]}x{png_size(loaded.png)[1]}, {len(loaded.png)} bytes")


if __name__ == "__main__":
    screenshot(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img/plan-report.png"))
