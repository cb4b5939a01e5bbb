"""Where a spec may write: its `save` paths stay under its folder (or --out-dir); `..`, absolute
paths, `~` and symbolic links on the way are refused before anything runs, by run and plan
alike, with one line naming the op, the path and the fix (--allow-writes-anywhere, which lifts
the rule). The save op writes exactly the path given; `run --save` names archive members safely."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import gpuplace
from gpuplace.errors import BadInput, RuntimeFailure
from tests.conftest import Run

SAVE = "graph:\n  - {name: a, op: constant, value: [1.0, 2.0]}\n  - {name: s, op: save, inputs: [a], path: %s}\n"
FIX = (
    "never through a symbolic link: give a plain relative path, choose the folder with "
    "--out-dir, or allow this with --allow-writes-anywhere"
)
T4 = gpuplace.view(gpuplace.discover("1xT4"), {})


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A spec bundle in tmp/b: a link `out.npy -> ../victim.txt`, a link `up -> ..`, a
    folder `sub`; the victim beside it."""
    (tmp_path / "victim.txt").write_text("victim\n")
    b = tmp_path / "b"
    b.mkdir()
    (b / "out.npy").symlink_to("../victim.txt")
    (b / "up").symlink_to("..")
    (b / "sub").mkdir()
    return b


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../x.npy", "climbs out with '..'"),
        ("sub/../../x.npy", "climbs out with '..'"),
        ("{tmp}/x.npy", "is absolute"),
        ("~/x.npy", "starts at a home folder ('~')"),
        ("out.npy", "goes through a symbolic link ('out.npy -> ../victim.txt')"),
        ("up/x.npy", "goes through a symbolic link ('up -> ..')"),
        ("./up/b/x.npy", "goes through a symbolic link ('up -> ..')"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_save_outside_the_spec_folder_is_refused_before_anything_runs(
    run: Run, bundle: Path, path: str, why: str, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = bundle.parent
    monkeypatch.setenv("HOME", str(tmp))  # were `~` followed, it would write here, and show
    path = path.format(tmp=tmp)
    (bundle / "g.yaml").write_text(SAVE % path)
    before = files(tmp)
    result = run("--machine", "1xT4", command, str(bundle / "g.yaml"))
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"error: {bundle}/g.yaml:3: op 's' (save): path {path!r} {why}; a spec writes only under "
        f"its folder {bundle}, {FIX}\n"
    )
    assert files(tmp) == before and (tmp / "victim.txt").read_text() == "victim\n"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("sub", "path 'sub' is a folder; name a file in it, e.g. 'sub/out.npy'"),
        ("sub/", "path 'sub/' names a folder, not a file; name a file, e.g. out.npy"),
        ("'.'", "path '.' names a folder, not a file; name a file, e.g. out.npy"),
    ],
)  # fmt: skip
def test_a_save_path_naming_a_folder_is_refused(
    run: Run, bundle: Path, path: str, message: str
) -> None:
    (bundle / "g.yaml").write_text(SAVE % path)
    result = run("--machine", "1xT4", "run", str(bundle / "g.yaml"))
    assert (result.code, result.err) == (2, f"error: {bundle}/g.yaml:3: op 's' (save): {message}\n")


