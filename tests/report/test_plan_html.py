"""`gpuplace plan --format html -o FILE.html` without a browser: what the page holds (both
placements, every device, the tables, simulated GPUs said so), that every input string is
escaped and clipped, that a huge graph gives a bounded page, and where the file may go."""

from __future__ import annotations

import json
import os
import re
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from gpuplace.echo import clip_middle
from gpuplace.fileio import write_atomic
from gpuplace.report.html import MEMORY_NOTE
from tests.conftest import Run
from tests.conftest import write_spec as write
from tests.fakes.fake_pynvml import FakeNvml, four_gpus
from tests.report.page import Element, parse

TOWERS = "examples/guide/04_multi_tower.yaml"
WRITTEN = re.compile(r"Plan report \((.+)\) written to (.+) \(\d+(\.\d)? KiB\)\n")
DEVICES = ["GPU:0", "GPU:1", "GPU:2", "GPU:3", "CPU:0"]


def report(run: Run, tmp_path: Path, *args: str, machine: str = "4xK520") -> tuple[str, Element]:
    """(what plan printed, the page) for `plan ARGS --format html -o tmp/plan.html`."""
    out = tmp_path / "plan.html"
    result = run("--machine", machine, "plan", *args, "--format", "html", "-o", str(out))
    assert (result.code, result.err) == (0, ""), result.err
    text = out.read_text(encoding="utf-8")
    return text, parse(text)


def sides(page: Element) -> list[Element]:
    return [e for e in page.iter("section") if "side" in e.attrs.get("class", "")]


def test_the_page_shows_both_placements_every_device_and_the_tables(
    run: Run, tmp_path: Path
) -> None:
    out = tmp_path / "plan.html"
    result = run("--machine", "4xK520", "plan", TOWERS, "--format", "html", "-o", str(out))
    assert (result.code, result.err) == (0, "")
    match = WRITTEN.fullmatch(result.out)
    assert match and match.group(1, 2) == ("tensorflow beside balanced", clip_middle(str(out)))
    page = parse(out.read_text(encoding="utf-8"))
    legend = [li.attrs["data-device"] for li in page.iter("li")]
    assert legend == DEVICES
    assert [li.all_text() for li in page.iter("li")] == [
        "GPU:0 [simulated]", "GPU:1 [simulated]", "GPU:2 [simulated]", "GPU:3 [simulated]", "CPU:0",
    ]  # fmt: skip
    assert "Every GPU on this page is simulated (4xK520)" in page.all_text()
    left, right = sides(page)
    assert [left.attrs["data-strategy"], right.attrs["data-strategy"]] == ["tensorflow", "balanced"]
    for side in (left, right):
        headings = [h.all_text() for h in side.iter("h3")]
        assert headings == ["Placement graph", "Estimated schedule", "Memory in use over time",
                            "Per device", "Placement"]  # fmt: skip
        ops = side.iter("table")[-1]
        names = [tr.children[0].all_text() for tr in ops.iter("tr")[1:]]
        assert names == ["Const", "Const_1", "MatMul", "Const_2", "Const_3", "MatMul_1", "AddN"]
        devices_table = side.iter("table")[0]
        assert [tr.children[0].all_text() for tr in devices_table.iter("tr")[1:]] == DEVICES
        boxes = {g.attrs["data-device"] for g in side.iter("g")}
        assert boxes == {"GPU:2", "GPU:3", "CPU:0"}  # the guide pins the towers and the sum
        lanes = {
            r.attrs["data-device"]
            for r in side.iter("rect")
            if "op-bar" in r.attrs.get("class", "")
        }
        assert lanes == {"GPU:2", "GPU:3", "CPU:0"}
        copies = [r for r in side.iter("rect") if "copy-bar" in r.attrs.get("class", "")]
        assert {c.attrs["data-device"] for c in copies} == {"CPU:0"}  # each tower's product
        assert "Estimated makespan" in side.iter("p")[0].all_text()


