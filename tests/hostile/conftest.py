"""The hostile suite's zygotes: one for the tests that run in the foreground (the fuzzer, a case
not prefetched) and one behind the prefetch of the selected cases (see runner.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.hostile.cases import Case
from tests.hostile.runner import Prefetch
from tests.hostile.sandbox import ForkServer

LINUX = sys.platform.startswith("linux")
PREFETCH: list[Prefetch] = []  # set once the cases to run are known


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start running the selected hostile cases in the background (not for --collect-only,
    nor with GPUPLACE_HOSTILE_PREFETCH=0, nor in a pytest-xdist worker: each worker collects
    every case but runs only those it is given, and the other worker is the parallelism)."""
    if not LINUX or session.config.option.collectonly or PREFETCH:
        return
    if (
        os.environ.get("GPUPLACE_HOSTILE_PREFETCH", "1") == "0"
        or "PYTEST_XDIST_WORKER" in os.environ
    ):
        return
    cases = [
        case
        for item in session.items
        if isinstance(item, pytest.Function)
        and item.originalname == "test_hostile_input"
        and isinstance(case := item.callspec.params.get("case"), Case)
    ]
    if cases:
        PREFETCH.append(Prefetch(cases))


def pytest_sessionfinish(session: pytest.Session) -> None:
    while PREFETCH:
        PREFETCH.pop().close()


@pytest.fixture(scope="session")
def server() -> Iterator[ForkServer]:
    if not LINUX:
        pytest.skip("the hostile suite's limits need Linux (RLIMIT_AS, fork, /proc)")
    zygote = ForkServer()
    yield zygote
    zygote.close()


@pytest.fixture
def prefetched() -> Prefetch | None:
    """The background runs of the selected cases, if any."""
    return PREFETCH[0] if PREFETCH else None