def test_out_dir_is_where_save_paths_start_and_the_rule_follows_it(
    run: Run, bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = bundle.parent / "out"
    out.mkdir()
    monkeypatch.chdir(bundle.parent)
    (bundle / "g.yaml").write_text(SAVE % "r/x.npy")
    (out / "r").mkdir()
    result = run("--machine", "1xT4", "run", "b/g.yaml", "--out-dir", "out")
    assert result.code == 0, result.err
    np.testing.assert_array_equal(np.load(out / "r" / "x.npy"), [1.0, 2.0])
    assert not (bundle / "r").exists()
    (bundle / "g.yaml").write_text(SAVE % "../x.npy")
    result = run("--machine", "1xT4", "plan", "b/g.yaml", "--out-dir", "out")
    assert result.err == (
        "error: b/g.yaml:3: op 's' (save): path '../x.npy' climbs out with '..'; a spec writes "
        f"only under --out-dir 'out', {FIX}\n"
    )
    result = run("--machine", "1xT4", "run", "b/g.yaml", "--out-dir", "nope")
    assert (result.code, result.err) == (
        2,
        "error: --out-dir 'nope': not a folder; create it first, or name one that exists\n",
    )


def test_allow_writes_anywhere_lifts_the_rule_and_still_never_writes_through_a_link(
    run: Run, bundle: Path
) -> None:
    tmp = bundle.parent
    for path in ("../x.npy", "out.npy", "up/y.npy", f"{tmp}/z.npy"):
        (bundle / "g.yaml").write_text(SAVE % path)
        result = run("--machine", "1xT4", "run", str(bundle / "g.yaml"), "--allow-writes-anywhere")
        assert result.code == 0, result.err
    for written in (tmp / "x.npy", bundle / "out.npy", tmp / "y.npy", tmp / "z.npy"):
        np.testing.assert_array_equal(np.load(written), [1.0, 2.0])
    assert not (bundle / "out.npy").is_symlink()  # the link was replaced by the file
    assert (tmp / "victim.txt").read_text() == "victim\n"


def test_the_save_op_writes_exactly_the_path_given(run: Run, tmp_path: Path) -> None:
    """numpy.save(name) would write result.npy; the spec said `result`."""
    (tmp_path / "g.yaml").write_text(SAVE % "result")
    assert run("--machine", "1xT4", "run", str(tmp_path / "g.yaml")).code == 0
    assert files(tmp_path) == ["g.yaml", "result"]
    np.testing.assert_array_equal(np.load(tmp_path / "result"), [1.0, 2.0])


def test_the_python_api_names_its_options(bundle: Path) -> None:
    (bundle / "g.yaml").write_text(SAVE % "../x.npy")
    with pytest.raises(BadInput) as err:
        gpuplace.prepare(bundle / "g.yaml", T4, gpuplace.Options(), {})
    assert str(err.value) == (
        f"{bundle}/g.yaml:3: op 's' (save): path '../x.npy' climbs out with '..'; a spec writes "
        f"only under its folder {bundle}, never through a symbolic link: give a plain relative "
        "path, choose the folder with Options.out_dir, or allow this with "
        "Options.allow_writes_anywhere=True"
    )
    options = gpuplace.Options(allow_writes_anywhere=True)
    gpuplace.execute_prepared(gpuplace.prepare(bundle / "g.yaml", T4, options, {}), T4)
    np.testing.assert_array_equal(np.load(bundle.parent / "x.npy"), [1.0, 2.0])
    with pytest.raises(BadInput, match=r"^Options.out_dir=3: expected a folder, e.g. 'out'$"):
        gpuplace.Options(out_dir=3)  # type: ignore[arg-type]
    with pytest.raises(BadInput, match=r"^Options.out_dir='nope': not a folder; create it"):
        gpuplace.prepare(bundle / "g.yaml", T4, gpuplace.Options(out_dir="nope"), {})


def test_a_folder_swapped_for_a_link_after_loading_is_not_written_through(bundle: Path) -> None:
    """The spec was checked when prepared; the kernel looks again before writing."""
    (bundle / "g.yaml").write_text(SAVE % "sub/x.npy")
    prepared = gpuplace.prepare(bundle / "g.yaml", T4, gpuplace.Options(), {})
    (bundle / "sub").rmdir()
    (bundle / "sub").symlink_to("..")
    with pytest.raises(RuntimeFailure) as err:
        gpuplace.execute_prepared(prepared, T4)
    assert str(err.value) == (
        f"save: cannot write '{bundle}/sub/x.npy': its folder is now reached through a symbolic "
        "link"
    )
    assert not (bundle.parent / "x.npy").exists()


def test_run_save_refuses_a_fetch_that_would_unpack_outside_and_keeps_slashes(
    run: Run, tmp_path: Path
) -> None:
    npz = tmp_path / "v.npz"
    spec = tmp_path / "g.yaml"
    spec.write_text("graph:\n  - {name: ../../evil, op: constant, value: 1.0}\n")
    result = run("--machine", "1xT4", "run", str(spec), "--save", str(npz))
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"error: --save {npz}: fetch '../../evil' would be the archive member '../../evil.npy', "
        "which unpacks outside the folder it is unpacked in; rename the op (no '..' between "
        "slashes), or drop --save\n"
    )
    assert not npz.exists()
    spec.write_text("graph:\n  - {name: tower_0/a, op: constant, value: 1.0}\n")
    assert run("--machine", "1xT4", "run", str(spec), "--save", str(npz)).code == 0
    assert float(np.load(npz)["tower_0/a"]) == 1.0


def test_mem_without_a_graph_refuses_the_write_flags(run: Run) -> None:
    result = run("--machine", "1xT4", "mem", "--out-dir", os.curdir, "--allow-writes-anywhere")
    assert result.code == 2
    assert result.err.startswith("error: --out-dir and --allow-writes-anywhere need a GRAPH")
