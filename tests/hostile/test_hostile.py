"""The hostile-input suite (issue #12): every case of the tables is run as `gpuplace` is run,
under resource limits, and must end as promised: the exit code the table gives (0 success, 1
runtime failure, 2 bad input, 130 interrupted), one `error:` line naming what was wrong (the
case's phrase), no traceback, at most a screen of messages, every file around it as it was
(except the outputs the case declares), and no hang, no kill (`cases.broken_promise`).

A case that today's code fails carries `xfail` (strict): it turns into a failure the moment the
fix lands, and the mark is then removed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.hostile.cases import CLASSES, Case, broken_promise
from tests.hostile.runner import Prefetch, execute
from tests.hostile.sandbox import ForkServer, Outcome
from tests.hostile.table_errors import CASES as ERRORS
from tests.hostile.table_files import CASES as FILES
from tests.hostile.table_memory import CASES as MEMORY
from tests.hostile.table_onnx import CASES as ONNX
from tests.hostile.table_screens import CASES as SCREENS

ALL: list[Case] = [*FILES, *MEMORY, *ERRORS, *SCREENS, *ONNX]


def _param(case: Case) -> object:
    marks = []
    if case.xfail:
        marks.append(pytest.mark.xfail(strict=True, reason=f"#12 {case.kind}: {case.xfail}"))
    return pytest.param(case, id=case.id, marks=marks)


def assert_case(case: Case, outcome: Outcome) -> None:
    """What this case promises beyond the common ones: its phrase and stdout's size."""
    broken = broken_promise(outcome, case.codes(), case.error_line)
    assert broken is None, f"{broken}: {outcome.verdict()}"
    said = outcome.stderr if outcome.code != 0 else outcome.stdout + outcome.stderr
    assert re.search(case.phrase, said, re.I | re.S), (
        f"{case.phrase!r} not said: {outcome.verdict()}"
    )
    if case.max_stdout is not None:
        assert len(outcome.stdout) <= case.max_stdout, (
            f"{len(outcome.stdout)} characters on stdout: {outcome.stdout[:300]!r}..."
        )


def test_every_case_has_a_class_and_a_unique_id() -> None:
    assert {c.kind for c in ALL} <= set(CLASSES)
    ids = [c.id for c in ALL]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", [_param(c) for c in ALL])
def test_hostile_input(case: Case, tmp_path: Path, server: ForkServer,
                       prefetched: Prefetch | None) -> None:  # fmt: skip
    result = prefetched.result(case) if prefetched else None
    result = result or execute(case, tmp_path, server)
    assert_case(case, result.outcome)
    changed = result.changed()
    assert not changed, f"files around it changed: {changed[:10]}: {result.outcome.verdict()}"
    if case.check is not None:
        case.check(result.world, result.outcome)
