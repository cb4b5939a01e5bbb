"""Running hostile cases: one case in a world of its own (`execute`), and all the selected cases
ahead of their tests in a background thread (`Prefetch`).

Most cases take a few milliseconds, but each blow-up of today's code runs until its limit stops
it (seconds to tens of seconds). The test run spends most of its time waiting on subprocesses,
so the prefetch runs the cases, slowest first, on a zygote of its own beside the rest of the
suite; each test then checks the outcome of its case. Checks are the tests' own: nothing here
asserts anything.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from tests.hostile.cases import Case, build_world, fill
from tests.hostile.sandbox import ForkServer, Outcome, clean_env, run_fresh, snapshot

SLOW_FIRST = ("cliff", "memory")
WAIT_S = 1800.0  # for a prefetched outcome: only if the background thread died without a word


@dataclass(frozen=True)
class Result:
    """A case's outcome, its world, and the world's entries before and after the run (except
    the outputs the case declares)."""

    outcome: Outcome
    world: Path
    before: dict[str, str]
    after: dict[str, str]

    def changed(self) -> list[str]:
        keys = self.before.keys() | self.after.keys()
        return sorted(k for k in keys if self.before.get(k) != self.after.get(k))


def execute(case: Case, folder: Path, server: ForkServer) -> Result:
    """Build the case's world under `folder`, run it, and look at the world again."""
    world, io = folder / "world", folder / "io"
    build_world(world, case.files)
    io.mkdir()
    before = snapshot(world, case.outputs)
    env = clean_env(world, {k: fill(v, world) for k, v in case.env.items()})
    argv = [fill(a, world) for a in case.argv]
    if case.fresh:
        outcome = run_fresh(argv, env, world, case.limits, case.stdout, case.interrupt_after)
    else:
        outcome = server.run(argv, env, world, io, case.limits)
    return Result(outcome, world, before, snapshot(world, case.outputs))


class Prefetch:
    """Runs `cases` in a background thread, the classes whose blow-ups take longest first."""

    def __init__(self, cases: list[Case]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="gpuplace-hostile-"))
        self.futures: dict[str, Future[Result]] = {c.id: Future() for c in cases}
        self.stopping = threading.Event()
        order = sorted(cases, key=lambda c: c.kind not in SLOW_FIRST)
        self.thread = threading.Thread(target=self._work, args=(order,), daemon=True)
        self.thread.start()

    def _work(self, cases: list[Case]) -> None:
        server: ForkServer | None = None
        try:
            server = ForkServer()
            for n, case in enumerate(cases):
                if self.stopping.is_set():
                    break
                future = self.futures[case.id]
                try:
                    folder = self.folder / f"{n:03d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', case.id)}"
                    future.set_result(execute(case, folder, server))
                except BaseException as exc:  # handed to the test that waits for it
                    future.set_exception(exc)
        except BaseException as exc:
            for future in self.futures.values():
                if not future.done():
                    future.set_exception(exc)
        finally:
            if server is not None:
                server.close()
            for future in self.futures.values():
                if not future.done():
                    future.set_exception(RuntimeError("the hostile prefetch stopped early"))

    def result(self, case: Case) -> Result | None:
        """The case's result, once run (None when it was not selected for the prefetch)."""
        future = self.futures.get(case.id)
        return None if future is None else future.result(WAIT_S)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(120)
        shutil.rmtree(self.folder, ignore_errors=True)
