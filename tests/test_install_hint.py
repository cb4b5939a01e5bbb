"""Fix hints that install an extra name what pip can find for the way gpuplace was installed:
the package from an index, the folder for a source checkout (where `gpuplace[cuda12]` is not on
any index)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplace.devices import cuda_match

ROOT = Path(__file__).resolve().parents[1]


def test_the_suite_runs_from_an_editable_install_of_this_checkout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.undo()  # the autouse fixture pretends an index install; read the real record
    folder, editable = cuda_match.installed_from()
    assert folder is not None and Path(folder).resolve() == ROOT
    assert editable


@pytest.mark.parametrize(
    ("origin", "hint"),
    [
        ((None, False), "install the cupy for CUDA 12: pip install 'gpuplace[cuda12]'"),
        (
            ("/src/gpuplace", True),
            "install the cupy for CUDA 12: pip install -e '/src/gpuplace[cuda12]'",
        ),
        (
            ("/src/gpuplace", False),
            "install the cupy for CUDA 12: pip install '/src/gpuplace[cuda12]'",
        ),
    ],
)
def test_the_hint_follows_the_install(
    monkeypatch: pytest.MonkeyPatch, origin: tuple[str | None, bool], hint: str
) -> None:
    monkeypatch.setattr(cuda_match, "installed_from", lambda: origin)
    assert cuda_match.cupy_for(12) == hint


def test_both_extras_are_named_for_a_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_match, "installed_from", lambda: ("/src/gp", True))
    assert cuda_match.install_cupy() == (
        "pip install -e '/src/gp[cuda12]' (CUDA 12) or -e '/src/gp[cuda13]' (CUDA 13)"
    )