def test_the_page_is_self_contained(run: Run, tmp_path: Path) -> None:
    """Nothing is fetched when it is viewed: no src or href, one inline script, one inline
    style, and a policy that forbids any load."""
    text, page = report(run, tmp_path, TOWERS)
    elements = page.iter()
    assert not [e.tag for e in elements if {"src", "href"} & set(e.attrs)]
    assert [len(e.attrs) for e in page.iter("script")] == [0]
    assert len(page.iter("style")) == 1
    policy = [m.attrs["content"] for m in page.iter("meta") if "http-equiv" in m.attrs]
    assert policy == ["default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"]  # fmt: skip
    assert re.findall(r"https?://[^\s\"'<]+", text) == ["http://www.w3.org/2000/svg"] * len(
        page.iter("svg")
    )  # the SVG namespace: a name, never fetched


def test_the_strategy_asked_is_drawn_beside_tensorflows(run: Run, tmp_path: Path) -> None:
    _, page = report(run, tmp_path, TOWERS, "--strategy", "round-robin")
    assert [s.attrs["data-strategy"] for s in sides(page)] == ["tensorflow", "round-robin"]
    rows = page.iter("table")[0].iter("tr")[1:]
    assert [tr.children[0].all_text() for tr in rows] == ["tensorflow", "round-robin"]


def test_every_input_string_is_escaped(run: Run, tmp_path: Path) -> None:
    """Op names cannot hold markup (the loader refuses them), but a machine file's name can:
    it shows escaped, and the page keeps its one script."""
    machine = tmp_path / "m.yaml"
    machine.write_text(
        'name: "<script>alert(\'m\')</script> & \\"q\\" <img src=x onerror=alert(1)>"\n'
        "gpus:\n  - {name: K520, count: 2}\n"
    )
    text, page = report(run, tmp_path, TOWERS.replace("04_multi_tower", "02_manual_placement"),
                        machine=str(machine))  # fmt: skip
    assert "<script>alert" not in text and "<img" not in text
    assert len(page.iter("script")) == 1 and not page.iter("img")
    assert page.iter("h1")[0].all_text() == (
        "gpuplace plan on the simulated machine <script>alert('m')</script> & \"q\" "
        "<img src=x onerror=alert(1)>"
    )
    assert "&lt;script&gt;alert(&#x27;m&#x27;)&lt;/script&gt; &amp; &quot;q&quot;" in text


def test_huge_names_are_clipped(run: Run, tmp_path: Path) -> None:
    long = "a" * 3000
    spec = write(tmp_path, f"graph:\n  - {{name: {long}, op: constant, value: [1.0, 2.0]}}\n"
                           f"  - {{name: b, op: neg, inputs: [{long}]}}\n")  # fmt: skip
    text, page = report(run, tmp_path, spec)
    assert "a" * 201 not in text
    tips = [t.all_text() for t in page.iter("title")]
    assert "a" * 197 + "... on GPU:0" in tips
    boxes = [t.all_text() for g in page.iter("g") for t in g.iter("text")]
    assert boxes[:2] == ["a" * 19 + "...", "b"]


def test_a_huge_graph_gives_a_bounded_page(run: Run, tmp_path: Path) -> None:
    """1,200 ops in 40 scopes: drawn as groups, 400 op rows per placement, and the page says
    what it left out."""
    lines = ["graph:", "  - {name: x, op: constant, value: [1.0, 2.0]}"]
    previous = "x"
    for i in range(1200):
        name = f"s{i % 40}/n{i}"
        lines.append(f"  - {{name: {name}, op: neg, inputs: [{previous}]}}")
        previous = name
    text, page = report(run, tmp_path, write(tmp_path, "\n".join(lines) + "\n"))
    notes = [p.all_text() for p in page.iter("p") if p.attrs.get("class") == "note"]
    assert (
        notes
        == [
            "1201 ops drawn as 41 groups (by name scope and device)",
            MEMORY_NOTE,
            "801 more ops not shown; the text plan lists every op",
        ]
        * 2
    )
    assert len(page.iter("g")) == 2 * 41
    assert len(text) < 400_000
    bars = [r for r in page.iter("rect") if "op-bar" in r.attrs.get("class", "")]
    assert len(bars) <= 2 * 640  # merged per pixel, not one per op


