"""`gpuplace examples [DIR]`: the bundled example specs, copied for a pip user; writes only under
DIR, atomically, never through a link, never over a file that differs unless --force."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from gpuplace.bundled import bundled_examples
from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = sorted(
    str(p.relative_to(ROOT / "examples")) for p in (ROOT / "examples").rglob("*")
    if p.is_file() and p.suffix in (".yaml", ".py", ".onnx") and "__pycache__" not in p.parts
)  # fmt: skip


def test_the_bundle_is_every_example_in_the_repo() -> None:
    files = bundled_examples()
    assert sorted(files) == BUNDLE
    assert (
        files["guide/02_manual_placement.yaml"]
        == (ROOT / "examples/guide/02_manual_placement.yaml").read_bytes()
    )


def test_copies_then_says_so_again(run: Run, tmp_path: Path) -> None:
    folder = tmp_path / "ex"
    first = run("examples", str(folder))
    assert first.code == 0, first.err
    n = len(BUNDLE)
    assert first.out == (
        f"wrote {n} of the {n} example files to {folder}; try: gpuplace run "
        f"{folder}/guide/02_manual_placement.yaml --explain\n"
    )
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == BUNDLE
    again = run("examples", str(folder))
    assert again.code == 0 and again.out.startswith(f"{folder} already holds the {n} example files")


def test_the_copied_guide_example_runs(run: Run, tmp_path: Path) -> None:
    run("examples", str(tmp_path / "ex"))
    result = run("--machine", "2xK520", "run", str(tmp_path / "ex/guide/02_manual_placement.yaml"))
    assert result.code == 0, result.err
    assert "device:CPU:0" in result.out


def test_a_changed_file_is_kept_unless_forced(run: Run, tmp_path: Path) -> None:
    folder = tmp_path / "ex"
    run("examples", str(folder))
    mine = folder / "big_model.yaml"
    mine.write_text("ops: []\n")
    refused = run("examples", str(folder))
    assert refused.code == 2
    assert refused.err == (
        f"error: '{mine}' exists and differs from the bundled example; keep it and copy into "
        "another folder, or replace it with --force\n"
    )
    assert mine.read_text() == "ops: []\n"
    forced = run("examples", str(folder), "--force")
    assert forced.code == 0 and forced.out.startswith(f"wrote 1 of the {len(BUNDLE)}")
    assert mine.read_bytes() == bundled_examples()["big_model.yaml"]


def test_never_writes_through_a_linked_sub_folder(run: Run, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = tmp_path / "ex"
    folder.mkdir()
    os.symlink(elsewhere, folder / "guide")
    result = run("examples", str(folder))
    assert result.code == 2
    assert f"'{folder}/guide' is a symbolic link" in result.err
    assert list(elsewhere.iterdir()) == [] and list(folder.iterdir()) == [folder / "guide"]


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_refuses_what_is_not_a_folder_or_a_file(run: Run, tmp_path: Path, kind: str) -> None:
    if kind == "file":
        target = tmp_path / "ex"
        target.write_text("x")
        expected = f"error: '{target}' is not a folder; name a folder (it may not exist yet)\n"
    else:
        (tmp_path / "ex").mkdir()
        target = tmp_path / "ex" / "small_model.yaml"
        os.mkfifo(target)
        expected = (
            f"error: '{target}' is not a regular file; remove it or copy into another folder\n"
        )
    result = run("examples", str(tmp_path / "ex"))
    assert (result.code, result.err) == (2, expected)


@pytest.mark.slow
def test_the_wheel_ships_the_examples(tmp_path: Path) -> None:
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("gpuplace-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n.removeprefix("gpuplace/examples/") for n in names
                  if n.startswith("gpuplace/examples/")) == BUNDLE  # fmt: skip
    assert any(n.endswith("licenses/LICENSE") for n in names)


@pytest.mark.parametrize("name", ["a" * 5000, "d/" * 3000])
def test_a_name_too_long_is_one_line(run: Run, tmp_path: Path, name: str) -> None:
    result = run("examples", str(tmp_path / name))
    assert (result.code, result.out) == (2, "")
    (line,) = result.err.splitlines()
    assert line.startswith("error: cannot use '") and "File name too long" in line
    assert len(line) < 400 and list(tmp_path.iterdir()) == []
