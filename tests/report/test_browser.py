"""The plan report in a real browser (headless chromium, `tests/report/browser.py`): it loads
with no console message at all (an uncaught error is one, a blocked load is one), its script
runs and the DOM it leaves names every device, and a screenshot of the asked size comes back.
A planted error proves the check can fail. Skipped, saying why, where no chromium is found
(`make test` installs Debian's when it runs as root)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.report.browser import MISSING, Loaded, find_chromium, load, png_size
from tests.report.page import parse

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("report/test_browser")]
TOWERS = "examples/guide/04_multi_tower.yaml"
DEVICES = "GPU:0,GPU:1,GPU:2,GPU:3,CPU:0"


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        pytest.skip(MISSING)
    return found


def write_page(run: Run, tmp_path: Path, *args: str, machine: str = "4xK520") -> Path:
    out = tmp_path / "plan.html"
    result = run("--machine", machine, "plan", TOWERS, *args, "--format", "html", "-o", str(out))
    assert (result.code, result.err) == (0, "")
    return out


def body(loaded: Loaded) -> dict[str, str]:
    return parse(loaded.dom).iter("body")[0].attrs


def test_the_page_loads_clean_shows_every_device_and_screenshots(
    run: Run, tmp_path: Path, chromium: str
) -> None:
    loaded = load(write_page(run, tmp_path, "--strategy", "balanced"), chromium, (1100, 800))
    assert loaded.console == []
    assert body(loaded) == {"data-devices": DEVICES, "data-ready": "yes"}
    dom = parse(loaded.dom)
    assert [li.attrs["data-device"] for li in dom.iter("li")] == DEVICES.split(",")
    assert [s.attrs["data-strategy"] for s in dom.iter("section")] == ["tensorflow", "balanced"]
    assert png_size(loaded.png) == (1100, 800) and len(loaded.png) > 20_000


def test_a_planted_script_error_fails_the_check(run: Run, tmp_path: Path, chromium: str) -> None:
    """An error in the page's script is seen: the console says it and the page never gets
    ready, so the clean load above is a real check."""
    page = write_page(run, tmp_path)
    text = page.read_text(encoding="utf-8")
    planted = text.replace('document.body.setAttribute("data-ready"', 'nosuch();\n  document.body.setAttribute("data-ready"', 1)  # fmt: skip
    assert planted != text
    page.write_text(planted, encoding="utf-8")
    loaded = load(page, chromium)
    assert len(loaded.console) == 1
    assert re.match(r'"Uncaught ReferenceError: nosuch is not defined", source: file://', loaded.console[0])  # fmt: skip
    assert "data-ready" not in body(loaded)


def test_markup_in_the_input_stays_text_in_the_browser(
    run: Run, tmp_path: Path, chromium: str
) -> None:
    """A machine named with a script: were it not escaped, the browser would run it and log."""
    machine = tmp_path / "m.yaml"
    machine.write_text(
        "name: \"<script>console.log('pwned')</script><img src=x onerror=console.log(2)>\"\n"
        "gpus:\n  - {name: K520, count: 4}\n"
    )
    loaded = load(write_page(run, tmp_path, machine=str(machine)), chromium)
    assert loaded.console == []
    dom = parse(loaded.dom)
    assert len(dom.iter("script")) == 1 and not dom.iter("img")
    assert "<script>console.log('pwned')</script>" in dom.iter("h1")[0].all_text()