def test_an_oom_plan_writes_the_page_then_fails_as_the_text_plan_does(
    run: Run, tmp_path: Path
) -> None:
    out = tmp_path / "plan.html"
    text = run("--machine", "4xK520", "plan", "examples/big_model.yaml")
    html = run("--machine", "4xK520", "plan", "examples/big_model.yaml", "--format", "html",
               "-o", str(out))  # fmt: skip
    assert (text.code, html.code) == (1, 1) and html.err == text.err
    assert html.err.startswith("error: OOM when allocating 32.0 MiB")
    page = parse(out.read_text(encoding="utf-8"))
    fits = [tr.children[-1].all_text() for tr in page.iter("table")[1].iter("tr")[1:]]
    assert fits == ["NO", "yes", "yes", "yes", "-"]  # tensorflow's GPU:0 is over its limit
    summary = [[td.all_text() for td in tr.children] for tr in page.iter("table")[0].iter("tr")]
    assert [row[0] for row in summary] == ["STRATEGY", "tensorflow", "balanced"]
    assert [row[2:] for row in summary[1:]] == [["61", "0", "NO: GPU:0"], ["61", "3", "yes"]]


SIM = ("--machine", "4xK520", "plan", TOWERS)
FIX = "name a file ending in .html (e.g. -o plan.html)"
REFUSED = [
    (("-o", "x.html"), "-o x.html: only --format html, device-map or tf write a file (the other formats print); add one of them, or drop -o"),
    (("--format", "html"), "--format html writes one file: name it with -o (e.g. -o plan.html)"),
    (("--format", "html", "-o", "g.yaml"), f"-o g.yaml: the report is an HTML page; {FIX}"),
    (("--format", "html", "-o", ""), f"-o '': the report is an HTML page; {FIX}"),
    (("--format", "html", "-o", "d.html"), f"-o d.html: is a folder; {FIX} in it"),
    (("--format", "html", "-o", "no/such/plan.html"), "-o no/such/plan.html: the folder no/such does not exist; create it first, or write the report somewhere that exists"),
    (("--format", "html", "-o", "fifo.html"), f"-o fifo.html: is not a regular file (a FIFO, device or socket); {FIX}"),
    (("--format", "html", "--json", "-o", "x.html"), "--json conflicts with --format html: --json is short for --format json; give one of them"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "error"), REFUSED)
def test_where_the_report_may_not_go_is_refused_before_anything_runs(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], error: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.html").mkdir()
    os.mkfifo(tmp_path / "fifo.html")
    (tmp_path / "g.yaml").write_text("graph: []\n")
    before = sorted(os.listdir(tmp_path))
    result = run(*SIM[:3], os.path.join(os.path.dirname(__file__), "..", "..", TOWERS), *args)
    assert (result.code, result.err) == (2, f"error: {error}\n")
    if "--json" in args:  # asked for JSON: the error is a document too
        assert json.loads(result.out)["error"]["message"] == error
    else:
        assert result.out == ""
    assert (
        sorted(os.listdir(tmp_path)) == before
        and (tmp_path / "g.yaml").read_text() == "graph: []\n"
    )


def test_a_link_at_the_path_is_replaced_not_written_through(run: Run, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "plan.html").symlink_to(victim)
    _, page = report(run, tmp_path, TOWERS)
    assert victim.read_text() == "keep me" and not (tmp_path / "plan.html").is_symlink()
    assert len(sides(page)) == 2


