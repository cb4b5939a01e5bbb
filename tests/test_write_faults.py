"""Every write path under faults: the `save` op, `run --save` and the rates cache, each with a
full disk, a read-only folder and a kill -9 part-way through the file. The previous file is
whole or the new one complete, never a mix; no temporary file is left but by a kill; a file
that cannot be written is a runtime failure (exit 1), with one line naming it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpuplace.devices.rates import MeasuredRate, save_rates
from tests.conftest import Run
from tests.faults import TEMP, disk_full, killed_mid_write, read_only
from tests.strategy.test_rates import UUIDS

VALUES = "graph:\n  - {name: a, op: ones, shape: [50000]}\n  - {name: b, op: neg, inputs: [a]}\n"
SPEC = VALUES + "  - {name: s, op: save, inputs: [a], path: out.npy}\nfetch: [s, b]\n"
OLD = np.arange(3.0)


def old_file(path: Path) -> bytes:
    """Put the previous file (a valid .npy or .npz) at `path`; its bytes, to compare."""
    with path.open("wb") as f:
        (np.savez if path.suffix == ".npz" else np.save)(f, OLD)
    return path.read_bytes()


def spec(tmp_path: Path, text: str = SPEC) -> str:
    path = tmp_path / "g.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("fault", ["disk full", "read-only"])
def test_the_save_op_keeps_the_old_file_and_exits_1(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    out = tmp_path / "out.npy"
    before = old_file(out)
    graph = spec(tmp_path)
    disk_full(monkeypatch) if fault == "disk full" else read_only(monkeypatch, tmp_path)
    result = run("--machine", "1xT4", "run", graph)
    reason = "No space left on device" if fault == "disk full" else "Read-only file system"
    assert (result.code, result.out) == (1, "")
    assert result.err == f"error: save: cannot write {str(out)!r}: {reason}\n"
    assert out.read_bytes() == before and not list(tmp_path.glob(TEMP))


@pytest.mark.parametrize("fault", ["disk full", "read-only"])
def test_run_save_keeps_the_old_file_and_exits_1(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    folder = tmp_path / "values"
    folder.mkdir()
    npz = folder / "v.npz"
    before = old_file(npz)
    graph = spec(tmp_path, VALUES)
    disk_full(monkeypatch) if fault == "disk full" else read_only(monkeypatch, folder)
    result = run("--machine", "1xT4", "run", graph, "--save", str(npz))
    reason = "No space left on device" if fault == "disk full" else "Read-only file system"
    assert (result.code, result.out) == (1, "")
    assert result.err == f"error: --save {npz}: cannot write: {reason}\n"
    assert npz.read_bytes() == before and not list(folder.glob(TEMP))


def test_the_rates_cache_keeps_the_old_file_on_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`devices --check` warns when save_rates raises (measured rates not saved to ...)."""
    path = tmp_path / "rates.json"
    save_rates(path, {"GPU-old": MeasuredRate("Tesla T4", 7.0, 250.0, "2026-11-29")})
    before = path.read_bytes()
    disk_full(monkeypatch, room=10)
    with pytest.raises(OSError, match="No space left on device"):
        save_rates(path, {UUIDS[0]: MeasuredRate("Tesla T4", 8.0, 260.0, "2026-11-30")})
    assert path.read_bytes() == before and not list(tmp_path.glob(TEMP))


def _cli(*args: str) -> str:
    """Child code that runs gpuplace with `args`."""
    return f"from gpuplace.cli import main\nsys.exit(main({list(args)!r}))"


def test_a_kill_during_the_save_op_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    before = old_file(out)
    with killed_mid_write(_cli("--machine", "1xT4", "run", spec(tmp_path)), tmp_path / "flag"):
        assert out.read_bytes() == before
        np.testing.assert_array_equal(np.load(out), OLD)


def test_a_kill_during_run_save_leaves_the_old_file(tmp_path: Path) -> None:
    npz = tmp_path / "v.npz"
    before = old_file(npz)
    body = _cli("--machine", "1xT4", "run", spec(tmp_path, VALUES), "--save", str(npz))
    with killed_mid_write(body, tmp_path / "flag"):
        assert npz.read_bytes() == before
        np.testing.assert_array_equal(np.load(npz)["arr_0"], OLD)


def test_a_kill_while_saving_rates_leaves_the_old_cache(tmp_path: Path) -> None:
    path = tmp_path / "rates.json"
    save_rates(path, {"GPU-old": MeasuredRate("Tesla T4", 7.0, 250.0, "2026-11-29")})
    before = path.read_bytes()
    body = (
        "from gpuplace.devices.rates import MeasuredRate, save_rates\n"
        f"save_rates(__import__('pathlib').Path({str(path)!r}), "
        f"{{{UUIDS[0]!r}: MeasuredRate('Tesla T4', 8.0, 260.0, '2026-11-30')}})"
    )
    with killed_mid_write(body, tmp_path / "flag", room=10):
        assert path.read_bytes() == before and list(json.loads(before)) == ["GPU-old"]


def test_without_faults_each_path_writes_the_complete_new_file(run: Run, tmp_path: Path) -> None:
    """The same runs as above, unstopped: the new files replace the old ones, whole."""
    out, npz = tmp_path / "out.npy", tmp_path / "v.npz"
    old_file(out), old_file(npz)
    result = run("--machine", "1xT4", "run", spec(tmp_path), "--save", str(npz))
    assert result.code == 0, result.err
    np.testing.assert_array_equal(np.load(out), np.ones(50000, dtype=np.float32))
    np.testing.assert_array_equal(np.load(npz)["b"], -np.ones(50000, dtype=np.float32))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.yaml", "out.npy", "v.npz"]