def test_a_write_that_fails_is_a_runtime_failure(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(path: str, write: object) -> None:
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr("gpuplace.fileio.write_atomic", full)
    out = tmp_path / "plan.html"
    result = run(*SIM, "--format", "html", "-o", str(out))
    assert (result.code, result.out) == (1, "")
    assert result.err == (
        f"error: -o {clip_middle(str(out))}: cannot write the report: No space left on device\n"
    )
    assert not out.exists() and write_atomic is not full


def test_many_devices_draw_a_bounded_number_of_lanes(run: Run, tmp_path: Path) -> None:
    zeros = "".join(f"  - {{name: z{i}, op: zeros, shape: [64, 64]}}\n" for i in range(100))
    spec = write(tmp_path, "graph:\n" + zeros)
    _, page = report(run, tmp_path, spec, "--strategy", "round-robin", machine="40xK520")
    left, right = sides(page)
    assert len(left.iter("svg")) == 1 + 1 + 1  # graph, schedule, GPU:0's memory
    notes = [p.all_text() for p in right.iter("p") if p.attrs.get("class") == "note"]
    assert notes[0] == "40 devices hold ops; the first 32 are drawn, here and below"
    lanes = {
        r.attrs["data-device"] for r in right.iter("rect") if "op-bar" in r.attrs.get("class", "")
    }
    assert lanes == {f"GPU:{i}" for i in range(32)}
    assert len(right.iter("svg")) == 1 + 1 + 32
    assert len(page.iter("li")) == 41  # the legend names every device


def test_the_pages_files_ship_in_the_wheel() -> None:
    """The template, CSS and script are package data (a pip install has them)."""
    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parents[2]
    shipped = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = shipped["package-data"]["gpuplace"]
    folder = root / "gpuplace" / "report" / "html"
    assets = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix != ".py")
    assert assets == ["page.css", "page.html", "page.js"]
    for name in assets:
        assert any(fnmatch(f"report/html/{name}", pattern) for pattern in patterns), name


def test_real_gpus_are_not_called_simulated(run: Run, tmp_path: Path) -> None:
    """On a machine NVML reports (a fake pynvml here) nothing says simulated."""
    out = tmp_path / "plan.html"
    result = run(
        "plan",
        TOWERS,
        "--format",
        "html",
        "-o",
        str(out),
        nvml=FakeNvml(four_gpus()),
        env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    )
    assert (result.code, result.err) == (0, "")
    page = parse(out.read_text(encoding="utf-8"))
    assert [li.all_text() for li in page.iter("li")] == DEVICES
    assert page.iter("h1")[0].all_text() == "gpuplace plan on this machine"
    shown = page.iter("header")[0].all_text() + page.iter("main")[0].all_text()
    assert "Plan on this machine (strategy tensorflow)" in shown
    assert "simulated" not in shown.lower() and not page.iter("p")[0].attrs


def test_more_groups_than_drawn_are_counted(run: Run, tmp_path: Path) -> None:
    ops = "".join(f"  - {{name: s{i}/z, op: zeros, shape: [{1 + i % 7}, 8]}}\n" for i in range(200))
    _, page = report(run, tmp_path, write(tmp_path, "graph:\n" + ops))
    notes = [p.all_text() for p in page.iter("p") if p.attrs.get("class") == "note"]
    assert notes[0] == (
        "200 ops in 200 groups (by name scope and device); the 150 largest groups are drawn, "
        "50 left out"
    )
    assert len(sides(page)[0].iter("g")) == 150


def test_a_comparison_that_cannot_be_made_is_said(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the second placement fails, the page shows the first and says why not."""
    import gpuplace.pipeline
    from gpuplace.errors import BadInput

    real = gpuplace.pipeline.prepare

    def prepare(*args: Any, **kw: Any) -> Any:
        if args[2].strategy == "balanced":
            raise BadInput("balanced: <planted> failure")
        return real(*args, **kw)

    monkeypatch.setattr(gpuplace.pipeline, "prepare", prepare)
    out = tmp_path / "plan.html"
    result = run("--machine", "4xK520", "plan", TOWERS, "--format", "html", "-o", str(out))
    assert (result.code, result.err) == (0, "")
    assert WRITTEN.fullmatch(result.out) and "(tensorflow)" in result.out
    page = parse(out.read_text(encoding="utf-8"))
    assert [s.attrs["data-strategy"] for s in sides(page)] == ["tensorflow"]
    notes = [
        p.all_text() for p in page.iter("header")[0].iter("p") if p.attrs.get("class") == "note"
    ]
    assert notes == ["Not compared: strategy balanced: balanced: <planted> failure"]
    assert "&lt;planted&gt;" in out.read_text(encoding="utf-8")
